/**
 * The shared backend conformance suite against a real Ceph radosgw (scripts/radosgw.sh), with the
 * store's own conditional writes, multipart uploads (including its empty CompleteMultipartUpload ETag)
 * and ListObjectsV2 continuation tokens. Skipped, with the reason, when Ceph is not installed here.
 */
import { describe, expect, it } from 'vitest';
import { backendConformance } from '../../src/main/engine/backend/conformance.js';
import type { S3Backend } from '../../src/main/engine/backend/s3/index.js';
import { emptyPrefix, s3Backend, useRadosgw } from './servers.js';

const rgw = await useRadosgw();

if (typeof rgw === 'string') {
  describe.skip(`radosgw conformance skipped: ${rgw}`, () => {
    it('needs radosgw', () => {});
  });
} else {
  backendConformance(
    's3 on radosgw',
    async () => s3Backend(rgw, 'conformance'),
    (b) => emptyPrefix(rgw, b as S3Backend),
  );
  backendConformance(
    's3 on radosgw (multipart, 2-key list pages)',
    async () =>
      s3Backend(rgw, 'conformance', {
        partSize: 5 * 1024 * 1024,
        multipartThreshold: 6 * 1024 * 1024,
        listPageSize: 2,
      }),
    (b) => emptyPrefix(rgw, b as S3Backend),
  );

  describe('s3 on radosgw: store behaviour', () => {
    it('detects that radosgw honours If-None-Match: * and refuses the second create atomically', async () => {
      const b = s3Backend(rgw, 'conformance');
      try {
        await b.init();
        expect(await b.conditionalWrites()).toBe(true);
        // Many writers race to create one lock object: exactly one wins.
        const results = await Promise.allSettled(
          Array.from({ length: 8 }, (_, i) =>
            b.save('locks', 'race', Buffer.from(`writer ${i}`), { ifNotExists: true }),
          ),
        );
        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
        const winner = results.findIndex((r) => r.status === 'fulfilled');
        expect((await b.load('locks', 'race')).toString()).toBe(`writer ${winner}`);
      } finally {
        await b.close();
        await emptyPrefix(rgw, b);
      }
    });
  });
}
