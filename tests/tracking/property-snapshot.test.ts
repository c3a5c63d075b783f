// The property of property-runner.ts with filesystem snapshots (docs/change-tracking.md): on a loop-device
// btrfs filesystem tracked by the real fanotify tracker, each sequence applies random changes, takes the
// journal's cursor, takes a btrfs snapshot, applies MORE random changes (after the snapshot: not in this
// backup, but they must be in the next one's journal), and then backs up from the snapshot twice — driven
// by the journal from the parent, and by reading every file (forceFull). The two trees must be equal, and
// equal to what the source held at the snapshot. The next sequence's parent is the journal-driven
// snapshot, so a change the journal lost would show as a difference later. Needs root (fanotify, loop
// devices); TIDEMARK_PROPERTY_SNAPSHOT_RUNS sets the number of sequences (default 40).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { MemoryBackend } from '../../src/main/engine/backend/memory/index.js';
import { initRepository, type Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import type { ID, Tree } from '../../src/main/engine/repo/types.js';
import { ChangeJournal, type JournalCursor } from '../../src/main/tracking/journal.js';
import { SourceSnapshots } from '../../src/main/engine/snapshot/index.js';
import { collect, nativeSkipReason, scratchDir, startNative } from './helpers.js';
import { diff, expectJournalCoverage, randomOp, rng, subtreeAt } from './property-runner.js';
import { btrfsSkipReason, makeBtrfs, type TestFs } from '../snapshot/helpers.js';

const RUNS = Number(process.env.TIDEMARK_PROPERTY_SNAPSHOT_RUNS ?? 40);
const SEED = Number(process.env.TIDEMARK_PROPERTY_SEED ?? Date.now() % 1_000_000);
const skip = btrfsSkipReason() ?? nativeSkipReason('fanotify');

/** path → type and size of everything below root, as the snapshot's tree records it / as it is on disk. */
async function treeManifest(repo: Repository, id: ID, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  const tree: Tree = await repo.loadTree(id);
  for (const n of tree.nodes) {
    out.push(`${prefix}${n.name} ${n.type} ${n.type === 'file' ? n.size : ''}`);
    if (n.subtree) out.push(...(await treeManifest(repo, n.subtree, `${prefix}${n.name}/`)));
  }
  return out;
}
function diskManifest(root: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const d of fs
    .readdirSync(root, { withFileTypes: true })
    .sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)))) {
    const p = path.join(root, d.name);
    const st = fs.lstatSync(p);
    const type = st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'symlink' : 'file';
    out.push(`${prefix}${d.name} ${type} ${type === 'file' ? st.size : ''}`);
    if (type === 'dir') out.push(...diskManifest(p, `${prefix}${d.name}/`));
  }
  return out;
}

describe.skipIf(!!skip)(
  `journal-driven incremental from a btrfs snapshot equals a full read of that snapshot (seed ${SEED})${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    let fsys: TestFs;
    let repo: Repository;
    let base: string;
    beforeAll(async () => {
      fsys = makeBtrfs();
      base = scratchDir('property-snapshot');
      repo = await initRepository(new MemoryBackend(), 'property', { kdf: { N: 1024 }, compressionLevel: 0 });
    });
    afterAll(async () => {
      await repo?.close();
      if (base) fs.rmSync(base, { recursive: true, force: true });
      fsys?.cleanup();
    });

    it(`${RUNS} random sequences, changes before and after each snapshot`, async () => {
      const r = rng(SEED);
      // in the filesystem's top subvolume: fanotify refuses a filesystem mark inside another (EXDEV)
      const root = path.join(fsys.mnt, 'tree');
      fs.mkdirSync(path.join(root, 'a/b'), { recursive: true });
      fs.mkdirSync(path.join(root, 'c'));
      for (const f of ['a/one', 'a/b/two', 'c/three', 'four'])
        fs.writeFileSync(path.join(root, f), r.bytes(100 + r.int(2000)));
      const tracker = await startNative('fanotify', [root]);
      collect(tracker);
      const journal = new ChangeJournal(path.join(base, 'data'), { persistDelayMs: 1000 });
      await journal.attach(tracker);
      const stateDir = path.join(base, 'snapshots');
      const opts = { paths: [root], host: 'property', workers: 1 };
      const counter = { n: 0 };
      let journalRuns = 0;
      const fallbacks = new Map<string, number>();
      try {
        await journal.sync();
        let cursor: JournalCursor = journal.cursor()!;
        let parent = (await backup(repo, { ...opts, fullScanReason: 'baseline' })).snapshot;
        for (let seq = 0; seq < RUNS; seq++) {
          const before: string[] = [];
          const after: string[] = [];
          for (let k = 1 + r.int(5); k > 0; k--) before.push(randomOp(root, r, counter));
          await journal.sync();
          const plan = journal.changesSince(cursor as never, [root]);
          const next = plan.ok ? (plan.hint.cursor as unknown as JournalCursor) : journal.cursor()!;
          const snaps = new SourceSnapshots({ stateDir, mode: 'always' });
          const views = await snaps.take([root]);
          const atSnapshot = diskManifest(root);
          for (let k = r.int(4); k > 0; k--) after.push(randomOp(root, r, counter));
          let viaJournal, viaFull;
          try {
            viaJournal = await backup(repo, {
              ...opts,
              parent: parent.id,
              sourceViews: views.views,
              hiddenPaths: views.hidden,
              ...(plan.ok ? { changeHint: plan.hint } : { fullScanReason: plan.reason }),
            });
            viaFull = await backup(repo, {
              ...opts,
              forceFull: true,
              sourceViews: views.views,
              hiddenPaths: views.hidden,
            });
          } finally {
            await snaps.release();
          }
          if (plan.ok) journalRuns++;
          else fallbacks.set(plan.reason, (fallbacks.get(plan.reason) ?? 0) + 1);
          const [j, f] = [
            await subtreeAt(repo, viaJournal.snapshot.tree, root),
            await subtreeAt(repo, viaFull.snapshot.tree, root),
          ];
          const what = () =>
            `operations before the snapshot:\n  ${before.join('\n  ')}\nafter it:\n  ${after.join('\n  ')}\n` +
            `hint: ${plan.ok ? JSON.stringify({ dirs: [...plan.hint.dirtyDirs], trees: [...(plan.hint.dirtyTrees ?? [])] }) : plan.reason}`;
          if (j.subtree !== f.subtree)
            throw new Error(
              `sequence ${seq} (seed ${SEED}): the journal-driven tree differs from a full read of the snapshot\n${what()}\n` +
                `differences:\n${(await diff(repo, j.subtree!, f.subtree!)).join('\n')}`,
            );
          // and the snapshot is the source as it was when it was taken
          expect(await treeManifest(repo, j.subtree!), `sequence ${seq} (seed ${SEED})\n${what()}`).toEqual(
            atSnapshot,
          );
          await journal.commit(next as never);
          cursor = next;
          parent = viaJournal.snapshot;
        }
      } finally {
        await tracker.stop();
        await journal.close();
      }
      console.log(
        `snapshots: ${RUNS} sequences, ${journalRuns} journal-driven, fallbacks: ${JSON.stringify(Object.fromEntries(fallbacks))}`,
      );
      expectJournalCoverage(RUNS, journalRuns, fallbacks, true); // under fanotify
    }, 600_000);
  },
);
