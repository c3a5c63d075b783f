#!/usr/bin/env node
// Builds the native change-tracker addon(s) with node-gyp against the local Node headers:
// native/binding.gyp, and native/cbt/binding.gyp when it exists (the block tracker).
// Runs as the package's `install` script, so `npm ci` builds from source on a fresh machine.
// A failed build never fails the install: it prints a warning and the TypeScript side falls back
// to full scans (src/main/tracking picks the backend at runtime).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const addons = ['', 'cbt', 'fsmeta', 'cdc', 'aead', 'iotest'].map((d) => path.join(root, 'native', d)).filter((dir) =>
  existsSync(path.join(dir, 'binding.gyp')),
);

if (process.env.TIDEMARK_SKIP_NATIVE === '1') {
  console.warn('tidemark: TIDEMARK_SKIP_NATIVE=1, not building native addons (full scans only)');
  process.exit(0);
}

/** node-gyp: the copy npm runs lifecycle scripts with, else npm's bundled one, else a local install. */
function findNodeGyp() {
  const candidates = [
    process.env.npm_config_node_gyp,
    process.env.npm_execpath && path.join(path.dirname(process.env.npm_execpath), '..', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
    path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
    path.join(root, 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
  ];
  return candidates.find((c) => c && existsSync(c));
}

/** The headers of the running Node, so no download is needed (--nodedir expects <dir>/include/node). */
function findNodeDir() {
  const prefix = path.resolve(path.dirname(process.execPath), '..');
  return existsSync(path.join(prefix, 'include', 'node', 'node_api.h')) ? prefix : undefined;
}

const gyp = findNodeGyp();
if (!gyp) {
  console.warn('tidemark: WARNING node-gyp not found; native change tracking disabled (full scans only)');
  process.exit(0);
}
const nodedir = findNodeDir();
let failed = 0;
for (const dir of addons) {
  const args = [gyp, 'rebuild', '--directory', dir, ...(nodedir ? [`--nodedir=${nodedir}`] : [])];
  console.log(`tidemark: building ${path.relative(root, dir) || '.'}/binding.gyp`);
  const res = spawnSync(process.execPath, args, { stdio: ['ignore', 'inherit', 'inherit'], cwd: root });
  if (res.status !== 0) {
    failed++;
    console.warn(
      `tidemark: WARNING building ${path.relative(root, dir)} failed (${res.error?.message ?? `exit ${res.status}`}); ` +
        'change tracking falls back to full scans',
    );
  }
}
process.exit(failed && process.env.TIDEMARK_NATIVE_REQUIRED === '1' ? 1 : 0);
