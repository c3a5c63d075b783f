/**
 * The browser-mode server as `npm start` runs it (src/main/api/serve.ts: the app's wiring with the real
 * engine and catalog, the scheduler, the HTTP/WebSocket transport), with a channel to bench/app-memory.ts
 * for its own memory figures (and the API's calls and run.finished events, to drive it): RSS, peak RSS (VmHWM, reset by the bench between phases), the V8 heap, and
 * the highest heap seen while it watches (it looks every 100 ms). Started by the bench, not by hand.
 */
import '../src/main/engineHost.js';
import fs from 'node:fs';
import v8 from 'node:v8';
import { createApi } from '../src/main/api/wiring.js';
import { startServer } from '../src/main/api/server.js';

const [dataDir, staticDir] = process.argv.slice(2);
const { api, close } = createApi({ mode: 'browser', dataDir });
api.startScheduler();
const server = await startServer({ api, staticDir, port: 0 });

const statusKb = (field: string): number => {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
};
let maxHeapUsed = 0;
let maxExternal = 0;
/** The run's phase (from run.progress) and the highest RSS and heap seen in each. */
let phase = 'idle';
let byPhase: Record<string, { rss: number; heap: number }> = {};
const watch = setInterval(() => {
  const m = process.memoryUsage();
  const p = (byPhase[phase] ??= { rss: 0, heap: 0 });
  p.rss = Math.max(p.rss, m.rss);
  p.heap = Math.max(p.heap, m.heapUsed);
  maxHeapUsed = Math.max(maxHeapUsed, m.heapUsed);
  maxExternal = Math.max(maxExternal, m.external + m.arrayBuffers);
}, 100);
watch.unref();

export interface ServerFigures {
  rss: number;
  peakRss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  maxHeapUsed: number;
  maxExternal: number;
  heapLimit: number;
  byPhase: Record<string, { rss: number; heap: number }>;
}

process.on('message', (msg: { op: string }) => {
  if (msg.op === 'gc') {
    (globalThis as { gc?: () => void }).gc?.();
    process.send!({ op: 'gc' });
  } else if (msg.op === 'reset') {
    // peak RSS from here (clear_refs 5 resets the process's VmHWM)
    fs.writeFileSync('/proc/self/clear_refs', '5');
    const m = process.memoryUsage();
    maxHeapUsed = m.heapUsed;
    maxExternal = m.external + m.arrayBuffers;
    byPhase = {};
    process.send!({ op: 'reset' });
  } else if (msg.op === 'stats') {
    const m = process.memoryUsage();
    const figures: ServerFigures = {
      rss: m.rss,
      peakRss: statusKb('VmHWM'),
      heapUsed: m.heapUsed,
      heapTotal: m.heapTotal,
      external: m.external + m.arrayBuffers,
      maxHeapUsed: Math.max(maxHeapUsed, m.heapUsed),
      maxExternal: Math.max(maxExternal, m.external + m.arrayBuffers),
      heapLimit: v8.getHeapStatistics().heap_size_limit,
      byPhase,
    };
    process.send!({ op: 'stats', figures });
  } else if (msg.op === 'call') {
    const { id, method, args } = msg as unknown as { id: number; method: string; args: unknown };
    void api.handle(method, args).then((r) => process.send!({ op: 'call', id, ...r }));
  } else if (msg.op === 'stop') {
    void (async () => {
      await api.close();
      close();
      await server.close();
      process.exit(0);
    })();
  }
});
api.on((event, payload) => {
  if (event === 'run.progress') phase = (payload as { phase: string }).phase;
  if (event === 'run.finished') {
    phase = 'idle';
    process.send!({ op: 'event', event, payload });
  }
});
process.send!({ op: 'ready', url: server.tokenUrl, pid: process.pid });
