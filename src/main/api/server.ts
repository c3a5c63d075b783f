/**
 * Browser mode: serves the built renderer and binds the API to a WebSocket on 127.0.0.1, for headless
 * PCs, NAS boxes and tests. Guarantees:
 * - it listens on loopback only;
 * - every request (files and the WebSocket) needs the random access token, given once in the URL
 *   (`/?token=…`, exchanged for an HttpOnly SameSite=Strict cookie) or as `Authorization: Bearer …`;
 * - requests with a foreign Host header (DNS rebinding) or a foreign Origin (another web site) are
 *   refused, and the WebSocket additionally requires an Origin of this server.
 * It does not do TLS: it is never reachable from another machine.
 */
import http from 'node:http';
import fs from 'node:fs/promises';
import path from 'node:path';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import type { WsClientMessage, WsServerMessage } from '../../shared/api.js';
import type { TidemarkApi } from './api.js';

/** Bytes a socket may have waiting before progress events to it are left out (see serveSocket). */
const MAX_EVENT_BACKLOG = 4 * 1024 * 1024;
const SUPERSEDED_EVENTS: ReadonlySet<string> = new Set([
  'run.progress',
  'restore.progress',
  'repair.progress',
  'speedtest.progress',
]);

export interface ServerOptions {
  api: TidemarkApi;
  /** The built renderer (index.html and assets). */
  staticDir: string;
  /** 0 (default): a free port. */
  port?: number;
  /** Default: 32 random bytes, hex. */
  token?: string;
}

export interface RunningServer {
  port: number;
  token: string;
  /** http://127.0.0.1:PORT/ */
  url: string;
  /** The URL to open once: it carries the token. */
  tokenUrl: string;
  close(): Promise<void>;
}

const MIME: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

function parseCookies(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (header ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0) out[part.slice(0, i).trim()] = decodeURIComponent(part.slice(i + 1).trim());
  }
  return out;
}

function sameToken(a: string | undefined, b: string): boolean {
  if (!a) return false;
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export async function startServer(opts: ServerOptions): Promise<RunningServer> {
  const token = opts.token ?? randomBytes(32).toString('hex');
  const staticDir = path.resolve(opts.staticDir);
  let port = 0;
  const cookieName = () => `tidemark_token_${port}`;
  const allowedHosts = () => new Set([`127.0.0.1:${port}`, `localhost:${port}`]);
  const allowedOrigins = () => new Set([`http://127.0.0.1:${port}`, `http://localhost:${port}`]);
  const csp = () =>
    [
      "default-src 'self'",
      "script-src 'self'",
      "style-src 'self'",
      "img-src 'self' data:",
      "font-src 'self' data:",
      `connect-src 'self' ws://127.0.0.1:${port} ws://localhost:${port}`,
      "object-src 'none'",
      "base-uri 'none'",
      "frame-ancestors 'none'",
      "form-action 'none'",
    ].join('; ');

  /** Why a request is refused (status, reason), or null when it may proceed. */
  function refuse(req: http.IncomingMessage, url: URL, requireOrigin: boolean): [number, string] | null {
    if (!allowedHosts().has(req.headers.host ?? '')) return [403, 'foreign Host header'];
    const origin = req.headers.origin;
    if (origin !== undefined && !allowedOrigins().has(origin)) return [403, 'foreign Origin'];
    if (requireOrigin && origin === undefined) return [403, 'missing Origin'];
    if (req.headers['sec-fetch-site'] === 'cross-site') return [403, 'cross-site request'];
    const auth = req.headers.authorization;
    const bearer = auth?.startsWith('Bearer ') ? auth.slice(7) : undefined;
    const ok =
      sameToken(parseCookies(req.headers.cookie)[cookieName()], token) ||
      sameToken(bearer, token) ||
      sameToken(url.searchParams.get('token') ?? undefined, token);
    if (!ok) return [401, 'missing or wrong access token'];
    return null;
  }

  const baseHeaders = (): Record<string, string> => ({
    'Content-Security-Policy': csp(),
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',
    'Referrer-Policy': 'no-referrer',
    'Cross-Origin-Opener-Policy': 'same-origin',
    'Cross-Origin-Resource-Policy': 'same-origin',
  });

  const server = http.createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      const refused = refuse(req, url, false);
      if (refused) {
        res.writeHead(refused[0], { ...baseHeaders(), 'Content-Type': 'text/plain; charset=utf-8' });
        res.end(
          refused[0] === 401
            ? 'Tidemark: open the address with its token, as printed by "npm run serve".\n'
            : `Tidemark: request refused (${refused[1]}).\n`,
        );
        return;
      }
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.writeHead(405, baseHeaders());
        res.end();
        return;
      }
      if (url.searchParams.has('token')) {
        // exchange the token in the URL for a cookie, and drop it from the address bar
        url.searchParams.delete('token');
        res.writeHead(302, {
          ...baseHeaders(),
          'Set-Cookie': `${cookieName()}=${token}; HttpOnly; SameSite=Strict; Path=/`,
          Location: url.pathname + (url.search || ''),
          'Cache-Control': 'no-store',
        });
        res.end();
        return;
      }
      let rel: string;
      try {
        rel = decodeURIComponent(url.pathname);
      } catch {
        res.writeHead(400, baseHeaders());
        res.end();
        return;
      }
      let file = path.resolve(staticDir, '.' + path.posix.normalize('/' + rel));
      if (file !== staticDir && !file.startsWith(staticDir + path.sep)) {
        res.writeHead(404, baseHeaders());
        res.end();
        return;
      }
      let st = await fs.stat(file).catch(() => null);
      if (!st || st.isDirectory()) {
        // the single-page app handles its own routes
        file = path.join(staticDir, 'index.html');
        st = await fs.stat(file).catch(() => null);
      }
      if (!st) {
        res.writeHead(503, { ...baseHeaders(), 'Content-Type': 'text/plain; charset=utf-8' });
        res.end('Tidemark: the user interface is not built (run "npm run build").\n');
        return;
      }
      const body = await fs.readFile(file);
      res.writeHead(200, {
        ...baseHeaders(),
        'Content-Type': MIME[path.extname(file)] ?? 'application/octet-stream',
        'Content-Length': String(body.length),
        'Cache-Control': file.endsWith('.html') ? 'no-store' : 'private, max-age=3600',
      });
      res.end(req.method === 'HEAD' ? undefined : body);
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });

  const wss = new WebSocketServer({ noServer: true, maxPayload: 1024 * 1024 });
  server.on('upgrade', (req, socket, head) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const refused =
      url.pathname === '/ws' ? refuse(req, url, true) : ([404, 'not found'] as [number, string]);
    if (refused) {
      socket.end(
        `HTTP/1.1 ${refused[0]} ${refused[0] === 401 ? 'Unauthorized' : 'Forbidden'}\r\nConnection: close\r\n\r\n`,
      );
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => serveSocket(ws));
  });

  function serveSocket(ws: WebSocket): void {
    const send = (m: WsServerMessage) => {
      if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(m));
    };
    // A page that stops reading (a frozen tab, a sleeping laptop's browser) would otherwise make ws
    // buffer every event in this process: progress events are superseded by the next one, so past a
    // backlog they are left out; the rest (run.finished, jobs.changed, …) always go.
    const off = opts.api.on((event, payload) => {
      if (ws.bufferedAmount > MAX_EVENT_BACKLOG && SUPERSEDED_EVENTS.has(event)) return;
      send({ event, payload });
    });
    ws.on('close', off);
    ws.on('message', (data) => {
      let msg: WsClientMessage;
      try {
        msg = JSON.parse(String(data)) as WsClientMessage;
      } catch {
        ws.close(1003, 'not JSON');
        return;
      }
      if (typeof msg?.id !== 'number' || typeof msg.method !== 'string') {
        ws.close(1003, 'malformed message');
        return;
      }
      void opts.api.handle(msg.method, msg.args).then((r) => send({ id: msg.id, ...r }));
    });
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => resolve());
  });
  port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}/`;
  return {
    port,
    token,
    url,
    tokenUrl: `${url}?token=${token}`,
    close: async () => {
      for (const c of wss.clients) c.terminate();
      wss.close();
      server.closeAllConnections?.();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
