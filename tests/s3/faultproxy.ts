/**
 * An HTTP proxy that sits between the S3 client and a real S3 server and breaks requests on purpose:
 * 503 SlowDown answers, connections reset before or after the server acted, response bodies cut off
 * half way (with the full Content-Length promised), and requests that never get an answer. Faults are
 * drawn from a seeded generator, so a failing run can be replayed.
 */
import http from 'node:http';
import type { Socket } from 'node:net';

export type Fault = 'slowdown' | 'reset-before' | 'reset-after' | 'truncate' | 'hang';

export interface FaultProxy {
  endpoint: string;
  /** How many times each fault was injected. */
  injected: Record<Fault, number>;
  requests: number;
  /** Probability that a request gets a fault (default 0.3); 0 turns faults off. */
  rate: number;
  /** Apply this fault to every request (overrides `rate`). */
  force: Fault | undefined;
  close(): Promise<void>;
}

function seeded(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
}

const SLOW_DOWN =
  '<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>';

export async function startFaultProxy(upstream: string, seed = 42, rate = 0.3): Promise<FaultProxy> {
  const up = new URL(upstream);
  const random = seeded(seed);
  const sockets = new Set<Socket>();
  const proxy: FaultProxy = {
    endpoint: '',
    injected: { slowdown: 0, 'reset-before': 0, 'reset-after': 0, truncate: 0, hang: 0 },
    requests: 0,
    rate,
    force: undefined,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };

  const pick = (method: string): Fault | undefined => {
    if (proxy.force) return proxy.force;
    if (random() >= proxy.rate) return undefined;
    const faults: Fault[] = ['slowdown', 'reset-before', 'reset-after', 'hang'];
    if (method === 'GET') faults.push('truncate', 'truncate');
    return faults[Math.floor(random() * faults.length)];
  };

  const server = http.createServer(async (req, res) => {
    proxy.requests++;
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const fault = pick(req.method ?? 'GET');
    if (fault) proxy.injected[fault]++;
    if (fault === 'slowdown') {
      res.writeHead(503, {
        'content-type': 'application/xml',
        'content-length': Buffer.byteLength(SLOW_DOWN),
      });
      res.end(SLOW_DOWN);
      return;
    }
    if (fault === 'reset-before') {
      req.socket.destroy();
      return;
    }
    if (fault === 'hang') return; // the client's request timeout has to notice
    const upstreamReq = http.request(
      { host: up.hostname, port: up.port, method: req.method, path: req.url, headers: req.headers }, // Host unchanged: it is part of the signature
      async (upRes) => {
        const parts: Buffer[] = [];
        for await (const c of upRes) parts.push(c as Buffer);
        const upBody = Buffer.concat(parts);
        if (fault === 'reset-after') {
          // The server has done the work (the object is written or deleted); the client never hears.
          req.socket.destroy();
          return;
        }
        // The body is buffered, so it goes out with a Content-Length instead of chunked encoding.
        const headers = { ...upRes.headers };
        if (req.method !== 'HEAD') {
          headers['content-length'] = String(upBody.length);
          delete headers['transfer-encoding'];
        }
        if (fault === 'truncate' && req.method !== 'HEAD' && upBody.length > 1) {
          res.writeHead(upRes.statusCode ?? 500, headers);
          res.write(upBody.subarray(0, Math.floor(upBody.length / 2)));
          setTimeout(() => req.socket.destroy(), 5);
          return;
        }
        res.writeHead(upRes.statusCode ?? 500, headers);
        res.end(upBody);
      },
    );
    upstreamReq.on('error', () => req.socket.destroy());
    upstreamReq.end(body);
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const addr = server.address() as { port: number };
  proxy.endpoint = `http://127.0.0.1:${addr.port}`;
  return proxy;
}
