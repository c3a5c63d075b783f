/**
 * Worker threads started before their pool (prestartWorkers, what the CLI's backup and restore do while
 * the repository opens): a pool takes them and sends them its settings before any task. A thread that
 * never got them would fail every task (it has no keys), and one given the wrong ones would seal blobs no
 * restore can open: the backups below are sealed by prestarted threads and restored by fresh ones.
 */
import { describe, expect, it } from 'vitest';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { MemoryBackend } from '../../src/main/engine/backend/memory/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import { prestartWorkers, prestartedCount } from '../../src/main/engine/pool/index.js';
import { prestartedList, startDeferred } from '../../src/main/engine/pool/early.js';
import { deriveKeyAhead, derivingAhead, dropDerivationsAhead } from '../../src/main/engine/crypto/kdf.js';
import { describeTree, expectSameTrees, randomBytes, tempDir, writeTree } from '../helpers/fixtures.js';

describe('prestarted worker threads', () => {
  it('are taken by the next pool, get its settings, and seal what a restore opens', async () => {
    const work = await tempDir('tm-prestart-');
    const src = path.join(work, 'src');
    await writeTree(src, {
      'random.bin': randomBytes(5 * 1024 * 1024 + 3, 7), // several chunks: sealed in the workers
      'text.txt': 'compressible line of text\n'.repeat(20_000),
      small: { dir: { 'a.txt': 'a', 'b.bin': randomBytes(3000, 8) } },
    });
    const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });

    prestartWorkers(3);
    expect(prestartedCount()).toBe(3);
    // a pool of two takes two of them; the third waits for the next pool
    await backup(repo, { paths: [src], workers: 2 });
    expect(prestartedCount()).toBe(1);
    // a pool of three (other settings: compression off) takes the last one and starts two of its own
    const second = await backup(repo, { paths: [src], workers: 3, compressionLevel: 0, forceFull: true });
    expect(prestartedCount()).toBe(0);

    // restored by a decode pool of fresh threads (none prestarted), byte for byte
    const out = path.join(work, 'out');
    const r = await restore(repo, { snapshot: second.snapshot.id, target: out, workers: 2 });
    expect(r.errors).toEqual([]);
    expectSameTrees(await describeTree(src), await describeTree(path.join(out, src)));
  });

  it('started by another copy of the starter (the CLI launcher’s bundle) are the ones the engine adopts', async () => {
    // a second instance of the module, as the launcher's bundle has its own
    const other = (await import(
      /* @vite-ignore */ `../../src/main/engine/pool/early.ts?launcher=${Date.now()}`
    )) as typeof import('../../src/main/engine/pool/early.js');
    expect(other.startDeferred).not.toBe(startDeferred); // really another copy
    const tsxBoot = path.resolve(import.meta.dirname, '../../src/main/engine/workers/tsxBoot.mjs');
    const entry = pathToFileURL(
      path.resolve(import.meta.dirname, '../../src/main/engine/workers/pipelineWorker.ts'),
    ).href;
    other.startDeferred(tsxBoot, { __entry: entry }, 2);
    expect(prestartedCount()).toBe(2); // seen by the engine's copy
    prestartWorkers(2); // enough wait: none more
    expect(prestartedCount()).toBe(2);
    const work = await tempDir('tm-prestart-early-');
    const src = path.join(work, 'src');
    await writeTree(src, { 'a.bin': randomBytes(300_000, 1) });
    const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
    await backup(repo, { paths: [src], workers: 2, compressionLevel: 2, forceFull: true });
    expect(prestartedCount()).toBe(0); // the pool took both
  });

  it("in memory mode 'low' start only once the key derivation started ahead has ended, else not at all", async () => {
    expect(prestartedCount()).toBe(0);
    expect(derivingAhead()).toBeUndefined(); // none running
    // none started ahead: the pool starts its own thread after the repository is open
    prestartWorkers(1, 'low');
    expect(prestartedCount()).toBe(0);
    // one started ahead (the CLI launcher's): scrypt's 32 MiB and a booting thread must not add up
    deriveKeyAhead('pw', { N: 1 << 14, r: 8, p: 1, salt: Buffer.alloc(32, 3).toString('base64') });
    const ended = derivingAhead();
    expect(ended).toBeDefined();
    prestartWorkers(1, 'low');
    expect(prestartedCount()).toBe(0); // not while it runs
    await ended;
    await new Promise((r) => setImmediate(r));
    expect(derivingAhead()).toBeUndefined();
    expect(prestartedCount()).toBe(1); // started once it ended
    dropDerivationsAhead();
    // 'normal': at once
    prestartWorkers(2);
    expect(prestartedCount()).toBe(2);
    await Promise.all(
      prestartedList()
        .splice(0)
        .map((w) => w.terminate()),
    );
  });
});
