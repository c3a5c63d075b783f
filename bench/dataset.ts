/**
 * A deterministic benchmark dataset: many small files in a nested tree, compressible text, random
 * data, duplicates, and one large page-structured "database" file. `scale` multiplies the amounts;
 * `smallFiles` overrides the count of small files (for the 1M-file memory run).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import crypto from 'node:crypto';

const WORDS =
  'the of and to in is that for it as was with be by on not he this are or his from at which but have an they you were her she there been one all we their has would when if so what no more out up into do said about than can them only other new some could time these two may then first any my now such like our over man me even most made after also did many before must through back years where much your way well down should because each just those people how too little state good very make world still own see men work long get here between both life being under never day same another know while last might us great old year off come since against go came right used take three'.split(
    ' ',
  );

class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0 || 1;
  }
  next(): number {
    let x = this.s;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.s = x >>> 0;
    return this.s;
  }
  int(n: number): number {
    return this.next() % n;
  }
}

function randomBuf(n: number, seed: number): Buffer {
  const out = Buffer.allocUnsafe(n);
  const key = crypto.createHash('sha256').update(`tm-bench-${seed}`).digest();
  const c = crypto.createCipheriv('aes-256-ctr', key, Buffer.alloc(16));
  c.update(Buffer.alloc(n)).copy(out);
  return out;
}

function textBuf(n: number, rng: Rng): Buffer {
  const parts: string[] = [];
  let len = 0;
  while (len < n) {
    const line: string[] = [];
    const words = 6 + rng.int(12);
    for (let i = 0; i < words; i++) line.push(WORDS[rng.int(WORDS.length)]);
    const s = `${rng.int(100000)} ${line.join(' ')}.\n`;
    parts.push(s);
    len += s.length;
  }
  return Buffer.from(parts.join('')).subarray(0, n);
}

export interface DatasetInfo {
  root: string;
  files: number;
  bytes: number;
}

export async function makeDataset(
  root: string,
  scale = 1,
  smallFilesOverride?: number,
): Promise<DatasetInfo> {
  const marker = path.join(root, '.complete');
  const want = JSON.stringify({ scale, smallFilesOverride, v: 2 });
  try {
    if ((await fs.readFile(marker, 'utf8')) === want) return countTree(root);
  } catch {}
  await fs.rm(root, { recursive: true, force: true });
  await fs.mkdir(root, { recursive: true });
  const rng = new Rng(42);
  // 1. many small files (1–16 KiB, two thirds text, one third random) in a nested tree
  const smallCount = smallFilesOverride ?? Math.round(30_000 * scale);
  const perDir = 100;
  for (let i = 0; i < smallCount; i++) {
    const dir = path.join(
      root,
      'small',
      `d${Math.floor(i / (perDir * 20))}`,
      `e${Math.floor(i / perDir) % 20}`,
    );
    if (i % perDir === 0) await fs.mkdir(dir, { recursive: true });
    const size = smallFilesOverride ? 64 + rng.int(2048) : 1024 + rng.int(15 * 1024);
    await fs.writeFile(
      path.join(dir, `file${i}.${i % 3 === 0 ? 'bin' : 'txt'}`),
      i % 3 === 0 ? randomBuf(size, i) : textBuf(size, rng),
    );
  }
  if (!smallFilesOverride) {
    // 2. compressible text: 20 × 10 MiB
    await fs.mkdir(path.join(root, 'text'), { recursive: true });
    for (let i = 0; i < Math.round(20 * scale); i++)
      await fs.writeFile(path.join(root, 'text', `log${i}.txt`), textBuf(10 * 1024 * 1024, rng));
    // 3. random (incompressible) data: 8 × 32 MiB
    await fs.mkdir(path.join(root, 'media'), { recursive: true });
    for (let i = 0; i < Math.round(8 * scale); i++)
      await fs.writeFile(path.join(root, 'media', `video${i}.mp4`), randomBuf(32 * 1024 * 1024, 1000 + i));
    // 4. duplicates: copies of some text and media files under other names
    await fs.mkdir(path.join(root, 'copies'), { recursive: true });
    for (let i = 0; i < Math.round(4 * scale); i++) {
      await fs.copyFile(
        path.join(root, 'text', `log${i}.txt`),
        path.join(root, 'copies', `log-copy${i}.txt`),
      );
      if (i < 2)
        await fs.copyFile(
          path.join(root, 'media', `video${i}.mp4`),
          path.join(root, 'copies', `video-copy${i}.mp4`),
        );
    }
    // 5. a page-structured database file: 4 KiB pages with a header, records, and free space
    const pages = Math.round(65_536 * scale); // 256 MiB
    const fh = await fs.open(path.join(root, 'database.db'), 'w');
    const batch = Buffer.alloc(256 * 4096);
    for (let p = 0; p < pages; p += 256) {
      batch.fill(0);
      for (let k = 0; k < 256; k++) {
        const page = batch.subarray(k * 4096, (k + 1) * 4096);
        page.writeUInt32LE(p + k, 0);
        page.writeUInt32LE(0x54444250, 4);
        const fill = 1000 + rng.int(2800);
        textBuf(fill, rng).copy(page, 16);
        randomBuf(64, p + k).copy(page, 16 + fill);
      }
      await fh.write(batch, 0, batch.length, p * 4096);
    }
    await fh.close();
  }
  await fs.writeFile(marker, want);
  return countTree(root);
}

async function countTree(root: string): Promise<DatasetInfo> {
  let files = 0;
  let bytes = 0;
  const walk = async (d: string) => {
    for (const e of await fs.readdir(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else if (e.isFile() && e.name !== '.complete') {
        files++;
        bytes += (await fs.stat(p)).size;
      }
    }
  };
  await walk(root);
  return { root, files, bytes };
}
