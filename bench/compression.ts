/**
 * `npm run bench:zstd`: what each zstd level stores of the benchmark dataset's text log and page-structured
 * database (1 MiB chunks, levels 1–6) and how fast one core compresses it (wall time of one pass: noisy on
 * a shared machine). `npm run bench:floor` measures the levels on the whole dataset's CPU time; why the
 * default is 2: src/shared/compression.ts.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Compressor } from 'zstd-napi';
import { makeDataset } from './dataset.js';

const at = process.argv.indexOf('--dir');
const dir = path.resolve(at > 0 ? process.argv[at + 1] : '/var/tmp/tidemark-bench');
const data = await makeDataset(path.join(dir, 'data'), 1);
for (const rel of ['text/log0.txt', 'database.db']) {
  const buf = fs.readFileSync(path.join(data.root, rel)).subarray(0, 32 << 20);
  for (const level of [1, 2, 3, 4, 6]) {
    const c = new Compressor();
    c.setParameters({ compressionLevel: level });
    let out = 0;
    const t = process.hrtime.bigint();
    for (let off = 0; off < buf.length; off += 1 << 20)
      out += c.compress(buf.subarray(off, off + (1 << 20))).length;
    const s = Number(process.hrtime.bigint() - t) / 1e9;
    console.log(
      `${rel.padEnd(14)} level ${level}: stores ${((100 * out) / buf.length).toFixed(1)}%, ${(buf.length / 1e6 / s).toFixed(0)} MB/s`,
    );
  }
}
