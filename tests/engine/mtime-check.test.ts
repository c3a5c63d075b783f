/**
 * A file is reported as "changed while it was being read" when its size or modification time after
 * reading differs from what the scan saw. Both sides must read the time the same way: with fs.Stats'
 * mtimeMs after reading (nanoseconds kept, rounded as a double) against the scan's microseconds, ~0.1% of
 * files whose times the kernel keeps to the nanosecond were reported although nothing had changed.
 */
import { describe, it, expect } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { MemoryBackend } from '../../src/main/engine/backend/memory/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { mtimeMsOf } from '../../src/main/engine/scan/index.js';
import { nanosecondTimes, setTimes } from '../../src/main/engine/restore/times.js';
import { tempDir, randomBytes } from '../helpers/fixtures.js';

// a time whose double milliseconds (seconds × 1e3 + nanoseconds / 1e6) differ from its microseconds by
// 1.22 µs: the old check (> 1 µs apart) called such a file changed
const NS = 1765051496807932994n;

describe('the check for files that change while they are read', () => {
  it.skipIf(!nanosecondTimes)(
    'does not report unchanged files whose times are kept to the nanosecond (small, large, block files)',
    async () => {
      const sec = Number(NS / 1_000_000_000n);
      const nsec = Number(NS % 1_000_000_000n);
      expect(Math.abs(sec * 1e3 + nsec / 1e6 - mtimeMsOf(NS))).toBeGreaterThan(0.001);
      const dir = await tempDir('tm-mtime-');
      const files = {
        'small.txt': randomBytes(5_000, 1), // read with others in one batch
        'large.bin': randomBytes(3 * 1024 * 1024, 2), // read whole, chunked
        'disk.img': randomBytes(64 * 1024 * 1024, 3), // a block file
      };
      for (const [name, data] of Object.entries(files)) {
        const p = path.join(dir, name);
        await fs.writeFile(p, data);
        await setTimes(Buffer.from(p), NS.toString());
        expect((await fs.stat(p, { bigint: true })).mtimeNs).toBe(NS);
      }
      const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
      const r = await backup(repo, { paths: [dir], blockFiles: {} });
      expect(r.skipped).toEqual([]);
      expect(r.status).toBe('completed');
      expect(r.snapshot.stats.filesRead).toBe(3);
    },
  );
});
