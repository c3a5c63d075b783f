/**
 * `npm run bench:zstd`: why the default zstd level is 3. Compresses 1 MiB chunks of the benchmark
 * dataset's text log and page-structured database at levels 1–6 and prints the stored fraction and the
 * single-core speed. The repository size target (within ±5% of restic's) rules out level 1.
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
