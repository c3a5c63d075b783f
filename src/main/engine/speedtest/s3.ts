/**
 * The speed test on an S3 destination: PUTs and GETs of pack-sized objects and small ranged GETs, each
 * at 1, 4 and 8 requests in flight (by default), through the same S3 backend a backup uses (multipart
 * uploads of packs, the same connection limit, named errors for wrong keys, missing permissions, a
 * skewed clock). Requests are network I/O: the JavaScript thread only waits on them.
 *
 * Its probe objects live under `<prefix>/.tidemark-speedtest/<probe>/` (./probes.ts): never a
 * repository's object, and removed at the end — on an error and on cancel too (requests in flight are
 * cut off by closing the connections). A test that could not clean up (the process was killed, the
 * network went away) leaves a folder whose name says when it expires; the next test on that destination
 * removes it and any multipart upload left under it.
 */
import crypto from 'node:crypto';
import { ListMultipartUploadsCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { S3Backend, type S3Options } from '../backend/s3/index.js';
import { s3OptionsFrom, type BackendOptions } from '../backend/open.js';
import { AbortedError } from '../errors.js';
import { LatencyHistogram } from './histogram.js';
import { ALIGN, resolveOptions, s3Pattern, type S3Pattern } from './patterns.js';
import { S3_FOLDER, isStale, parseProbeName, probeName } from './probes.js';
import type {
  LatencyFigures,
  PatternResult,
  SpeedTestOptions,
  SpeedTestProgress,
  SpeedTestResult,
  SpeedTestSample,
} from './types.js';

const MiB = 1024 * 1024;
const SAMPLE_MS = 500;
/** Objects a GET pattern reads from when no PUT pattern ran before it. */
const GET_OBJECTS = 8;

function latency(h: LatencyHistogram): LatencyFigures {
  const us = (q: number) => {
    const ns = h.percentile(q);
    return ns === null ? null : Math.round(ns / 10) / 100;
  };
  return { p50: us(0.5), p95: us(0.95), p99: us(0.99) };
}

/** The probe folder's key prefix ("prefix/.tidemark-speedtest/"). */
function probeRoot(prefix: string): string {
  return `${prefix ? `${prefix}/` : ''}${S3_FOLDER}/`;
}

/** Removes what a test left under its probe folder: objects, and unfinished multipart uploads. */
async function removeProbe(s3: S3Options, root: string, name: string): Promise<number> {
  const b = new S3Backend({ ...s3, prefix: `${root}${name}`, createBucket: false });
  let removed = 0;
  try {
    const names: string[] = [];
    for await (const o of b.list('data')) names.push(o.name);
    for (const n of names) {
      await b.remove('data', n);
      removed++;
    }
    // a store that cannot list unfinished uploads (s3rver: NotImplemented) has none to abort
    removed += await b.abortStaleUploads(0).catch(() => 0);
  } finally {
    await b.close();
  }
  return removed;
}

/** Probe folders of earlier tests that are stale (./probes.ts), by their objects and unfinished uploads.
 *  Listed without a delimiter: some stores (s3rver) answer delimited listings with nothing. */
async function staleProbes(control: S3Backend, root: string): Promise<string[]> {
  const names = new Set<string>();
  const nameOf = (key: string) => key.slice(root.length).split('/')[0];
  let token: string | undefined;
  do {
    const res = await control.sdk
      .send(new ListObjectsV2Command({ Bucket: control.bucket, Prefix: root, ContinuationToken: token }))
      .catch((err: unknown) => {
        throw control.translate(err, 'list', root);
      });
    for (const o of res.Contents ?? []) if (o.Key) names.add(nameOf(o.Key));
    token = res.IsTruncated ? res.NextContinuationToken : undefined;
  } while (token);
  try {
    const res = await control.sdk.send(
      new ListMultipartUploadsCommand({ Bucket: control.bucket, Prefix: root }),
    );
    for (const u of res.Uploads ?? []) if (u.Key) names.add(nameOf(u.Key));
  } catch {
    // a store without multipart listings (s3rver): only objects can be left behind there
  }
  return [...names].filter((n) => parseProbeName(n) && isStale(n));
}

export async function runS3SpeedTest(
  location: string,
  options: BackendOptions,
  opts: SpeedTestOptions = {},
): Promise<SpeedTestResult> {
  const r = resolveOptions(opts, 's3');
  const signal = opts.signal;
  const startedAt = Date.now();
  const s3 = { ...s3OptionsFrom(location, options), createBucket: false };
  const root = probeRoot(s3.prefix);
  const control = new S3Backend(s3);
  const results: PatternResult[] = [];
  const samples: SpeedTestSample[] = [];
  const notes: string[] = [];
  const runs = r.patterns.flatMap((id) => r.inFlight.map((n) => ({ pattern: s3Pattern(id), inFlight: n })));
  const emit = (p: Partial<SpeedTestProgress> & { phase: SpeedTestProgress['phase'] }) =>
    opts.progress?.({
      patternIndex: 0,
      patternCount: runs.length,
      fraction: 0,
      elapsedMs: Date.now() - startedAt,
      results: [...results],
      ...p,
    });
  if (signal?.aborted) throw new AbortedError();
  emit({ phase: 'checking' });

  let staleRemoved = 0;
  try {
    for (const name of await staleProbes(control, root)) staleRemoved += await removeProbe(s3, root, name);
  } finally {
    await control.close();
  }
  if (staleRemoved) notes.push(`removed ${staleRemoved} probe object(s) an interrupted test had left`);

  const deadline = Date.now() + runs.length * r.durationMs + 3_600_000;
  const probe = probeName(deadline);
  const backend = new S3Backend({ ...s3, prefix: `${root}${probe}` });
  const payload = crypto.randomBytes(s3Pattern('pack-put').size);
  const written: string[] = [];
  let serial = 0;
  const nextName = () => `p${(serial++).toString(16).padStart(8, '0')}`;
  let stopped = false;
  // cancel: stop issuing, and cut off what is in flight by closing the connections
  const onAbort = () => {
    stopped = true;
    void backend.close();
  };
  signal?.addEventListener('abort', onAbort);
  const where = s3.prefix ? `${s3.bucket}/${s3.prefix}` : s3.bucket;
  try {
    for (const [i, { pattern, inFlight }] of runs.entries()) {
      if (!pattern.write && written.length === 0) {
        // objects to read: a few packs, put first (not measured)
        emit({
          phase: 'preparing',
          pattern: pattern.id,
          inFlight,
          patternIndex: i,
          fraction: i / runs.length,
        });
        await Promise.all(
          Array.from({ length: GET_OBJECTS }, async () => {
            const name = nextName();
            await backend.save('data', name, payload);
            written.push(name);
          }),
        );
      }
      if (stopped) throw new AbortedError('speed test cancelled');
      results.push(await runPattern(i, pattern, inFlight));
    }
  } catch (err) {
    if (signal?.aborted) throw new AbortedError('speed test cancelled');
    throw err;
  } finally {
    signal?.removeEventListener('abort', onAbort);
    emit({ phase: 'cleaning', fraction: 1 });
    await backend.close();
    try {
      await removeProbe(s3, root, probe);
    } catch (err) {
      notes.push(
        `could not remove the probe objects under ${root}${probe}/ (${(err as Error).message}); the next speed test there removes them`,
      );
    }
  }
  emit({ phase: 'done', fraction: 1, patternIndex: runs.length });
  return {
    kind: 's3',
    location: where,
    startedAt,
    endedAt: Date.now(),
    results,
    samples,
    notes,
    staleRemoved,
  };

  async function runPattern(index: number, pattern: S3Pattern, inFlight: number): Promise<PatternResult> {
    const hist = new LatencyHistogram();
    let bytes = 0;
    let ops = 0;
    let failure: unknown;
    const t0 = performance.now();
    const end = t0 + r.durationMs;
    const base = Date.now() - startedAt;
    let lastT = 0;
    let lastBytes = 0;
    let lastOps = 0;
    emit({
      phase: 'testing',
      pattern: pattern.id,
      inFlight,
      patternIndex: index,
      fraction: index / runs.length,
    });
    const ticker = setInterval(() => {
      const ms = performance.now() - t0;
      const secs = (ms - lastT) / 1000;
      const sample: SpeedTestSample = {
        t: Math.round(base + ms),
        pattern: pattern.id,
        mibps: Math.round(((bytes - lastBytes) / MiB / secs) * 10) / 10,
        iops: Math.round(((ops - lastOps) / secs) * 10) / 10,
      };
      samples.push(sample);
      [lastT, lastBytes, lastOps] = [ms, bytes, ops];
      emit({
        phase: 'testing',
        pattern: pattern.id,
        inFlight,
        patternIndex: index,
        fraction: (index + Math.min(1, ms / r.durationMs)) / runs.length,
        sample,
      });
    }, SAMPLE_MS);
    const worker = async () => {
      while (!stopped && failure === undefined && performance.now() < end) {
        const start = performance.now();
        try {
          if (pattern.write) {
            const name = nextName();
            await backend.save('data', name, payload);
            written.push(name);
            bytes += payload.length;
          } else if (pattern.id === 'pack-get') {
            const name = written[ops % written.length];
            // (not `bytes += await …`: that reads `bytes` before the wait, losing the other workers' adds)
            const got = await backend.load('data', name);
            bytes += got.length;
          } else {
            const name = written[Math.floor(Math.random() * written.length)];
            const slots = Math.floor((payload.length - pattern.size) / ALIGN) + 1;
            const offset = Math.floor(Math.random() * slots) * ALIGN;
            const got = await backend.load('data', name, offset, pattern.size);
            bytes += got.length;
          }
        } catch (err) {
          failure ??= err;
          break;
        }
        ops++;
        hist.add((performance.now() - start) * 1e6);
      }
    };
    try {
      await Promise.all(Array.from({ length: inFlight }, worker));
    } finally {
      clearInterval(ticker);
    }
    if (stopped) throw new AbortedError('speed test cancelled');
    if (failure !== undefined) throw failure;
    const secs = (performance.now() - t0) / 1000;
    const mibps = Math.round((bytes / MiB / secs) * 100) / 100;
    const lat = latency(hist);
    const none = { p50: null, p95: null, p99: null };
    return {
      pattern: pattern.id,
      label: pattern.label(inFlight),
      blockSize: pattern.size,
      align: ALIGN,
      readPercent: pattern.write ? 0 : 100,
      random: pattern.id === 'small-get',
      threads: 1,
      depth: inFlight,
      elapsedMs: Math.round(secs * 100_000) / 100,
      reads: pattern.write ? 0 : ops,
      writes: pattern.write ? ops : 0,
      bytesRead: pattern.write ? 0 : bytes,
      bytesWritten: pattern.write ? bytes : 0,
      mibps,
      readMibps: pattern.write ? 0 : mibps,
      writeMibps: pattern.write ? mibps : 0,
      iops: Math.round((ops / secs) * 10) / 10,
      latencyUs: lat,
      readLatencyUs: pattern.write ? none : lat,
      writeLatencyUs: pattern.write ? lat : none,
      engine: 's3',
    };
  }
}

/** The probe folder's key prefix under a destination's prefix (tests look there). */
export const speedTestProbeRoot = probeRoot;
