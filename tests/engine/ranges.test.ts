/**
 * Level 1 of change tracking, engine side: given the byte ranges that changed (what the block tracker
 * reports), a backup reads only the chunks around them and must produce exactly the chunk list a
 * full read would.
 */
import { describe, it, expect } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { MemoryBackend } from '../../src/main/engine/backend/memory/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { lookup } from '../../src/main/engine/repo/browse.js';
import { tempDir, randomBytes, seededRandom, type RangeEdit } from '../helpers/fixtures.js';

const MiB = 1024 * 1024;

const scenarios: Record<string, RangeEdit> = {
  'scattered 4 KiB page writes': async (fh, size, rand) => {
    const out = [];
    // few enough that they touch under half of the ~24 chunks (more: the engine reads the file whole)
    for (let i = 0; i < 6; i++) {
      const offset = rand(size / 4096) * 4096;
      await fh.write(randomBytes(4096, 500 + i), 0, 4096, offset);
      out.push({ offset, length: 4096 });
    }
    return out;
  },
  'an append': async (fh, size) => {
    await fh.write(randomBytes(300_000, 9), 0, 300_000, size);
    return [{ offset: size, length: 300_000 }];
  },
  'a truncation': async (fh, size) => {
    await fh.truncate(size - 2 * MiB - 123);
    return [{ offset: size - 2 * MiB - 123, length: 2 * MiB + 123 }];
  },
  'a write across the first chunk boundary and at offset 0': async (fh) => {
    await fh.write(randomBytes(2 * MiB, 10), 0, 2 * MiB, 0);
    return [{ offset: 0, length: 2 * MiB }];
  },
};

describe('backups that read only changed ranges', () => {
  for (const [name, edit] of Object.entries(scenarios)) {
    it(`equal a full read after ${name}`, async () => {
      const dir = await tempDir('tm-ranges-');
      const file = path.join(dir, 'disk.img');
      await fs.writeFile(file, randomBytes(24 * MiB, 77));
      const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
      const first = await backup(repo, { paths: [dir] });
      const fh = await fs.open(file, 'r+');
      const changed = await edit(fh, 24 * MiB, seededRandom(4242));
      await fh.close();
      const size = (await fs.stat(file)).size;
      const withRanges = await backup(repo, {
        paths: [dir],
        parent: first.snapshotId,
        changeHint: {
          dirtyDirs: new Set([dir]),
          cursor: { test: true },
          changedRanges: new Map([[file, changed]]),
        },
      });
      const fullRead = await backup(repo, { paths: [dir], parent: first.snapshotId });
      const a = (await lookup(repo, withRanges.snapshot, file)).node!;
      const b = (await lookup(repo, fullRead.snapshot, file)).node!;
      expect(a.size).toBe(size);
      expect(a.content).toEqual(b.content);
      expect(fullRead.snapshot.stats.bytesRead).toBe(size);
      const written = changed.reduce((s, r) => s + r.length, 0);
      // only the chunks around the changes were read (chunks average 1 MiB, at most 4 MiB)
      expect(withRanges.snapshot.stats.bytesRead).toBeLessThan(
        Math.min(size, written + changed.length * 2 * 4 * MiB + 4 * MiB),
      );
      if (name.startsWith('scattered')) expect(withRanges.snapshot.stats.bytesRead).toBeLessThan(size * 0.9);
    });
  }
});
