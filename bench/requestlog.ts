/**
 * `node bin/run-ts.mjs bench/requestlog.ts [--ops N]`
 * What the run history's request log costs: N small saves, loads and stats against the in-memory
 * backend (so only wrapper overhead is measured), bare and through RequestLogBackend feeding a
 * RequestLogCollector (the stack every job run now uses, also for local folders). Prints µs per
 * operation for both, the difference, and the size of the summary a run record stores.
 */
import '../src/main/engineHost.js'; // the process settings of the app's engine processes (pool size, V8 tiering)
import { MemoryBackend } from '../src/main/engine/backend/memory/index.js';
import { RequestLogBackend, RequestLogCollector } from '../src/main/engine/backend/requestlog/index.js';
import type { Backend } from '../src/main/engine/backend/types.js';

const args = process.argv.slice(2);
const i = args.indexOf('--ops');
const N = i >= 0 ? Number(args[i + 1]) : 100_000;
const payload = Buffer.alloc(256, 1);

async function workload(b: Backend): Promise<number> {
  const t0 = process.hrtime.bigint();
  for (let k = 0; k < N; k++) {
    const name = `obj${k % 1000}`;
    await b.save('data', name, payload);
    await b.load('data', name);
    await b.stat('data', name);
  }
  return Number(process.hrtime.bigint() - t0) / 1e3 / (3 * N); // µs per operation
}

// warm up both paths, then measure alternately (three rounds, best of each)
const bare: number[] = [];
const logged: number[] = [];
let summaryBytes = 0;
for (let round = 0; round < 4; round++) {
  const b1 = await workload(new MemoryBackend());
  const collector = new RequestLogCollector();
  const b2 = await workload(new RequestLogBackend(new MemoryBackend(), collector.record));
  summaryBytes = JSON.stringify(collector.summary()).length;
  if (round > 0) {
    bare.push(b1);
    logged.push(b2);
  }
}
const best = (xs: number[]) => Math.min(...xs);
console.log(`operations: ${3 * N} per path (save/load/stat of 256-byte objects, in memory)`);
console.log(`bare memory backend:        ${best(bare).toFixed(2)} µs/op`);
console.log(`with request log+collector: ${best(logged).toFixed(2)} µs/op`);
console.log(`overhead:                   ${(best(logged) - best(bare)).toFixed(2)} µs/op`);
console.log(`stored summary (run row):   ${(summaryBytes / 1024).toFixed(1)} KiB for ${3 * N} requests`);
