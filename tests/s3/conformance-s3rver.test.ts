/**
 * The shared backend conformance suite against the S3 backend on s3rver (in-process, loopback).
 * s3rver ignores If-None-Match on PUT, so this also covers the HEAD-then-PUT fallback for conditional
 * writes; a second run uses tiny parts so the 12 MiB object goes up as a multipart upload, and a tiny
 * list page so listing walks markers (s3rver's v2 continuation tokens use a cipher that OpenSSL 3 lacks;
 * the radosgw suite covers v2 paging).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backendConformance } from '../../src/main/engine/backend/conformance.js';
import type { S3Backend } from '../../src/main/engine/backend/s3/index.js';
import { emptyPrefix, s3Backend, startS3rver, type S3Server } from './servers.js';

let server: S3Server;
beforeAll(async () => {
  server = await startS3rver();
});
afterAll(async () => {
  await server?.close();
});

backendConformance(
  's3 on s3rver',
  async () => s3Backend(server, 'conformance'),
  (b) => emptyPrefix(server, b as S3Backend),
);
backendConformance(
  's3 on s3rver (multipart, 2-key list pages)',
  async () =>
    s3Backend(server, 'conformance', {
      partSize: 5 * 1024 * 1024,
      multipartThreshold: 6 * 1024 * 1024,
      listPageSize: 2,
      listApi: 1,
    }),
  (b) => emptyPrefix(server, b as S3Backend),
);

describe('s3 on s3rver: store detection', () => {
  it('detects that s3rver ignores If-None-Match and falls back', async () => {
    const b = s3Backend(server, 'conformance');
    await b.init();
    expect(await b.conditionalWrites()).toBe(false);
    await b.close();
  });
});
