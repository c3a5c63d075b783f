/**
 * A restored single-blob file written whole (restore/wholeFile.ts, what the restore's workers call): the
 * native one-call writer (native/fsmeta writeWhole) and Node's fs fallback give the same file — content,
 * mode (special bits and bits the umask strips too), times, sparseness — and the same errors, worded as
 * Node's fs words them. The native half is skipped, with the reason, when the addon was not built.
 */
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { importWithEnv } from '../helpers/env.js';

type WholeModule = typeof import('../../src/main/engine/restore/wholeFile.js');

const load = (native: boolean): Promise<WholeModule> =>
  importWithEnv(
    { TIDEMARK_NO_NATIVE_WRITES: native ? '0' : '1' },
    () => import('../../src/main/engine/restore/wholeFile.js'),
  );

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-whole-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));
const probe = await load(true);
const NS = 1_600_000_000_123_456_789n;

const isRoot = process.getuid?.() === 0;

/** Writes under `dir` and reports what came of it (or the error). */
function outcome(
  m: WholeModule,
  dir: string,
  name: string,
  data: Buffer,
  mode: number,
  owner?: number,
  ns = NS,
) {
  const file = path.join(dir, name);
  try {
    m.writeWholeFile(Buffer.from(file), mode, owner, owner ? owner + 1 : 0, ns, data);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return { error: e.message.replace(dir, '<dir>'), code: e.code };
  }
  const st = fs.lstatSync(file, { bigint: true });
  return {
    owner: `${st.uid}:${st.gid}`,
    mode: Number(st.mode) & 0o7777,
    size: Number(st.size),
    sparse: st.blocks === 0n,
    same: fs.readFileSync(file).equals(data),
    mtimeNs: st.mtimeNs,
  };
}

function cases(m: WholeModule, dir: string) {
  fs.mkdirSync(dir);
  const text = randomBytes(20_000);
  fs.writeFileSync(path.join(dir, 'existing'), 'old content, longer than the new one');
  fs.chmodSync(path.join(dir, 'existing'), 0o600);
  fs.symlinkSync('/etc/passwd', path.join(dir, 'link'));
  return {
    plain: outcome(m, dir, 'plain', text, 0o644),
    empty: outcome(m, dir, 'empty', Buffer.alloc(0), 0o600),
    zeros: outcome(m, dir, 'zeros', Buffer.alloc(300_000), 0o640),
    setuid: outcome(m, dir, 'setuid', text, 0o4755),
    groupWritable: outcome(m, dir, 'group-writable', text, 0o666), // the umask would strip a bit
    readOnly: outcome(m, dir, 'read-only', text, 0o444),
    existing: outcome(m, dir, 'existing', Buffer.from('new'), 0o640), // truncated, given its mode
    missingParent: outcome(m, dir, 'no/such/folder', text, 0o644),
    symlink: outcome(m, dir, 'link', text, 0o644), // never written through
    before1970: outcome(m, dir, 'old', text, 0o644, undefined, -86_400_123_456_789n),
    // as root, a file gets its owner and group (a setgid file keeps its bit: chmod comes after chown)
    ...(isRoot && { owned: outcome(m, dir, 'owned', text, 0o2750, 4321) }),
  };
}

describe.skipIf(!probe.nativeWholeWrites)(
  `whole files${probe.nativeWholeWrites ? '' : ' (skipped: native/fsmeta was not built, or Windows)'}`,
  () => {
    it('are written the same by the native writer and by Node fs, errors worded alike', async () => {
      const fallback = await load(false);
      expect(fallback.nativeWholeWrites).toBe(false);
      const viaFs = cases(fallback, path.join(root, 'fs'));
      const viaNative = cases(await load(true), path.join(root, 'native'));
      expect(viaNative).toEqual(viaFs);
      // and what both did is right
      expect(viaNative.plain).toMatchObject({ mode: 0o644, same: true, size: 20_000 });
      expect(viaNative.zeros).toMatchObject({ mode: 0o640, size: 300_000, sparse: true, same: true });
      expect(viaNative.setuid.mode).toBe(0o4755);
      expect(viaNative.groupWritable.mode).toBe(0o666);
      expect(viaNative.readOnly).toMatchObject({ mode: 0o444, same: true });
      expect(viaNative.existing).toMatchObject({ mode: 0o640, size: 3, same: true });
      expect(viaNative.missingParent).toEqual({
        code: 'ENOENT',
        error: "ENOENT: no such file or directory, open '<dir>/no/such/folder'",
      });
      expect(viaNative.symlink.code).toBe('ELOOP');
      expect(viaNative.before1970.mtimeNs).toBe(-86_400_123_456_789n); // a day and a bit before 1970
      if (isRoot) expect(viaNative.owned).toMatchObject({ owner: '4321:4322', mode: 0o2750, same: true });
      expect(fs.readFileSync('/etc/passwd').equals(Buffer.from('x'))).toBe(false);
      // times to the nanosecond (set on the open file, after the last write)
      for (const r of [viaNative.plain, viaNative.zeros, viaNative.existing]) expect(r.mtimeNs).toBe(NS);
    });
  },
);

it('the fallback alone writes a file whole (where the addon is missing)', async () => {
  const m = await load(false);
  const dir = path.join(root, 'fallback-only');
  fs.mkdirSync(dir);
  const r = outcome(m, dir, 'f', Buffer.from('hello'), 0o600);
  expect(r).toMatchObject({ mode: 0o600, size: 5, same: true });
});
