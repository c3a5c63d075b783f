/**
 * Listing a folder for the scan (src/main/engine/scan/listDir.ts): the native listing (native/fsmeta
 * listDir, through an io_uring or not) gives exactly what Node's readdir and lstat give — the same names in
 * the same order, the same stats to the nanosecond, the same errors. The native half is skipped, with the
 * reason, when the addon was not built.
 */
import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { listDir, nativeListDir } from '../../src/main/engine/scan/listDir.js';

function fixture(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-list-'));
  // more entries than one submission takes (128), in an order readdir does not keep
  for (let i = 0; i < 300; i++) fs.writeFileSync(path.join(dir, `f${(i * 7919) % 1000}`), 'x'.repeat(i));
  fs.mkdirSync(path.join(dir, 'sub'), { mode: 0o750 });
  fs.symlinkSync('f0', path.join(dir, 'link'));
  fs.symlinkSync('/nowhere', path.join(dir, 'dangling'));
  execFileSync('mkfifo', [path.join(dir, 'pipe')]);
  fs.writeFileSync(path.join(dir, 'setuid'), 'x', { mode: 0o4755 });
  fs.chmodSync(path.join(dir, 'setuid'), 0o4755);
  // times before 1970 and to the nanosecond, a name that is not UTF-8, names sorting as bytes
  fs.writeFileSync(path.join(dir, 'old'), 'old');
  execFileSync('touch', ['-h', '-d', '1969-07-20 20:17:40.123456789', path.join(dir, 'old')]);
  fs.writeFileSync(Buffer.concat([Buffer.from(dir + '/bad-'), Buffer.from([0xff, 0xfe])]), 'latin1');
  for (const n of ['Zed', 'apple', 'éclair', 'a b']) fs.writeFileSync(path.join(dir, n), n);
  return dir;
}

describe.skipIf(!nativeListDir)(
  `listing a folder${nativeListDir ? '' : ' (skipped: native/fsmeta was not built: Node fs lists)'}`,
  () => {
    it('natively, through the io_uring and without, as Node lists and lstats it', async () => {
      const dir = fixture();
      try {
        const want = await listDir(Buffer.from(dir), { native: false });
        expect(want.via).toBe('fs');
        expect(want.names.length).toBe(300 + 11);
        for (const ring of [false, true]) {
          const got = await listDir(Buffer.from(dir), { native: true, ring });
          if (!ring) expect(got.via).toBe('native'); // (the ring's use: the next test)
          expect(got.names.map((n) => Buffer.from(n).toString('hex'))).toEqual(
            want.names.map((n) => Buffer.from(n).toString('hex')),
          );
          expect(got.stats).toEqual(want.stats);
          expect(got.error).toBeUndefined();
        }
        const types = new Set(want.stats.map((s) => ('type' in s ? s.type : 'error')));
        expect([...types].sort()).toEqual(['dir', 'fifo', 'file', 'symlink']);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('uses the io_uring where the kernel allows one', async (ctx) => {
      const got = await listDir(Buffer.from(os.tmpdir()), { native: true, ring: true });
      if (got.via !== 'ring') ctx.skip('no io_uring here (kernel, kernel.io_uring_disabled or a sandbox)');
      expect(got.via).toBe('ring');
    });

    it('fails a folder it cannot list the way Node does', async () => {
      const missing = Buffer.from(path.join(os.tmpdir(), 'tm-list-missing-folder'));
      const want = await listDir(missing, { native: false });
      const got = await listDir(missing, { native: true });
      expect(got.error).toEqual(want.error);
      expect(got.error?.code).toBe('ENOENT');
      expect(got.error?.message).toMatch(
        /^ENOENT: no such file or directory, scandir '.*tm-list-missing-folder'$/,
      );
      const file = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-list-')) + '/file';
      fs.writeFileSync(file, 'x');
      try {
        expect((await listDir(Buffer.from(file), { native: true })).error).toEqual(
          (await listDir(Buffer.from(file), { native: false })).error,
        );
      } finally {
        fs.rmSync(path.dirname(file), { recursive: true, force: true });
      }
    });
  },
);
