// The run and restore-test stores over a long session: fed 1000 finished runs (each with a detail of
// 480 samples) and 1000 restore tests, they hold no more than their caps and still show the newest.
import { beforeAll, describe, expect, it, vi } from 'vitest';
import type { RestoreTestSummary, RunDetail, RunSummary } from '../../../shared/api';

const listeners = vi.hoisted(() => new Map<string, ((p: unknown) => void)[]>());
vi.mock('../api', () => ({
  api: {
    on: (event: string, l: (p: unknown) => void) => {
      listeners.set(event, [...(listeners.get(event) ?? []), l]);
      return () => {};
    },
    call: async (method: string, args: { id: string }) => {
      if (method !== 'runs.get') throw new Error(`unexpected call ${method}`);
      return detail(args.id);
    },
  },
  errorMessage: (e: unknown) => String(e),
}));
vi.mock('./app', () => ({ useApp: { getState: () => ({ toast: () => {} }) } }));

const { useRuns } = await import('./runs');
const { useProtection } = await import('./protection');
const { HISTORY_LIMIT, KEPT_RUNS } = await import('./bounded');

const emit = (event: string, payload: unknown) => {
  for (const l of listeners.get(event) ?? []) l(payload);
};

function summary(i: number): RunSummary {
  return {
    id: `run-${i}`,
    jobId: 'job-1',
    jobName: 'Docs',
    kind: 'backup',
    status: 'completed',
    startedAt: new Date(1_700_000_000_000 + i * 60_000).toISOString(),
    endedAt: new Date(1_700_000_030_000 + i * 60_000).toISOString(),
    counters: {
      filesScanned: i,
      bytesScanned: 0,
      filesRead: 0,
      bytesRead: 0,
      filesDone: 0,
      bytesDone: 0,
      bytesNew: 0,
      bytesStored: 0,
      errors: 0,
    },
    warnings: 0,
  };
}

function detail(id: string): RunDetail {
  const i = Number(id.slice(4));
  return {
    ...summary(i),
    samples: Array.from({ length: 480 }, (_, t) => ({
      t: t * 1000,
      readBps: 1e6,
      writeBps: 1e6,
      filesPerSec: 1,
      dedupRatio: 1,
    })),
    warningList: [],
    log: [],
  };
}

beforeAll(() => expect(listeners.get('run.finished')?.length).toBeGreaterThan(0));

describe('stores over a long session', () => {
  it('keep a bounded run history, end states and details, newest first', async () => {
    for (let i = 0; i < 1000; i++) {
      emit('run.progress', { run: { ...summary(i), status: 'running' }, samples: [] });
      emit('run.finished', summary(i));
    }
    await vi.waitFor(() => expect(useRuns.getState().details['run-999']).toBeDefined());
    const s = useRuns.getState();
    expect(s.history).toHaveLength(HISTORY_LIMIT);
    expect(s.history[0].id).toBe('run-999');
    expect(s.history[HISTORY_LIMIT - 1].id).toBe(`run-${1000 - HISTORY_LIMIT}`);
    expect(Object.keys(s.finished)).toHaveLength(KEPT_RUNS);
    expect(s.finished['run-999'].counters.filesScanned).toBe(999);
    expect(Object.keys(s.details).length).toBeLessThanOrEqual(KEPT_RUNS);
    expect(s.details['run-999'].samples).toHaveLength(480);
    expect(s.details['run-0']).toBeUndefined();
    expect(Object.keys(s.live)).toHaveLength(0);
    // a run seen again (a reconnect's repeat) is listed once
    emit('run.finished', summary(999));
    expect(useRuns.getState().history.filter((r) => r.id === 'run-999')).toHaveLength(1);
  });

  it('keeps a bounded restore-test history, newest first', () => {
    for (let i = 0; i < 1000; i++)
      emit('restoreTest.finished', { id: `t-${i}`, jobId: 'job-1', status: 'passed' } as RestoreTestSummary);
    const tests = useProtection.getState().tests;
    expect(tests).toHaveLength(HISTORY_LIMIT);
    expect(tests[0].id).toBe('t-999');
  });
});
