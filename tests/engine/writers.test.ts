import { describe, it, expect } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import { forget, prune } from '../../src/main/engine/repo/retention.js';
import { tempDir, writeTree, randomBytes } from '../helpers/fixtures.js';

describe('a long-lived repository handle', () => {
  it('sees what another writer added and what another prune moved', async () => {
    const work = await tempDir('tm-writers-');
    const repoDir = path.join(work, 'repo');
    await Repository.init(new LocalBackend(repoDir), 'pw', { kdf: { N: 1024 } });
    const app = await Repository.open(new LocalBackend(repoDir), 'pw'); // e.g. the app, open all day
    const other = await Repository.open(new LocalBackend(repoDir), 'pw'); // e.g. another PC
    const a = path.join(work, 'a');
    const b = path.join(work, 'b');
    await writeTree(a, { 'one.bin': randomBytes(700_000, 1) });
    await writeTree(b, { 'two.bin': randomBytes(700_000, 2), 'shared.bin': randomBytes(400_000, 3) });
    await backup(app, { paths: [a] });
    const fromOther = await backup(other, { paths: [b] });
    // the app restores the other writer's snapshot: its index must learn the new packs
    const out1 = path.join(work, 'out1');
    expect(
      (await restore(app, { snapshot: fromOther.snapshotId, target: out1, relativeTo: b })).errors,
    ).toEqual([]);
    expect(await fs.readFile(path.join(out1, 'two.bin'))).toEqual(randomBytes(700_000, 2));
    // the other writer forgets and prunes (packs are rewritten); the app's handle must follow
    await writeTree(b, { 'two.bin': randomBytes(10, 4) });
    const newer = await backup(other, { paths: [b] });
    await forget(other, { keepLast: 1 }, { groupBy: ['host', 'paths'] });
    await prune(other, { repackThreshold: 0 });
    const out2 = path.join(work, 'out2');
    expect((await restore(app, { snapshot: newer.snapshotId, target: out2, relativeTo: b })).errors).toEqual(
      [],
    );
    expect(await fs.readFile(path.join(out2, 'shared.bin'))).toEqual(randomBytes(400_000, 3));
  });
});
