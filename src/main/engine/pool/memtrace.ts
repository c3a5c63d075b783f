/**
 * Where the memory of a process hosting the engine goes, for `TIDEMARK_MEMTRACE=1` (a diagnostic, off
 * otherwise: nothing here runs). The main thread samples the process's resident memory every 20 ms
 * (/proc/self/status: anonymous and file-backed) and, at each new peak, notes what every thread's V8
 * isolate holds then: its JS heap, and the ArrayBuffers and other memory outside it that V8 knows of.
 * Worker threads send theirs over a BroadcastChannel every 20 ms. `memtraceReport` gives the breakdown
 * at the peak; whatever resident memory no isolate accounts for is native (code and data of node and
 * the addons, malloc's arenas and what the addons allocate: zstd contexts, SQLite's cache, io_uring).
 * `TIDEMARK_MEMTRACE=timeline` also prints a line every half second: RSS, and per thread its JS heap /
 * ArrayBuffers / other external [its gauges], in MiB (what rises when, through a run).
 */
import fs from 'node:fs';
import { BroadcastChannel, isMainThread, threadId } from 'node:worker_threads';
import { alignedBytes } from '../aligned.js';
import { keptBufferBytes } from '../bufferPool.js';
import { scratchBytes } from './scratch.js';

const CHANNEL = 'tidemark.memtrace';
const PERIOD_MS = 20;
const MiB = 1024 * 1024;

export const memtraceOn = (): boolean => !!process.env.TIDEMARK_MEMTRACE;

interface Isolate {
  heapUsed: number;
  heapTotal: number;
  /** V8's external memory, ArrayBuffers included. */
  external: number;
  arrayBuffers: number;
  /** The engine's own buffers in this thread (bytes), by kind. */
  gauges: Record<string, number>;
}

interface Peak {
  rss: number;
  anon: number;
  file: number;
  atMs: number;
  main: Isolate;
  workers: Isolate[];
}

/** More of the engine's own buffers to report at the peak, by kind (registered by the modules that keep
 *  them; read only while the trace is on). */
const extraGauges = new Map<string, () => number>();
export function memtraceGauge(name: string, bytes: () => number): void {
  extraGauges.set(name, bytes);
}

const isolate = (): Isolate => {
  const m = process.memoryUsage();
  return {
    heapUsed: m.heapUsed,
    heapTotal: m.heapTotal,
    external: m.external,
    arrayBuffers: m.arrayBuffers,
    gauges: {
      'aligned made': alignedBytes.made,
      'aligned kept': alignedBytes.kept,
      ...(isMainThread ? { 'range buffers kept': keptBufferBytes() } : { 'scratch kept': scratchBytes() }),
      ...Object.fromEntries([...extraGauges].map(([k, f]) => [k, f()])),
    },
  };
};

/** In a worker thread: sends this isolate's figures to the main thread's trace, every PERIOD_MS. */
export function startWorkerMemtrace(): void {
  if (!memtraceOn() || isMainThread) return;
  const ch = new BroadcastChannel(CHANNEL);
  ch.unref();
  setInterval(() => ch.postMessage({ threadId, ...isolate() }), PERIOD_MS).unref();
}

let started: { t0: number; peak?: Peak; workers: Map<number, Isolate>; timer: NodeJS.Timeout } | undefined;

function status(): { rss: number; anon: number; file: number } {
  const s = fs.readFileSync('/proc/self/status', 'utf8');
  const kib = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(s)?.[1] ?? 0) * 1024;
  return { rss: kib('VmRSS'), anon: kib('RssAnon'), file: kib('RssFile') + kib('RssShmem') };
}

/** In the main thread: starts sampling (once). */
export function startMemtrace(): void {
  if (!memtraceOn() || started || process.platform !== 'linux') return;
  const workers = new Map<number, Isolate>();
  const ch = new BroadcastChannel(CHANNEL);
  ch.unref();
  ch.onmessage = (e) => {
    const { threadId: id, ...m } = (e as MessageEvent).data as Isolate & { threadId: number };
    workers.set(id, m);
  };
  const t0 = Date.now();
  let tick = 0;
  const sample = () => {
    const s = status();
    if (process.env.TIDEMARK_MEMTRACE === 'timeline' && tick++ % 25 === 0) {
      const f = (n: number) => (n / MiB).toFixed(0);
      const w = (x: Isolate) =>
        `${f(x.heapTotal)}/${f(x.arrayBuffers)}/${f(x.external - x.arrayBuffers)}[${Object.values(x.gauges).map(f).join(',')}]`;
      process.stderr.write(
        `TL ${((Date.now() - t0) / 1000).toFixed(1)} rss ${f(s.rss)} main ${w(isolate())} ${[...workers.values()].map(w).join(' ')}\n`,
      );
    }
    if (started!.peak && s.rss <= started!.peak.rss) return;
    started!.peak = {
      ...s,
      atMs: Date.now() - t0,
      main: isolate(),
      workers: [...workers.values()],
    };
  };
  started = { t0, workers, timer: setInterval(sample, PERIOD_MS).unref() };
  sample();
}

/** The breakdown at the peak so far, as lines of text (undefined when the trace is off). */
export function memtraceReport(): string | undefined {
  const p = started?.peak;
  if (!p) return undefined;
  const f = (n: number) => (n / MiB).toFixed(1);
  const sum = (xs: Isolate[], k: Exclude<keyof Isolate, 'gauges'>) => xs.reduce((n, x) => n + x[k], 0);
  const all = [p.main, ...p.workers];
  // ArrayBuffers live outside the heap; V8's "external" also counts them
  const heaps = sum(all, 'heapTotal');
  const buffers = sum(all, 'arrayBuffers');
  const otherExternal = sum(all, 'external') - buffers;
  const native = p.rss - heaps - buffers - Math.max(0, otherExternal);
  const g = (x: Isolate) =>
    Object.entries(x.gauges)
      .map(([k, v]) => `${k} ${f(v)}`)
      .join(', ');
  const lines = [
    `memtrace: peak RSS ${f(p.rss)} MiB at ${(p.atMs / 1000).toFixed(2)} s (anonymous ${f(p.anon)}, file-backed ${f(p.file)})`,
    `  main thread: JS heap ${f(p.main.heapTotal)} MiB (${f(p.main.heapUsed)} used), ArrayBuffers ${f(p.main.arrayBuffers)}, other external ${f(p.main.external - p.main.arrayBuffers)}; ${g(p.main)}`,
    ...p.workers.map(
      (w, i) =>
        `  worker ${i + 1}: JS heap ${f(w.heapTotal)} MiB (${f(w.heapUsed)} used), ArrayBuffers ${f(w.arrayBuffers)}, other external ${f(w.external - w.arrayBuffers)}; ${g(w)}`,
    ),
    `  total: JS heaps ${f(heaps)} MiB, ArrayBuffers ${f(buffers)}, other external ${f(otherExternal)}, RSS less these (native: code, malloc arenas, addons; low when counted buffers are not all resident) ${f(native)}`,
  ];
  return lines.join('\n');
}
