#!/usr/bin/env node
// The project's postinstall step: fetch the Electron runtime, where it can be had.
//
// The `electron` npm package downloads its runtime (~100 MB) from its own host in a postinstall script.
// On a machine that cannot reach that host (offline, a locked-down office network, this project's build
// machines) that script fails, and npm would stop the whole `npm ci` for it — although everything but
// the desktop window works without the runtime (`npm start` serves the same app in browser mode). So
// package.json denies electron's own script (`allowScripts`), and this step runs the same installer
// itself, treating a failure as "no Electron here": it says so in one line and exits 0.
//
// ELECTRON_SKIP_BINARY_DOWNLOAD=1 skips the download (as electron's own script does);
// TIDEMARK_ELECTRON_TIMEOUT (seconds, default 600) bounds a download that hangs instead of failing.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const electronDir = path.join(root, 'node_modules', 'electron');
const say = (line) => console.log(`tidemark: ${line}`);
const unavailable = (reason) =>
  say(`Electron runtime not installed (${reason}): npm start will serve Tidemark in browser mode`);

/** The runtime's executable when electron's installer has put it in place, else null. */
export function installedRuntime(dir = electronDir) {
  try {
    const rel = fs.readFileSync(path.join(dir, 'path.txt'), 'utf8').trim();
    const exe = path.join(dir, 'dist', rel);
    return rel && fs.existsSync(exe) ? exe : null;
  } catch {
    return null;
  }
}

/** The last line of the installer's output that says what went wrong (its stack's first line). */
function reasonFrom(output) {
  const lines = output
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const err = lines.find((l) => /error|ENOTFOUND|ECONN|ETIMEDOUT|EAI_AGAIN|status code/i.test(l));
  return (err ?? lines[0] ?? 'the installer failed').replace(/^Error:\s*/, '').slice(0, 200);
}

async function main() {
  if (!fs.existsSync(path.join(electronDir, 'install.js'))) return; // a production install without devDependencies
  if (installedRuntime()) return say('Electron runtime already installed');
  if (process.env.ELECTRON_SKIP_BINARY_DOWNLOAD) return unavailable('ELECTRON_SKIP_BINARY_DOWNLOAD is set');
  const timeoutSec = Number(process.env.TIDEMARK_ELECTRON_TIMEOUT) || 600;
  say('downloading the Electron runtime…');
  const child = spawn(process.execPath, ['install.js'], {
    cwd: electronDir,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const timer = setTimeout(() => {
    output = `no answer from the download host in ${timeoutSec} s\n${output}`;
    child.kill('SIGKILL');
  }, timeoutSec * 1000);
  const code = await new Promise((resolve) => child.on('close', (c) => resolve(c)));
  clearTimeout(timer);
  if (code === 0 && installedRuntime()) return say('Electron runtime installed');
  unavailable(reasonFrom(output));
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    unavailable(err?.message ?? String(err));
  });
}
