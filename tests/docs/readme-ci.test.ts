// The README's first code block is what a new user runs, and .ci/run runs it as written (its
// `readme_cmd '…'` lines): these tests fail when the two drift apart. The postinstall step that makes
// `npm ci` succeed without the Electron download host (scripts/electron-runtime.mjs) is run here against
// stand-in electron installers that fail the way an offline machine does, and that succeed.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

function readmeCommands(): string[] {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const block = /```(?:sh|bash|shell)?\n([\s\S]*?)```/.exec(readme);
  if (!block) throw new Error('README.md has no code block');
  return block[1]
    .split('\n')
    .map((line) => line.replace(/\s+#.*$/, '').trim())
    .filter((line) => line && !line.startsWith('#'));
}

function ciCommands(): string[] {
  const run = fs.readFileSync(path.join(ROOT, '.ci/run'), 'utf8');
  return [...run.matchAll(/^readme_cmd '([^']+)'$/gm)].map((m) => m[1]);
}

describe('README and CI', () => {
  it('.ci/run runs the README first code block, command by command, in order', () => {
    const readme = readmeCommands();
    expect(readme).toEqual(['npm ci', 'npm start', 'npm test']);
    expect(ciCommands()).toEqual(readme);
  });

  it('.ci/run sets no Electron download switch by hand', () => {
    const run = fs.readFileSync(path.join(ROOT, '.ci/run'), 'utf8');
    expect(run).not.toMatch(/ELECTRON_SKIP_BINARY_DOWNLOAD/);
  });

  it("npm runs the project's own Electron step instead of electron's script", () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
    expect(pkg.allowScripts.electron).toBe(false);
    expect(pkg.scripts.postinstall).toBe('node scripts/electron-runtime.mjs');
  });
});

describe('scripts/electron-runtime.mjs', () => {
  /** A project folder with the step and a stand-in electron package whose install.js runs `body`. */
  function project(body: string): string {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-electron-'));
    fs.mkdirSync(path.join(dir, 'scripts'));
    fs.copyFileSync(
      path.join(ROOT, 'scripts/electron-runtime.mjs'),
      path.join(dir, 'scripts/electron-runtime.mjs'),
    );
    fs.mkdirSync(path.join(dir, 'node_modules/electron'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'node_modules/electron/install.js'), body);
    return dir;
  }
  const run = (dir: string, env: Record<string, string> = {}) => {
    const e = { ...process.env, ...env };
    if (!('ELECTRON_SKIP_BINARY_DOWNLOAD' in env)) delete e.ELECTRON_SKIP_BINARY_DOWNLOAD;
    return spawnSync(process.execPath, ['scripts/electron-runtime.mjs'], {
      cwd: dir,
      env: e,
      encoding: 'utf8',
    });
  };

  it('a download host that cannot be reached leaves browser mode, and the install succeeds', () => {
    const dir = project(
      "console.error('RequestError: getaddrinfo ENOTFOUND downloads.example\\n    at ClientRequest'); process.exit(1);",
    );
    const r = run(dir);
    expect(r.status).toBe(0);
    expect(r.stdout).toContain(
      'Electron runtime not installed (RequestError: getaddrinfo ENOTFOUND downloads.example): npm start will serve Tidemark in browser mode',
    );
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a download that hangs is stopped after the timeout', () => {
    const dir = project('setInterval(() => {}, 1000);');
    const r = run(dir, { TIDEMARK_ELECTRON_TIMEOUT: '1' });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('Electron runtime not installed (no answer from the download host in 1 s)');
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('where the download works, the runtime is installed', () => {
    const dir = project(
      "const fs = require('fs'); fs.mkdirSync('dist'); fs.writeFileSync('dist/electron', '#!/bin/sh\\n'); fs.writeFileSync('path.txt', 'electron');",
    );
    const r = run(dir);
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('Electron runtime installed');
    expect(fs.existsSync(path.join(dir, 'node_modules/electron/dist/electron'))).toBe(true);
    // a second install finds it and does not download again
    fs.writeFileSync(path.join(dir, 'node_modules/electron/install.js'), 'process.exit(1);');
    expect(run(dir).stdout).toContain('Electron runtime already installed');
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('ELECTRON_SKIP_BINARY_DOWNLOAD still skips the download', () => {
    const dir = project("require('fs').writeFileSync('ran', ''); process.exit(1);");
    const r = run(dir, { ELECTRON_SKIP_BINARY_DOWNLOAD: '1' });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('not installed (ELECTRON_SKIP_BINARY_DOWNLOAD is set)');
    expect(fs.existsSync(path.join(dir, 'node_modules/electron/ran'))).toBe(false);
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
