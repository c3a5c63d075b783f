#!/usr/bin/env node
// `npm start`: builds the app (electron-vite) and opens the Electron window where the Electron runtime is
// installed (scripts/electron-runtime.mjs fetches it during `npm ci` where it can be downloaded); without
// one (an offline machine, a headless box, CI) it starts browser mode and prints the address to open.
// `npm run serve` (--serve): browser mode explicitly — the UI on 127.0.0.1 with a random access token.
// Other arguments go to the server: --port N, --data DIR (default $TIDEMARK_HOME or ~/.tidemark).
import { spawn, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { withMallocEnv } from '../bin/malloc-env.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const serveOnly = args.includes('--serve');
const rest = args.filter((a) => a !== '--serve');
const bin = (name) => path.join(root, 'node_modules', '.bin', process.platform === 'win32' ? `${name}.cmd` : name);

function run(cmd, cmdArgs) {
  const r = spawnSync(cmd, cmdArgs, { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

function electronBinary() {
  try {
    const p = createRequire(import.meta.url)('electron');
    return typeof p === 'string' && fs.existsSync(p) ? p : null;
  } catch {
    return null;
  }
}

async function serve() {
  // bundled, as Electron's main process is: the sources through tsx cost the server ~35 MiB (scripts/build-server.mjs)
  const { buildServer } = await import('./build-server.mjs');
  const entry = await buildServer();
  const child = spawn(process.execPath, [entry, ...rest], {
    cwd: root,
    stdio: 'inherit',
    // the server hosts the engine: glibc malloc settings that keep its peak memory down (bin/malloc-env.mjs)
    env: withMallocEnv(),
  });
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
  child.on('exit', (code) => process.exit(code ?? 0));
}

if (serveOnly) {
  console.log('Building the user interface…');
  run(bin('vite'), ['build', '-c', 'src/renderer/vite.config.ts']);
  await serve();
} else {
  console.log('Building Tidemark (electron-vite build)…');
  run(bin('electron-vite'), ['build']);
  const electron = electronBinary();
  const display = process.platform !== 'linux' || process.env.DISPLAY || process.env.WAYLAND_DISPLAY;
  if (electron && display) {
    // (Electron allocates ArrayBuffers with its own allocator; the malloc settings help its Node side)
    const child = spawn(electron, [root, ...rest], { cwd: root, stdio: 'inherit', env: withMallocEnv() });
    child.on('exit', (code) => process.exit(code ?? 0));
  } else {
    console.log(
      electron
        ? 'No display found: starting browser mode instead of the Electron window.'
        : 'No Electron runtime is installed (it could not be downloaded during npm ci): starting browser mode instead.',
    );
    await serve();
  }
}
