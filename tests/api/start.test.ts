// `npm run serve` (scripts/start.mjs --serve) on a fresh data folder: builds the UI, starts browser mode,
// prints the address with its token, serves the app with it and refuses requests without it.
import { afterAll, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const home = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-serve-'));
let child: ChildProcess | undefined;

afterAll(() => {
  child?.kill('SIGTERM');
  fs.rmSync(home, { recursive: true, force: true });
});

function get(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers }, (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      })
      .on('error', reject);
  });
}

it('npm run serve prints a token URL that opens the app; without the token it is refused', async () => {
  child = spawn(process.execPath, [path.join(root, 'scripts/start.mjs'), '--serve'], {
    cwd: root,
    env: { ...process.env, TIDEMARK_HOME: path.join(home, 'data'), TIDEMARK_PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stderr!.on('data', (d) => (out += d));
  const url = await new Promise<string>((resolve, reject) => {
    child!.stdout!.on('data', (d) => {
      out += d;
      const m = /http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]{64}/.exec(out);
      if (m) resolve(m[0]);
    });
    child!.on('exit', (code) => reject(new Error(`serve exited with ${code}:\n${out}`)));
  });
  const base = url.slice(0, url.indexOf('?'));
  expect((await get(base)).status).toBe(401);
  const first = await get(url);
  expect(first.status).toBe(302);
  const cookie = String(first.headers['set-cookie']).split(';')[0];
  const page = await get(base, { Cookie: cookie });
  expect(page.status).toBe(200);
  expect(page.body).toContain('<div id="root">');
  // the default data folder was created on first start
  expect(fs.existsSync(path.join(home, 'data', 'catalog.sqlite'))).toBe(true);
});
