#!/usr/bin/env node
// Builds the changed-block-tracking addon (native/cbt → build/Release/tidemark_cbt.node) with node-gyp.
// Linux only; needs clang, bpftool, libbpf-dev and a kernel with BTF (see .ci/setup.d/25-cbt.sh).
// Exit code 0 on success or when there is nothing to build here (not Linux); 1 on a build error, with the
// reason printed. Callers that must not fail (npm ci) should ignore the exit code: the app then runs with
// file-level tracking only, and says so.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const here = path.dirname(fileURLToPath(import.meta.url));
if (process.platform !== 'linux') {
  console.log('native/cbt: block tracking is Linux-only; nothing to build');
  process.exit(0);
}

function findNodeGyp() {
  const require = createRequire(import.meta.url);
  const candidates = [];
  try {
    candidates.push(require.resolve('node-gyp/bin/node-gyp.js'));
  } catch {}
  if (process.env.npm_config_node_gyp) candidates.push(process.env.npm_config_node_gyp);
  const prefix = path.resolve(path.dirname(process.execPath), '..');
  candidates.push(path.join(prefix, 'lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js'));
  candidates.push('/usr/lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js');
  candidates.push('/usr/share/nodejs/node-gyp/bin/node-gyp.js');
  return candidates.find((c) => c && existsSync(c));
}

const gyp = findNodeGyp();
if (!gyp) {
  console.error('native/cbt: node-gyp not found (it ships with npm); cannot build the block tracker');
  process.exit(1);
}
const args = [gyp, 'rebuild', '--release'];
// Use the installed Node headers when they match this Node (no download needed, works offline).
const prefix = path.resolve(path.dirname(process.execPath), '..');
if (existsSync(path.join(prefix, 'include/node/node.h'))) args.push(`--nodedir=${prefix}`);
const r = spawnSync(process.execPath, args, { cwd: here, stdio: 'inherit' });
if (r.status !== 0) {
  console.error(`native/cbt: build failed (exit ${r.status}); block-level tracking will be unavailable`);
  process.exit(1);
}
console.log('native/cbt: built build/Release/tidemark_cbt.node');
