// Browser-mode transport: the server refuses requests without the token, with a foreign Origin or Host,
// and binds the one API implementation over WebSocket (calls, validation errors, events).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import WebSocket from 'ws';
import { startServer, type RunningServer } from '../../src/main/api/server.js';
import type { TidemarkApi } from '../../src/main/api/api.js';
import { memoryApi } from '../helpers/api.js';
import { FakeEngine } from '../../src/main/api/fake-engine.js';
import type { WsServerMessage } from '../../src/shared/api.js';
import { until } from '../helpers/fixtures.js';

let tmp: string;
let server: RunningServer;
let api: TidemarkApi;

function request(
  pathname: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: server.port, path: pathname, headers }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Opens a WebSocket; resolves with it or with the HTTP status the server refused it with. */
function connect(headers: Record<string, string>): Promise<WebSocket | number> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`ws://127.0.0.1:${server.port}/ws`, { headers });
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    ws.once('error', () => resolve(-1));
  });
}

function rpc(ws: WebSocket) {
  let next = 1;
  const pending = new Map<number, (m: WsServerMessage) => void>();
  const events: { event: string; payload: any }[] = [];
  ws.on('message', (d) => {
    const m = JSON.parse(String(d)) as WsServerMessage;
    if ('event' in m) events.push(m);
    else pending.get(m.id)?.(m);
  });
  return {
    events,
    call(method: string, args: unknown): Promise<any> {
      const id = next++;
      return new Promise((resolve) => {
        pending.set(id, resolve);
        ws.send(JSON.stringify({ id, method, args }));
      });
    },
  };
}

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-server-'));
  const staticDir = path.join(tmp, 'static');
  fs.mkdirSync(path.join(staticDir, 'assets'), { recursive: true });
  fs.writeFileSync(path.join(staticDir, 'index.html'), '<!doctype html><title>Tidemark</title>');
  fs.writeFileSync(path.join(staticDir, 'assets', 'app.js'), 'console.log(1)');
  fs.writeFileSync(path.join(tmp, 'secret.txt'), 'do not serve');
  api = memoryApi(new FakeEngine(), tmp);
  server = await startServer({ api, staticDir });
});

afterAll(async () => {
  await api?.close();
  await server?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe('browser-mode server', () => {
  it('listens on loopback only', () => {
    expect(server.url).toBe(`http://127.0.0.1:${server.port}/`);
    expect(server.token).toMatch(/^[0-9a-f]{64}$/);
  });

  it('refuses requests without the token or with a wrong one', async () => {
    const host = { Host: `127.0.0.1:${server.port}` };
    expect((await request('/', host)).status).toBe(401);
    expect((await request('/assets/app.js', host)).status).toBe(401);
    expect((await request('/?token=nope', host)).status).toBe(401);
    expect(
      (await request('/', { ...host, Cookie: `tidemark_token_${server.port}=${'0'.repeat(64)}` })).status,
    ).toBe(401);
    expect((await request('/', { ...host, Authorization: 'Bearer wrong' })).status).toBe(401);
  });

  it('exchanges the token URL for an HttpOnly SameSite cookie that then opens the app', async () => {
    const first = await request(`/?token=${server.token}`);
    expect(first.status).toBe(302);
    expect(first.headers.location).toBe('/');
    const cookie = String(first.headers['set-cookie']);
    expect(cookie).toContain(`tidemark_token_${server.port}=${server.token}`);
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Strict');
    const page = await request('/', { Cookie: cookie.split(';')[0] });
    expect(page.status).toBe(200);
    expect(page.body).toContain('<title>Tidemark</title>');
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    expect(page.headers['x-frame-options']).toBe('DENY');
    const js = await request('/assets/app.js', { Authorization: `Bearer ${server.token}` });
    expect(js.status).toBe(200);
    expect(js.headers['content-type']).toContain('text/javascript');
  });

  it('refuses foreign origins and hosts even with the token', async () => {
    const auth = { Authorization: `Bearer ${server.token}` };
    expect((await request('/', { ...auth, Origin: 'http://evil.example' })).status).toBe(403);
    expect((await request('/', { ...auth, Origin: `http://127.0.0.1:${server.port + 1}` })).status).toBe(403);
    expect((await request('/', { ...auth, Host: 'evil.example' })).status).toBe(403);
    expect((await request('/', { ...auth, Host: `attacker.example:${server.port}` })).status).toBe(403);
    expect((await request('/', { ...auth, 'Sec-Fetch-Site': 'cross-site' })).status).toBe(403);
    expect((await request('/', { ...auth, Origin: `http://localhost:${server.port}` })).status).toBe(200);
  });

  it('does not serve files outside the renderer folder', async () => {
    const auth = { Authorization: `Bearer ${server.token}` };
    const r = await request('/..%2fsecret.txt', auth);
    expect(r.body).not.toContain('do not serve');
    const r2 = await request('/assets/../../secret.txt', auth);
    expect(r2.body).not.toContain('do not serve');
  });

  it('refuses WebSocket upgrades without token or with a foreign or missing Origin', async () => {
    const origin = `http://127.0.0.1:${server.port}`;
    expect(await connect({ Origin: origin })).toBe(401);
    expect(await connect({ Origin: 'http://evil.example', Authorization: `Bearer ${server.token}` })).toBe(
      403,
    );
    expect(await connect({ Authorization: `Bearer ${server.token}` })).toBe(403);
    const ws = await connect({ Origin: origin, Cookie: `tidemark_token_${server.port}=${server.token}` });
    expect(ws).toBeInstanceOf(WebSocket);
    (ws as WebSocket).close();
  });

  it('binds the API: calls, named validation errors, and events', async () => {
    const ws = (await connect({
      Origin: `http://127.0.0.1:${server.port}`,
      Authorization: `Bearer ${server.token}`,
    })) as WebSocket;
    const c = rpc(ws);
    const info = await c.call('app.info', {});
    expect(info.ok).toBe(true);
    expect(info.result.mode).toBe('browser');

    const unknown = await c.call('fs.rm', {});
    expect(unknown).toMatchObject({ ok: false, error: { code: 'UNKNOWN_METHOD' } });

    const bad = await c.call('jobs.create', {
      name: '',
      sources: [],
      destination: { kind: 'local', path: '' },
      schedule: { kind: 'manual' },
      password: 'x',
    });
    expect(bad.ok).toBe(false);
    expect(bad.error).toMatchObject({ name: 'ValidationError', code: 'VALIDATION' });
    const fields = bad.error.issues.map((i: { path: string }) => i.path);
    expect(fields).toEqual(expect.arrayContaining(['name', 'sources', 'destination.path', 'password']));

    const src = path.join(tmp, 'src');
    fs.mkdirSync(path.join(src, 'docs'), { recursive: true });
    fs.writeFileSync(path.join(src, 'docs', 'report.txt'), 'quarterly numbers');
    fs.writeFileSync(path.join(src, 'photo.jpg'), Buffer.alloc(5000, 7));
    const nested = await c.call('jobs.create', {
      name: 'Nested',
      sources: [src],
      destination: { kind: 'local', path: path.join(src, 'backup') },
      schedule: { kind: 'manual' },
      password: 'correct horse',
    });
    expect(nested.error).toMatchObject({ code: 'VALIDATION', issues: [{ path: 'destination.path' }] });
    expect(fs.existsSync(path.join(src, 'backup'))).toBe(false);
    const created = await c.call('jobs.create', {
      name: 'Docs',
      sources: [src],
      destination: { kind: 'local', path: path.join(tmp, 'repo') },
      schedule: { kind: 'daily', time: '21:30' },
      password: 'correct horse',
    });
    expect(created.ok).toBe(true);
    expect(created.result.nextRunAt).toMatch(/T/);
    expect(JSON.stringify(created.result)).not.toContain('correct horse');
    const jobId = created.result.id;

    const wrongPw = await c.call('jobs.create', {
      name: 'Again',
      sources: [src],
      destination: { kind: 'local', path: path.join(tmp, 'repo') },
      schedule: { kind: 'manual' },
      password: 'another password',
    });
    expect(wrongPw.error).toMatchObject({ code: 'WRONG_PASSWORD' });

    const run = await c.call('jobs.runNow', { id: jobId });
    expect(run.ok).toBe(true);
    await until(
      () => c.events.some((e) => e.event === 'run.finished' && e.payload.id === run.result.id),
      'the run to finish',
    );
    const finished = c.events.find((e) => e.event === 'run.finished')!.payload;
    expect(finished.status).toBe('completed');
    expect(finished.counters.filesDone).toBe(2);
    expect(c.events.some((e) => e.event === 'run.progress')).toBe(true);

    const snaps = (await c.call('snapshots.list', { jobId })).result;
    expect(snaps).toHaveLength(1);
    const hits = (await c.call('snapshots.search', { jobId, query: 'REPORT' })).result;
    expect(hits.map((h: { path: string }) => h.path)).toEqual([path.join(src, 'docs', 'report.txt')]);
    const dir = (await c.call('snapshots.browse', { jobId, snapshotId: snaps[0].id, path: src })).result;
    expect(dir.map((e: { name: string }) => e.name)).toEqual(['docs', 'photo.jpg']);

    const target = path.join(tmp, 'restored');
    const r = await c.call('restore.start', {
      jobId,
      snapshotId: snaps[0].id,
      paths: [path.join(src, 'docs', 'report.txt')],
      target: { kind: 'folder', path: target },
      overwrite: 'keep-both',
    });
    expect(r.ok).toBe(true);
    await until(
      () => c.events.some((e) => e.event === 'restore.progress' && e.payload.status !== 'running'),
      'the restore to finish',
    );
    expect(fs.readFileSync(path.join(target, src, 'docs', 'report.txt'), 'utf8')).toBe('quarterly numbers');
    ws.close();
  });
});
