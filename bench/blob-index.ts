// The in-memory blob index (src/main/engine/repo/blobIndex.ts): a million (or --entries N) random IDs
// added one by one as a backup adds them, then looked up (all found) and looked up missing (none found,
// as a backup's dedup query of new data mostly is); three rounds, each on a new index, printing the
// milliseconds of each and the bytes the index holds (its segments and hash table). Run a worktree's copy
// beside main's to compare two versions: `npm run bench:blob-index [-- --entries N]`.
import crypto from 'node:crypto';
import { BlobIndex, BlobType } from '../src/main/engine/repo/blobIndex.js';

const arg = process.argv.indexOf('--entries');
const N = arg > 0 ? Number(process.argv[arg + 1]) : 1_000_000;
const ids = crypto.randomBytes(32 * N);
const missing = crypto.randomBytes(32 * N);
const pack = 'p'.repeat(64);
const flags = BlobType.Data; // not compressed
const ms = (t: number) => (performance.now() - t).toFixed(0);

for (let round = 1; round <= 3; round++) {
  const index = new BlobIndex();
  let t = performance.now();
  for (let i = 0; i < N; i++) index.addAt(ids, i * 32, pack, flags, i, 1, 1);
  const add = ms(t);
  t = performance.now();
  let found = 0;
  for (let i = 0; i < N; i++) if (index.has(ids.subarray(i * 32, i * 32 + 32))) found++;
  const hit = ms(t);
  t = performance.now();
  let wrong = 0;
  for (let i = 0; i < N; i++) if (index.has(missing.subarray(i * 32, i * 32 + 32))) wrong++;
  const miss = ms(t);
  if (found !== N || wrong !== 0) throw new Error(`found ${found} of ${N}, ${wrong} missing IDs found`);
  const held = index.heldBytes();
  console.log(
    `round ${round}: ${N} entries: add ${add} ms, hits ${hit} ms, misses ${miss} ms; ` +
      `${(held / 1048576).toFixed(1)} MiB held (${(held / N).toFixed(1)} bytes an entry)`,
  );
}
