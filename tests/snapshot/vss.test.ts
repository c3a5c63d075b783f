// The Volume Shadow Copy requestor's platform-neutral parts (native/src/common/vss_flow.h): its C++ unit
// test (the call sequence with a fake COM Api: order, abort on failure at every step, error texts, path
// mapping) built with the host compiler and run, and the same mapping and texts through the addon this
// machine built. The COM code itself (native/src/windows/vss_snapshot.cc) only compiles here
// (tests/tracking/windows-build.test.ts); it has not run on Windows.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from '../tracking/helpers.js';
import { loadNativeAddon } from '../../src/main/engine/native.js';
import type { VssAddon } from '../../src/main/engine/snapshot/windows/index.js';

const cxx = ['c++', 'g++', 'clang++'].find((c) => spawnSync(c, ['--version']).status === 0);

describe.skipIf(!cxx)(`VSS requestor sequence${cxx ? '' : ' (skipped: no C++ compiler on PATH)'}`, () => {
  it('passes its C++ unit test (fake COM Api)', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'tm-vss-test-'));
    try {
      const exe = path.join(dir, 'vss_test');
      const build = spawnSync(
        cxx!,
        ['-std=c++17', '-Wall', '-Wextra', '-Werror', '-o', exe, 'test/vss_test.cc'],
        {
          cwd: path.join(repoRoot, 'native'),
          encoding: 'utf8',
        },
      );
      expect(build.stderr).toBe('');
      expect(build.status).toBe(0);
      const run = spawnSync(exe, { encoding: 'utf8' });
      expect(run.stderr).toBe('');
      expect(run.stdout).toMatch(/all VSS unit tests passed/);
      expect(run.status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

const addon = loadNativeAddon<VssAddon & { vssErrorText(hr: number): string }>('', 'tidemark_tracker');
const skipAddon =
  !addon || typeof addon.vssShadowPath !== 'function'
    ? process.env.TIDEMARK_SKIP_NATIVE === '1'
      ? 'native addon not built'
      : undefined
    : undefined;
describe.skipIf(!!skipAddon)(
  `VSS path mapping through the addon${skipAddon ? ` (skipped: ${skipAddon})` : ''}`,
  () => {
    it('maps paths into a shadow copy and names HRESULTs', () => {
      expect(addon, 'the native addon is not built (node scripts/build-native.mjs)').toBeDefined();
      const dev = '\\\\?\\GLOBALROOT\\Device\\HarddiskVolumeShadowCopy12';
      expect(addon!.vssShadowPath(dev, 'C:\\', 'C:\\Users\\ann\\Outlook.pst')).toBe(
        `${dev}\\Users\\ann\\Outlook.pst`,
      );
      expect(addon!.vssErrorText(0x80042317)).toMatch(/MAXIMUM_NUMBER_OF_SNAPSHOTS/);
      expect(addon!.vssErrorText(0x80004005)).toBe('HRESULT 0x80004005');
      // COM itself is Windows-only: this build has no VssSession
      if (process.platform !== 'win32') expect(addon!.VssSession).toBeUndefined();
    });
  },
);
