// The Windows backend (USN journal) and the Volume Shadow Copy requestor cannot run here, but they must
// compile: build every Windows translation unit, including the N-API glue, to object files with mingw-w64.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from './helpers.js';

// node-addon-api needs std::mutex, which only the posix-threads flavour of mingw-w64 provides.
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

describe.skipIf(!!skip)(`Windows backend build with mingw-w64${skip ? ` (skipped: ${skip})` : ''}`, () => {
  it('compiles the USN backend, the VSS requestor, the common code and the addon glue for x86_64 Windows', () => {
    const out = mkdtempSync(path.join(os.tmpdir(), 'tm-mingw-'));
    try {
      const native = path.join(repoRoot, 'native');
      const sources = [
        'src/windows/usn_backend.cc',
        'src/windows/vss_snapshot.cc',
        'src/common/usn_record.cc',
        'src/common/coalescer.cc',
        'src/common/factory.cc',
        'src/addon.cc',
      ];
      for (const src of sources) {
        const res = spawnSync(
          gxx!,
          [
            '-std=c++17',
            '-Wall',
            '-Wextra',
            '-Wno-unused-parameter',
            '-Werror',
            '-DNAPI_VERSION=8',
            '-DNAPI_CPP_EXCEPTIONS',
            '-DNODE_ADDON_API_CPP_EXCEPTIONS_ALL',
            '-DWIN32_LEAN_AND_MEAN',
            '-DNOMINMAX',
            '-I',
            path.join(repoRoot, 'node_modules', 'node-addon-api'),
            '-I',
            nodeInclude!,
            '-c',
            src,
            '-o',
            path.join(out, path.basename(src) + '.obj'),
          ],
          { cwd: native, encoding: 'utf8' },
        );
        expect(res.stderr, `${src}`).toBe('');
        expect(res.status, `${src}`).toBe(0);
      }
      // the Windows code path really was compiled (not preprocessed away)
      const nm = spawnSync('x86_64-w64-mingw32-nm', ['-C', path.join(out, 'usn_backend.cc.obj')], {
        encoding: 'utf8',
      });
      if (nm.status === 0) expect(nm.stdout).toMatch(/CreateUsnBackend/);
      // the shadow copy requestor calls the real VSS API, and mingw-w64's import library provides it
      const vss = spawnSync('x86_64-w64-mingw32-nm', [path.join(out, 'vss_snapshot.cc.obj')], {
        encoding: 'utf8',
      });
      if (vss.status === 0) {
        expect(vss.stdout).toMatch(/ U .*CreateVssBackupComponentsInternal/);
        expect(vss.stdout).toMatch(/ U .*VssFreeSnapshotProperties/);
        const lib = spawnSync('x86_64-w64-mingw32-nm', ['/usr/x86_64-w64-mingw32/lib/libvssapi.a'], {
          encoding: 'utf8',
        });
        if (lib.status === 0) expect(lib.stdout).toMatch(/ T .*CreateVssBackupComponentsInternal/);
      }
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
