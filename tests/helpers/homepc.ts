/**
 * A simulated home PC for the mass-change alarm's test and benchmark: a user's folders with the kinds
 * of files people have (Office documents, PDFs, photos, music, downloads, a code project with its git
 * objects, browser cache, mail, app settings, an installed application), the kinds of days they have
 * (a day of work, a software update, a photo import, a clean-up, re-tagging music) and ransomware runs
 * that encrypt a share of the files in the ways real families do (in place, renamed with an added
 * extension, under random names, or only the first 64 KiB).
 *
 * Everything is deterministic for a seed. File contents are built to behave like the real thing where
 * the alarm looks: a .docx is a zip of deflated XML (starts with PK, does not compress), a .jpg starts
 * with FF D8 FF and does not compress, a .pdf mixes text with deflated streams, a .so or .exe
 * compresses, cache entries are opaque and nameless, git objects are deflated and nameless.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import crypto from 'node:crypto';
import zlib from 'node:zlib';

const WORDS =
  'the of and to in is that for it as was with be by on not this are or from at which but have an they you were her she there been one all we their has would when if so what no more out up into do said about than can them only other new some could time these two may then first any my now such like our over even most made after also did many before must through back years where much your way well down should because each just those people how too little state good very make world still own see work long get here between both life being under never day same another know while last might great old year off come since against go came right used take three invoice report budget meeting family holiday school garden recipe letter insurance'.split(
    ' ',
  );

export class Rng {
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
  range(lo: number, hi: number): number {
    return lo + this.int(Math.max(1, hi - lo));
  }
  pick<T>(a: readonly T[]): T {
    return a[this.int(a.length)];
  }
  bytes(n: number): Buffer {
    const key = crypto.createHash('sha256').update(`homepc-${this.next()}`).digest();
    return crypto.createCipheriv('aes-256-ctr', key, Buffer.alloc(16)).update(Buffer.alloc(n));
  }
}

/** Sentences of words, made once: files take windows of it (making text word by word for every file
 *  made the home folder in ~9 s instead of ~2). */
const CORPUS: Buffer = (() => {
  const rng = new Rng(99);
  const parts: string[] = [];
  let len = 0;
  while (len < 4 * 1024 * 1024) {
    const words = 5 + rng.int(14);
    const line: string[] = [];
    for (let i = 0; i < words; i++) line.push(WORDS[rng.int(WORDS.length)]);
    const s = `${rng.int(100000)} ${line.join(' ')}.\n`;
    parts.push(s);
    len += s.length;
  }
  return Buffer.from(parts.join(''));
})();
/** The corpus deflated (as zip, PDF and git store text): opaque, does not compress again. */
const DEFLATED: Buffer = zlib.deflateRawSync(CORPUS);

function windowOf(source: Buffer, n: number, rng: Rng): Buffer {
  if (n <= source.length - 1) {
    const at = rng.int(source.length - n);
    return Buffer.from(source.subarray(at, at + n));
  }
  const out = Buffer.allocUnsafe(n);
  for (let at = 0; at < n; at += source.length)
    windowOf(source, Math.min(source.length - 1, n - at), rng).copy(out, at);
  return out;
}

function text(n: number, rng: Rng): Buffer {
  return windowOf(CORPUS, n, rng);
}

const deflated = (n: number, rng: Rng) => windowOf(DEFLATED, n, rng);

/** The content of a file of this kind and about this size (the kind is the extension, lower case). */
export function contentFor(ext: string, size: number, rng: Rng): Buffer {
  const head = (h: number[] | string, body: Buffer) =>
    Buffer.concat([typeof h === 'string' ? Buffer.from(h, 'latin1') : Buffer.from(h), body]);
  switch (ext) {
    case 'docx':
    case 'xlsx':
    case 'pptx':
    case 'odt':
    case 'zip':
    case 'jar':
    case 'epub': {
      // local file headers of deflated XML parts, as a word processor writes them
      const parts: Buffer[] = [];
      let len = 0;
      while (len < size) {
        const body = deflated(Math.min(24 * 1024, size), rng);
        const hdr = Buffer.alloc(30);
        hdr.writeUInt32LE(0x04034b50, 0);
        hdr.writeUInt16LE(8, 8);
        hdr.writeUInt32LE(body.length, 18);
        parts.push(hdr, Buffer.from(`word/part${len}.xml`), body);
        len += 30 + body.length + 16;
      }
      return Buffer.concat(parts).subarray(0, size);
    }
    case 'pdf': {
      const parts: Buffer[] = [Buffer.from('%PDF-1.7\n%\xe2\xe3\xcf\xd3\n', 'latin1')];
      let len = 0;
      while (len < size) {
        const t = text(2048 + rng.int(4096), rng);
        const z = deflated(3000, rng);
        parts.push(
          Buffer.from(`${rng.int(999)} 0 obj\n<< /Length ${z.length} >>\n`),
          t,
          Buffer.from('stream\n'),
          z,
        );
        len += t.length + z.length + 40;
      }
      return Buffer.concat(parts).subarray(0, size);
    }
    case 'jpg':
    case 'jpeg':
      return head([0xff, 0xd8, 0xff, 0xe1, 0x00, 0x10, 0x45, 0x78, 0x69, 0x66], rng.bytes(size - 10));
    case 'png':
      return head([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], rng.bytes(size - 8));
    case 'heic':
      return head([0, 0, 0, 0x18, ...Buffer.from('ftypheic')], rng.bytes(size - 12));
    case 'mp4':
    case 'mov':
      return head([0, 0, 0, 0x20, ...Buffer.from('ftypisom')], rng.bytes(size - 12));
    case 'mp3':
      return head('ID3\x04\x00\x00\x00\x00\x10\x00', rng.bytes(size - 10));
    case 'exe':
    case 'dll':
    case 'so': {
      // machine code compresses about 2:1: some opaque bytes, many repeated patterns
      const out = Buffer.alloc(size);
      out.write(ext === 'so' ? '\x7fELF' : 'MZ', 'latin1');
      for (let at = 64; at < size; at += 4096) {
        const noise = rng.bytes(1024);
        noise.copy(out, at);
        text(3072, rng).copy(out, at + 1024);
      }
      return out;
    }
    case 'sqlite':
    case 'db': {
      const out = Buffer.alloc(size);
      out.write('SQLite format 3\0', 'latin1');
      for (let p = 4096; p < size; p += 4096) text(1500 + rng.int(2000), rng).copy(out, p + 8);
      return out;
    }
    case 'git': // a loose git object: deflated, no extension
      return Buffer.concat([Buffer.from([0x78, 0x01]), deflated(Math.max(0, size - 2), rng)]);
    case 'cache': // browser cache entries: opaque, nameless
    case 'pak':
    case 'dat':
      return rng.bytes(size);
    default: // txt, md, csv, json, js, py, ts, mbox, xmp, log …
      return text(size, rng);
  }
}

export interface HomePcOptions {
  /** Multiplies file counts (default 1: ~1,500 files). */
  scale?: number;
  /** Multiplies file sizes (default 1: ~45 MB in all; photos 80–400 KB). */
  size?: number;
  seed?: number;
}

interface Kind {
  dir: string;
  ext: string[];
  count: number;
  min: number;
  max: number;
  names: (i: number, rng: Rng) => string;
  /** Files per sub-folder, and how sub-folders are named. */
  per?: number;
  sub?: (k: number) => string;
}

const KB = 1024;

function kinds(scale: number, size: number): Kind[] {
  const c = (n: number) => Math.max(1, Math.round(n * scale));
  const s = (n: number) => Math.max(64, Math.round(n * size));
  const word = (rng: Rng) => rng.pick(WORDS);
  return [
    {
      dir: 'Documents/Work',
      ext: ['docx', 'xlsx', 'pptx', 'pdf'],
      count: c(120),
      min: s(12 * KB),
      max: s(300 * KB),
      names: (i, r) => `${word(r)}-${word(r)}-${i}`,
      per: 30,
      sub: (k) => `Project ${k}`,
    },
    {
      dir: 'Documents/Home',
      ext: ['docx', 'pdf', 'txt', 'odt', 'xlsx'],
      count: c(90),
      min: s(2 * KB),
      max: s(200 * KB),
      names: (i, r) => `${word(r)} ${i}`,
      per: 30,
      sub: (k) => ['Taxes', 'Insurance', 'Letters', 'Recipes'][k % 4],
    },
    {
      dir: 'Documents/School',
      ext: ['docx', 'md', 'txt', 'csv', 'pdf'],
      count: c(60),
      min: s(1 * KB),
      max: s(80 * KB),
      names: (i, r) => `${word(r)}_${i}`,
      per: 30,
      sub: (k) => `Year ${k + 1}`,
    },
    {
      dir: 'Pictures',
      ext: ['jpg', 'jpg', 'jpg', 'heic', 'png'],
      count: c(420),
      min: s(80 * KB),
      max: s(400 * KB),
      names: (i) => `IMG_${String(1000 + i).padStart(4, '0')}`,
      per: 60,
      sub: (k) => `${2018 + (k % 7)}/${['Holiday', 'Family', 'Garden'][k % 3]}`,
    },
    {
      dir: 'Music',
      ext: ['mp3'],
      count: c(90),
      min: s(150 * KB),
      max: s(600 * KB),
      names: (i, r) => `${String(i % 12).padStart(2, '0')} ${word(r)} ${word(r)}`,
      per: 12,
      sub: (k) => `Artist ${k % 5}/Album ${k}`,
    },
    {
      dir: 'Videos',
      ext: ['mp4', 'mov'],
      count: c(6),
      min: s(1024 * KB),
      max: s(3 * 1024 * KB),
      names: (i) => `clip-${i}`,
    },
    {
      dir: 'Downloads',
      ext: ['pdf', 'zip', 'exe', 'jpg', 'docx'],
      count: c(60),
      min: s(20 * KB),
      max: s(500 * KB),
      names: (i, r) => `${word(r)}-${i}`,
    },
    {
      dir: 'Desktop',
      ext: ['txt', 'docx', 'png'],
      count: c(15),
      min: s(1 * KB),
      max: s(60 * KB),
      names: (i, r) => `${word(r)} ${i}`,
    },
    {
      dir: 'Projects/site/src',
      ext: ['ts', 'js', 'json', 'md', 'css'],
      count: c(120),
      min: s(300),
      max: s(20 * KB),
      names: (i, r) => `${word(r)}${i}`,
      per: 20,
      sub: (k) => ['components', 'pages', 'lib', 'styles', 'util', 'api'][k % 6],
    },
    {
      dir: 'Projects/site/.git/objects',
      ext: ['git'],
      count: c(300),
      min: s(200),
      max: s(6 * KB),
      names: (_i, r) => r.bytes(19).toString('hex'),
      per: 5,
      sub: (k) => (k * 7).toString(16).padStart(2, '0').slice(-2),
    },
    {
      dir: '.cache/browser/Cache_Data',
      ext: ['cache'],
      count: c(250),
      min: s(500),
      max: s(40 * KB),
      names: (i) => `f_${i.toString(16).padStart(6, '0')}`,
    },
    {
      dir: '.config/apps',
      ext: ['json', 'sqlite', 'txt'],
      count: c(40),
      min: s(200),
      max: s(64 * KB),
      names: (i, r) => `${word(r)}-settings-${i}`,
      per: 10,
      sub: (k) => `app${k}`,
    },
    {
      dir: '.thunderbird/profile/Mail',
      ext: ['mbox'],
      count: c(4),
      min: s(200 * KB),
      max: s(800 * KB),
      names: (i) => ['Inbox', 'Sent', 'Archive', 'Trash'][i % 4] + (i >= 4 ? i : ''),
    },
    {
      dir: 'Apps/Editor',
      ext: ['so', 'so', 'png', 'pak', 'json', 'js', 'dat'],
      count: c(180),
      min: s(2 * KB),
      max: s(250 * KB),
      names: (i, r) => `${word(r)}${i}`,
      per: 30,
      sub: (k) => ['bin', 'lib', 'resources', 'icons', 'locales', 'plugins'][k % 6],
    },
  ];
}

/** Writes one file of a kind (the extension picks its content) and returns its path. */
async function writeOne(file: string, ext: string, size: number, rng: Rng): Promise<string> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(file, contentFor(ext, size, rng));
  return file;
}

const nameWithExt = (base: string, ext: string) =>
  ext === 'git' || ext === 'cache' ? base : `${base}.${ext}`;

/** Creates the home folder at `root` (which must not exist or be empty). Returns its file count. */
export async function makeHomePc(root: string, opts: HomePcOptions = {}): Promise<number> {
  const rng = new Rng(opts.seed ?? 7);
  let files = 0;
  for (const k of kinds(opts.scale ?? 1, opts.size ?? 1)) {
    for (let i = 0; i < k.count; i++) {
      const ext = rng.pick(k.ext);
      const dir = k.per ? path.join(root, k.dir, k.sub!(Math.floor(i / k.per))) : path.join(root, k.dir);
      await writeOne(path.join(dir, nameWithExt(k.names(i, rng), ext)), ext, rng.range(k.min, k.max), rng);
      files++;
    }
  }
  return files;
}

/** Every file below root (relative paths, sorted). */
export async function listFiles(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string) => {
    for (const e of await fs.readdir(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else if (e.isFile()) out.push(path.relative(root, p));
    }
  };
  await walk(root);
  return out.sort();
}

const extOf = (p: string) => {
  const b = path.basename(p);
  const dot = b.lastIndexOf('.');
  return dot > 0 ? b.slice(dot + 1).toLowerCase() : '';
};

async function rewrite(file: string, rng: Rng, grow = 0.05): Promise<void> {
  const st = await fs.stat(file);
  const ext = extOf(file) || (file.includes('.git') ? 'git' : 'cache');
  const size = Math.max(64, Math.round(st.size * (1 - grow + rng.int(1000) / (500 / grow))));
  await fs.writeFile(file, contentFor(ext, size, rng));
}

async function append(file: string, bytes: Buffer): Promise<void> {
  await fs.appendFile(file, bytes);
}

/** A normal day's changes (what a user, their apps and the OS do between two backups). */
export type NormalDay = 'day-of-work' | 'software-update' | 'photo-import' | 'clean-up' | 'music-retag';
export const NORMAL_DAYS: NormalDay[] = [
  'day-of-work',
  'software-update',
  'photo-import',
  'clean-up',
  'music-retag',
];

export async function normalDay(root: string, day: NormalDay, seed = 1, scale = 1): Promise<string> {
  const rng = new Rng(seed * 7919 + NORMAL_DAYS.indexOf(day));
  const all = await listFiles(root);
  const under = (dir: string, exts?: string[]) =>
    all.filter((f) => f.startsWith(dir + '/') && (!exts || exts.includes(extOf(f))));
  const some = <T>(a: T[], n: number): T[] => {
    const copy = [...a];
    const out: T[] = [];
    while (out.length < n && copy.length) out.push(copy.splice(rng.int(copy.length), 1)[0]);
    return out;
  };
  const c = (n: number) => Math.max(1, Math.round(n * scale));
  const p = (rel: string) => path.join(root, rel);
  switch (day) {
    case 'day-of-work': {
      // Office documents saved (a zip written anew), notes and spreadsheets edited, mail received
      for (const f of some(under('Documents', ['docx', 'xlsx', 'pptx', 'odt']), c(18)))
        await rewrite(p(f), rng);
      for (const f of some(under('Documents', ['txt', 'md', 'csv']), c(8)))
        await append(p(f), text(2000, rng));
      for (const f of under('.thunderbird')) await append(p(f), text(60 * KB, rng));
      // downloads: a few new, the oldest removed
      for (let i = 0; i < c(5); i++) {
        const ext = rng.pick(['pdf', 'zip', 'exe', 'docx', 'jpg']);
        await writeOne(p(`Downloads/new-${seed}-${i}.${ext}`), ext, rng.range(30 * KB, 400 * KB), rng);
      }
      for (const f of some(under('Downloads'), c(4))) await fs.rm(p(f));
      // phone photos synced into this year's folder; a few blurry ones deleted
      for (let i = 0; i < c(40); i++)
        await writeOne(
          p(`Pictures/2024/Phone/PXL_${seed}_${i}.jpg`),
          'jpg',
          rng.range(80 * KB, 400 * KB),
          rng,
        );
      for (const f of some(under('Pictures', ['jpg']), c(6))) await fs.rm(p(f));
      // the browser's cache turns over; its settings database and the apps' settings change
      const cache = under('.cache');
      for (const f of some(cache, c(120))) await fs.rm(p(f));
      for (let i = 0; i < c(140); i++)
        await writeOne(
          p(`.cache/browser/Cache_Data/f_${(0x900000 + seed * 1000 + i).toString(16)}`),
          'cache',
          rng.range(500, 40 * KB),
          rng,
        );
      for (const f of under('.config', ['sqlite'])) await rewrite(p(f), rng, 0.01);
      for (const f of some(under('.config', ['json']), c(6))) await rewrite(p(f), rng);
      // code: edits, and a commit's new git objects
      for (const f of some(under('Projects/site/src'), c(6))) await append(p(f), text(400, rng));
      for (let i = 0; i < c(12); i++) {
        const id = rng.bytes(20).toString('hex');
        await writeOne(
          p(`Projects/site/.git/objects/${id.slice(0, 2)}/${id.slice(2)}`),
          'git',
          rng.range(200, 4 * KB),
          rng,
        );
      }
      // a draft renamed, an old .doc saved again as .docx, a folder moved
      const docs = some(under('Documents', ['docx']), c(3));
      for (const f of docs) await fs.rename(p(f), p(f.replace(/\.docx$/, ' (final).docx')));
      const saveAs = some(under('Documents', ['odt']), c(2));
      for (const f of saveAs) {
        await writeOne(p(f.replace(/\.odt$/, '.docx')), 'docx', (await fs.stat(p(f))).size, rng);
        await fs.rm(p(f));
      }
      await fs.rename(p('Documents/School/Year 1'), p('Documents/School/Year 1 (old)')).catch(() => {});
      break;
    }
    case 'software-update': {
      // an application updates itself: most of its files rewritten, some removed, some added, and the
      // thumbnail cache rebuilt; a library moves to a versioned name
      const app = under('Apps/Editor');
      for (const f of some(app, Math.round(app.length * 0.8))) await rewrite(p(f), rng, 0.08);
      for (const f of some(under('Apps/Editor', ['json', 'js']), c(8))) await fs.rm(p(f)).catch(() => {});
      for (let i = 0; i < c(25); i++) {
        const ext = rng.pick(['so', 'png', 'pak', 'js', 'json', 'dat']);
        await writeOne(
          p(`Apps/Editor/resources/new-${seed}-${i}.${ext}`),
          ext,
          rng.range(2 * KB, 200 * KB),
          rng,
        );
      }
      for (const f of some(under('Apps/Editor', ['so']), c(10))) {
        await writeOne(p(`${f}.3.3`), 'so', (await fs.stat(p(f))).size, rng);
        await fs.rm(p(f));
      }
      for (const f of some(under('Apps/Editor', ['pak']), c(5))) {
        await writeOne(p(f.replace(/\.pak$/, '-3.3.pak')), 'pak', (await fs.stat(p(f))).size, rng);
        await fs.rm(p(f));
      }
      for (const f of under('.config', ['sqlite'])) await rewrite(p(f), rng, 0.01);
      break;
    }
    case 'photo-import': {
      // a camera's card imported: hundreds of photos and their sidecars, a photo library database
      for (let i = 0; i < c(450); i++) {
        const ext = i % 5 === 0 ? 'heic' : 'jpg';
        const base = `Pictures/2024/Import ${seed}/DSC_${String(i).padStart(4, '0')}`;
        await writeOne(p(`${base}.${ext}`), ext, rng.range(100 * KB, 400 * KB), rng);
        if (i % 3 === 0) await writeOne(p(`${base}.xmp`), 'xmp', rng.range(2 * KB, 6 * KB), rng);
      }
      for (let i = 0; i < c(120); i++)
        await writeOne(
          p(`.cache/thumbnails/normal/${rng.bytes(16).toString('hex')}.png`),
          'png',
          rng.range(5 * KB, 30 * KB),
          rng,
        );
      for (const f of under('.config', ['sqlite'])) await rewrite(p(f), rng, 0.02);
      break;
    }
    case 'clean-up': {
      // old things deleted, an old folder zipped (the zip kept, the folder removed), downloads emptied
      const old = under('Documents/Home').filter((f) => f.includes('Taxes'));
      await writeOne(p('Documents/Home/Taxes-archive.zip'), 'zip', 400 * KB, rng);
      for (const f of old) await fs.rm(p(f));
      for (const f of some(under('Downloads'), c(30))) await fs.rm(p(f)).catch(() => {});
      for (const f of some(under('Pictures', ['jpg', 'png']), c(40))) await fs.rm(p(f)).catch(() => {});
      for (const f of some(under('.cache'), c(200))) await fs.rm(p(f)).catch(() => {});
      break;
    }
    case 'music-retag': {
      // a tag editor rewrites every song's ID3 header (the audio stays)
      for (const f of under('Music', ['mp3'])) {
        const buf = await fs.readFile(p(f));
        const tag = Buffer.concat([
          Buffer.from('ID3\x04\x00\x00\x00\x00\x12\x00', 'latin1'),
          text(300 + rng.int(200), rng),
        ]);
        await fs.writeFile(p(f), Buffer.concat([tag, buf.subarray(10)]));
      }
      break;
    }
  }
  return day;
}

/** How the simulated ransomware treats a file it encrypts. */
export type AttackStyle = 'in-place' | 'rename' | 'random-name' | 'partial';
export const ATTACK_STYLES: AttackStyle[] = ['in-place', 'rename', 'random-name', 'partial'];

/**
 * Encrypts `fraction` of the files below root, picked at random over all of them (AES-256-CTR with a
 * random key, plus a footer with the "key blob", as families like Ryuk and LockBit write one):
 * in place; as name + ".locked" (the original deleted) with a ransom note in each folder hit; under a
 * random name with ".crypt"; or only the first 64 KiB, in place (intermittent encryption).
 * Returns how many files were encrypted.
 */
export async function encryptFiles(
  root: string,
  fraction: number,
  style: AttackStyle,
  seed = 1,
): Promise<number> {
  const rng = new Rng(seed * 104729 + Math.round(fraction * 1000));
  const all = await listFiles(root);
  const n = Math.round(all.length * fraction);
  const chosen: string[] = [];
  const pool = [...all];
  while (chosen.length < n && pool.length) chosen.push(pool.splice(rng.int(pool.length), 1)[0]);
  const key = rng.bytes(32);
  const notes = new Set<string>();
  for (const rel of chosen) {
    const file = path.join(root, rel);
    const plain = await fs.readFile(file);
    const iv = rng.bytes(16);
    const cipher = crypto.createCipheriv('aes-256-ctr', key, iv);
    const footer = Buffer.concat([iv, rng.bytes(240)]);
    if (style === 'partial') {
      const head = plain.subarray(0, 64 * KB);
      const fh = await fs.open(file, 'r+');
      await fh.write(cipher.update(head), 0, head.length, 0);
      await fh.write(footer, 0, footer.length, plain.length);
      await fh.close();
      continue;
    }
    const sealed = Buffer.concat([cipher.update(plain), footer]);
    if (style === 'in-place') {
      await fs.writeFile(file, sealed);
      continue;
    }
    const target =
      style === 'rename'
        ? `${file}.locked`
        : path.join(path.dirname(file), `${rng.bytes(8).toString('hex')}.crypt`);
    await fs.writeFile(target, sealed);
    await fs.rm(file);
    if (style === 'rename' && !notes.has(path.dirname(file))) {
      notes.add(path.dirname(file));
      await fs.writeFile(
        path.join(path.dirname(file), 'HOW_TO_RESTORE_FILES.txt'),
        'Your files are encrypted.\n',
      );
    }
  }
  return chosen.length;
}
