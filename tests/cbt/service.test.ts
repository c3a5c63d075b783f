// The product path of level 1: the tracker service (as in the app and `tidemark scheduler`) plans a
// backup from the change journal and the block tracker together; a large file changed in place is then
// read only around its changed pages, and the result equals a full read.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { cbtAvailability, makeLoopExt4, type LoopFs } from './helpers.js';
import { MemoryBackend } from '../../src/main/engine/backend/memory/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { lookup } from '../../src/main/engine/repo/browse.js';
import { TrackerService, journalBackup } from '../../src/main/tracking/service.js';
import { randomBytes } from '../helpers/fixtures.js';

const avail = cbtAvailability();
const MiB = 1 << 20;

describe.skipIf(!avail.ok)(
  `journal + block tracking through the tracker service${avail.ok ? '' : ` (skipped: ${avail.reason})`}`,
  () => {
    let loop: LoopFs;
    let service: TrackerService;
    beforeAll(async () => {
      loop = makeLoopExt4(200);
    });
    afterAll(async () => {
      await service?.stop();
      loop?.cleanup();
    });

    it('reads only the changed regions of a large file and equals a full read', async () => {
      const src = path.join(loop.mnt, 'src');
      await fs.mkdir(src);
      const file = path.join(src, 'vm-disk.img');
      await fs.writeFile(file, randomBytes(96 * MiB, 5));
      const logs: string[] = [];
      service = new TrackerService({
        dataDir: path.join(loop.dir, 'data'),
        blockPin: false,
        log: (l) => logs.push(l),
      });
      await service.setRoots([src]);
      const journal = await service.journal();
      if (!journal || journal.backend === 'none')
        return expect.fail(`no file-level tracker: ${logs.join('; ')}`);
      expect(service.blockLevel(), logs.join('; ')).toBeDefined();
      const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
      const run = () =>
        journalBackup(journal, repo, { paths: [src] }, 'job', undefined, service.blockLevel());
      const write = async (seed: number) => {
        const fh = await fs.open(file, 'r+');
        for (let i = 0; i < 3; i++)
          await fh.write(randomBytes(4096, seed + i), 0, 4096, (10 + i * 30) * MiB + 8192);
        await fh.close();
      };
      await run(); // full scan: no cursor yet
      await write(100);
      await run(); // journal-driven; the file has no block baseline yet, so it is read whole and gets one
      await write(200);
      const tracked = await run();
      expect(tracked.snapshot.scanMode?.mode).toBe('blocks');
      expect(tracked.snapshot.stats.bytesRead).toBeLessThan(16 * MiB); // 3 pages changed in a 96 MiB file
      const full = await backup(repo, { paths: [src], forceFull: true });
      expect((await lookup(repo, tracked.snapshot, file)).node?.content).toEqual(
        (await lookup(repo, full.snapshot, file)).node?.content,
      );
    });
  },
);
