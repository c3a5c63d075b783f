// The speed test's I/O engine cannot run on Windows here, but its Windows path (CreateFileW with
// FILE_FLAG_NO_BUFFERING | FILE_FLAG_WRITE_THROUGH, positioned ReadFile/WriteFile, FlushFileBuffers) must
// compile: native/iotest/iotest.cc is built to an object file with mingw-w64, warnings as errors.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from '../e2e/helpers.js';

const gxx = ['x86_64-w64-mingw32-g++-posix', 'x86_64-w64-mingw32-g++'].find(
  (c) => spawnSync(c, ['--version']).status === 0,
);
const nodeInclude = [
  path.resolve(path.dirname(process.execPath), '..', 'include', 'node'),
  '/usr/include/node',
].find((d) => existsSync(path.join(d, 'node_api.h')));
const skip = !gxx
  ? 'mingw-w64 is not installed (apt-get install mingw-w64)'
  : !nodeInclude
    ? 'Node headers not found'
    : undefined;

describe.skipIf(!!skip)(`the speed test's engine for Windows${skip ? ` (skipped: ${skip})` : ''}`, () => {
  it('compiles native/iotest for x86_64 Windows with the unbuffered file calls', () => {
    const out = mkdtempSync(path.join(os.tmpdir(), 'tm-mingw-iotest-'));
    try {
      const obj = path.join(out, 'iotest.obj');
      const res = spawnSync(
        gxx!,
        [
          '-std=c++17',
          '-Wall',
          '-Wextra',
          '-Wno-unused-parameter',
          '-Werror',
          '-DNAPI_VERSION=8',
          '-DNAPI_DISABLE_CPP_EXCEPTIONS',
          '-DWIN32_LEAN_AND_MEAN',
          '-DNOMINMAX',
          '-I',
          path.join(ROOT, 'node_modules', 'node-addon-api'),
          '-I',
          nodeInclude!,
          '-c',
          path.join(ROOT, 'native', 'iotest', 'iotest.cc'),
          '-o',
          obj,
        ],
        { encoding: 'utf8' },
      );
      expect(res.stderr).toBe('');
      expect(res.status).toBe(0);
      const nm = spawnSync('x86_64-w64-mingw32-nm', ['-C', obj], { encoding: 'utf8' });
      if (nm.status === 0) {
        expect(nm.stdout).toMatch(/CreateFileW/);
        expect(nm.stdout).toMatch(/FlushFileBuffers/);
      }
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
