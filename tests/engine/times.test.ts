/**
 * File times set on an open file (restore/times.ts, setTimesFdSync — what the restore's workers use
 * before closing a file they wrote): to the nanosecond with native/fsmeta, to about a microsecond with
 * Node's futimes where the addon is missing. The native half is skipped, with the reason, when the addon
 * was not built.
 */
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { importWithEnv } from '../helpers/env.js';

type TimesModule = typeof import('../../src/main/engine/restore/times.js');

const load = (native: boolean): Promise<TimesModule> =>
  importWithEnv(
    { TIDEMARK_NO_NATIVE_TIMES: native ? '0' : '1' },
    () => import('../../src/main/engine/restore/times.js'),
  );

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-times-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
const probe = await load(true);

for (const native of [false, true]) {
  const skip = native && !probe.nanosecondTimes ? 'native/fsmeta was not built (or Windows)' : undefined;
  describe.skipIf(!!skip)(
    `times on an open file: ${native ? 'native' : 'fallback'}${skip ? ` (skipped: ${skip})` : ''}`,
    () => {
      it('sets mtime and atime of the file, after its last write', async () => {
        const m = await load(native);
        expect(m.nanosecondTimes).toBe(native);
        const file = path.join(dir, `f-${native}`);
        const fd = fs.openSync(file, 'w');
        fs.writeSync(fd, 'content');
        const ns = 1_600_000_000_123_456_789n;
        m.setTimesFdSync(fd, ns.toString());
        fs.closeSync(fd); // closing does not change them
        const st = fs.statSync(file, { bigint: true });
        for (const got of [st.mtimeNs, st.atimeNs])
          if (native) expect(got).toBe(ns);
          else expect(Math.abs(Number(got - ns)) / 1000).toBeLessThan(2);
      });
    },
  );
}
