/**
 * The one implementation of the shared API contract (src/shared/api.ts). `dispatch(method, args)`
 * validates the arguments against the contract's schema, runs the handler and returns its result or
 * throws a named error; `on(listener)` delivers the contract's events. Transports (Electron IPC, the
 * browser-mode WebSocket server) only move these calls and events across their boundary.
 */
import fs from 'node:fs/promises';
import { statSync } from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { EventEmitter } from 'node:events';
import {
  argSchemas,
  type ApiArgs,
  type ApiEvent,
  type ApiEvents,
  type ApiMethod,
  type ApiParsedArgs,
  type ApiResults,
  type CheckSummary,
  type DirListing,
  type Health,
  type Job,
  type JobSummary,
  type RestoreStatus,
} from '../../shared/api.js';
import type { SnapshotEntry } from '../engine/repo/types.js';
import type { ApiServices, JobSpec, RepoHandle, Runner } from './services.js';
import { ApiUsageError, ValidationError, toWire } from './errors.js';
import { RunManager, type RunManagerDeps } from './runner.js';
import { TreeWalker, snapshotInfo } from './snapshots.js';
import { jobAlarms } from './alarms.js';
import { initProtection, withProtection } from './immutability.js';
import { heldSnapshots, holdReason } from '../engine/repo/holds.js';
import type { AlarmInfo } from '../../shared/api.js';
import { checkSummary, Protection } from './protection.js';
import { applyRetentionPolicy } from '../engine/repo/retentionPolicy.js';
import { diagnoseLocation } from '../engine/backend/diagnose.js';
import {
  destinationLocation,
  destinationTarget,
  placeKey,
  sameS3Credentials,
  type RepoTarget,
} from './destination.js';
import type { Destination, Retention } from '../../shared/api.js';
import { MemorySpeedTestStore, SpeedTests } from './speedtests.js';
import { runSpeedTest } from '../engine/speedtest/index.js';
import { dropOldFinished, KEPT_FINISHED, MAX_RESTORE_ERRORS } from './bounded.js';

type Handlers = { [M in ApiMethod]: (args: ApiParsedArgs[M]) => Promise<ApiResults[M]> };

interface RepoEntry {
  handle: Promise<RepoHandle>;
  /** Snapshots that existed when the handle was opened (its index knows their blobs). */
  seen?: Set<string>;
}

export class TidemarkApi {
  private events = new EventEmitter();
  readonly runs: Runner;
  private walker = new TreeWalker();
  private repos = new Map<string, RepoEntry>();
  private stats = new Map<string, { snapshots: number; bytes: number | null; alarms?: AlarmInfo[] }>();
  private checks = new Map<string, CheckSummary>();
  private restores = new Map<string, { status: RestoreStatus; abort: AbortController }>();
  private speed: SpeedTests;
  private handlers: Handlers;
  private protection: Protection;

  constructor(private s: ApiServices) {
    this.events.setMaxListeners(0);
    const emit = (
      event: 'run.progress' | 'run.finished' | 'jobs.changed' | 'restoreTest.finished',
      payload: unknown,
    ) => this.emit(event, payload as never);
    if (s.runner) this.runs = s.runner(emit);
    else {
      // the API's own runner records runs itself, so it needs a store that can save them
      const runs = s.runs as RunManagerDeps['runs'];
      if (typeof runs.saveRun !== 'function')
        throw new Error('without a runner, `runs` must be able to saveRun');
      this.runs = new RunManager({ ...s, runs }, emit);
    }
    this.events.on('run.finished', (run: { jobId: string; snapshotId?: string }) => {
      // an open handle that can refresh itself catches up in snapshotsOf; reopening one derives its key again
      const open = this.repos.get(run.jobId)?.handle.then(
        (h) => !!h.refresh,
        () => false,
      );
      void Promise.resolve(open)
        .then((refreshes) => {
          if (!refreshes) this.dropRepo(run.jobId);
          return this.refreshStats(run.jobId);
        })
        .then(() => {
          // a backup whose changes look like mass encryption: the app alerts (notification, banner)
          const alarm = this.stats.get(run.jobId)?.alarms?.find((x) => x.snapshotId === run.snapshotId);
          if (alarm) this.emit('alarm.raised', alarm);
        });
    });
    this.protection = new Protection({
      services: s,
      job: (id) => this.job(id),
      repoFor: (job) => this.repoFor(job),
      openOwn: async (job) => {
        const [pw, t] = await Promise.all([this.password(job), this.target(job)]);
        return this.s.engine.open(t.location, pw, t.options);
      },
      dropRepo: (id) => this.dropRepo(id),
      isRunning: (id) => this.runs.isRunning(id),
      setCheck: (id, c) => this.checks.set(id, c),
      emit: (event: ApiEvent, payload: unknown) => this.emit(event, payload as never),
    });
    this.speed = new SpeedTests({
      run: s.runSpeedTest ?? runSpeedTest,
      store: s.speedTests ?? new MemorySpeedTestStore(),
      listRuns: (jobId) => s.runs.listRuns({ jobId, limit: 1000 }),
      emit: (status) => this.emit('speedtest.progress', status),
    });
    this.handlers = this.makeHandlers();
  }

  /** Starts scheduling jobs (the app and browser mode; not tests). */
  startScheduler(): void {
    this.runs.startScheduler();
  }

  async close(): Promise<void> {
    for (const r of this.restores.values()) r.abort.abort();
    await this.speed.close();
    await this.runs.close();
    for (const id of [...this.repos.keys()]) this.dropRepo(id);
  }

  on(listener: <E extends ApiEvent>(event: E, payload: ApiEvents[E]) => void): () => void {
    const wrapped = (e: { event: ApiEvent; payload: unknown }) => listener(e.event, e.payload as never);
    this.events.on('*', wrapped);
    return () => this.events.off('*', wrapped);
  }

  emit<E extends ApiEvent>(event: E, payload: ApiEvents[E]): void {
    this.events.emit(event, payload);
    this.events.emit('*', { event, payload });
  }

  /** Validates and runs one call. Throws named errors (see toWire for their wire form). */
  async dispatch(method: string, args: unknown): Promise<unknown> {
    if (!Object.hasOwn(argSchemas, method))
      throw new ApiUsageError('UNKNOWN_METHOD', `unknown API method ${method}`);
    const m = method as ApiMethod;
    const parsed = argSchemas[m].safeParse(args ?? {});
    if (!parsed.success) throw ValidationError.fromZod(parsed.error);
    return (this.handlers[m] as (a: unknown) => Promise<unknown>)(parsed.data);
  }

  /** `dispatch` with the result or error in wire form, for transports. */
  async handle(
    method: string,
    args: unknown,
  ): Promise<{ ok: true; result: unknown } | { ok: false; error: ReturnType<typeof toWire> }> {
    try {
      return { ok: true, result: await this.dispatch(method, args) };
    } catch (err) {
      return { ok: false, error: toWire(err) };
    }
  }

  /** Typed in-process call (tests, tray). */
  call<M extends ApiMethod>(method: M, args: ApiArgs[M]): Promise<ApiResults[M]> {
    return this.dispatch(method, args) as Promise<ApiResults[M]>;
  }

  // -------------------------------------------------------------------------------------------

  private async job(id: string): Promise<Job> {
    const job = await this.s.jobs.getJob(id);
    if (!job) throw new ApiUsageError('NOT_FOUND', `no job with id ${id}`);
    return job;
  }

  private async password(job: Job): Promise<string> {
    const pw = await this.s.jobs.jobPassword(job.id);
    if (!pw) throw new ApiUsageError('NO_PASSWORD', `no password is stored for "${job.name}"; edit the job`);
    return pw;
  }

  /** How the job's destination is opened (with its S3 secret from the store). */
  private async target(job: Job): Promise<RepoTarget> {
    const secret = job.destination.kind === 's3' ? await this.s.jobs.destinationSecret(job.id) : undefined;
    return destinationTarget(job.destination, secret);
  }

  /**
   * How to reach a destination the UI is trying before (or without) saving it: an S3 secret left blank
   * on a job's edit page is the stored one, as long as it is the same store and key ID.
   */
  private async untriedTarget(
    destination: Destination,
    secretAccessKey: string | undefined,
    jobId: string | undefined,
    what: string,
  ): Promise<RepoTarget> {
    let secret = destination.kind === 's3' ? secretAccessKey || undefined : undefined;
    if (destination.kind === 's3' && !secret && jobId) {
      const job = await this.job(jobId);
      if (sameS3Credentials(job.destination, destination))
        secret = await this.s.jobs.destinationSecret(job.id);
    }
    if (destination.kind === 's3' && !secret)
      throw new ValidationError([
        { path: 'secretAccessKey', message: `enter the secret access key to ${what}` },
      ]);
    if (destination.kind === 'local' && !path.isAbsolute(destination.path))
      throw new ValidationError([{ path: 'destination.path', message: 'use an absolute folder path' }]);
    return destinationTarget(destination, secret);
  }

  private repoFor(job: Job): Promise<RepoHandle> {
    let entry = this.repos.get(job.id);
    if (!entry) {
      const handle = Promise.all([this.password(job), this.target(job)]).then(([pw, t]) =>
        this.s.engine.open(t.location, pw, t.options),
      );
      entry = { handle };
      this.repos.set(job.id, entry);
      handle.catch(() => this.repos.delete(job.id));
    }
    return entry.handle;
  }

  private dropRepo(jobId: string): void {
    const entry = this.repos.get(jobId);
    this.repos.delete(jobId);
    entry?.handle.then((h) => h.close()).catch(() => {});
  }

  /**
   * The job's own snapshots (`host` absent), or every snapshot that computer wrote into the job's
   * repository, whatever job wrote it (a repository shared by several PCs).
   */
  private async snapshotsFor(job: Job, host?: string): Promise<{ repo: RepoHandle; snaps: SnapshotEntry[] }> {
    const { repo, snaps, all } = await this.snapshotsOf(job);
    return { repo, snaps: host === undefined ? snaps : all.filter((x) => x.host === host) };
  }

  private async snapshotsOf(
    job: Job,
  ): Promise<{ repo: RepoHandle; snaps: SnapshotEntry[]; all: SnapshotEntry[] }> {
    let repo = await this.repoFor(job);
    let all = await repo.listSnapshots();
    const entry = this.repos.get(job.id);
    const seen = entry?.seen;
    if (entry && !seen) entry.seen = new Set(all.map((x) => x.id));
    else if (entry && seen && all.some((x) => !seen.has(x.id))) {
      // written since the handle was opened (a run, the CLI, another computer): its index learns the
      // new blobs; a handle that cannot refresh itself is reopened
      if (repo.refresh) {
        await repo.refresh();
        entry.seen = new Set(all.map((x) => x.id));
      } else {
        this.dropRepo(job.id);
        repo = await this.repoFor(job);
        all = await repo.listSnapshots();
        const fresh = this.repos.get(job.id);
        if (fresh) fresh.seen = new Set(all.map((x) => x.id));
      }
    }
    // a repository may hold several jobs' (and the CLI's) snapshots: show this job's own
    const snaps = all.filter((x) => x.job === job.snapshotTag);
    const prev = this.stats.get(job.id);
    this.stats.set(job.id, { snapshots: snaps.length, bytes: prev?.bytes ?? null, alarms: prev?.alarms });
    return { repo, snaps, all };
  }

  private async refreshStats(jobId: string): Promise<void> {
    try {
      const job = await this.job(jobId);
      const listed = await this.snapshotsOf(job);
      const alarms = await this.alarmsOf(job, false, listed);
      const { snaps } = listed;
      const bytes = this.s.engine.repoBytes
        ? await this.s.engine.repoBytes(destinationLocation(job.destination))
        : null;
      this.stats.set(jobId, { snapshots: snaps.length, bytes, alarms });
      this.emit('jobs.changed', { jobId });
    } catch {}
  }

  /** The job's mass-change alarms (./alarms.ts), from its repository. */
  private async alarmsOf(
    job: Job,
    includeDismissed = false,
    listed?: { repo: RepoHandle; snaps: SnapshotEntry[]; all: SnapshotEntry[] },
  ): Promise<AlarmInfo[]> {
    const { repo, snaps, all } = listed ?? (await this.snapshotsOf(job));
    if (!all.some((x) => x.massChange?.suspect)) return [];
    return jobAlarms(job, snaps, all, (await repo.listDismissals?.()) ?? [], includeDismissed);
  }

  private async summary(job: Job): Promise<JobSummary> {
    const [lastRun] = await this.s.runs.listRuns({ jobId: job.id, limit: 1 });
    let health: Health = 'never-run';
    if (lastRun) {
      health =
        lastRun.status === 'completed'
          ? 'ok'
          : lastRun.status === 'failed'
            ? 'error'
            : lastRun.status === 'running' || lastRun.status === 'queued' || lastRun.status === 'paused'
              ? 'ok'
              : 'warning';
    }
    const lastCheck = this.checks.get(job.id);
    if (lastCheck && !lastCheck.ok) health = 'error';
    const lastRestoreTest = await this.protection.last(job.id).catch(() => undefined);
    // (a clean check since, as after a repair, answers a failed restore test)
    if (
      lastRestoreTest?.status === 'failed' &&
      !(lastCheck?.ok && lastCheck.checkedAt > lastRestoreTest.endedAt)
    )
      health = 'error';
    const stats = this.stats.get(job.id);
    const alarm = stats?.alarms?.[0];
    if (alarm) health = 'error';
    if (!stats) {
      this.stats.set(job.id, { snapshots: 0, bytes: null });
      void this.refreshStats(job.id);
    }
    return {
      ...job,
      lastRun,
      nextRunAt: this.runs.nextRunAt(job),
      missed: lastRun?.status === 'missed',
      health,
      snapshotCount: stats?.snapshots ?? 0,
      repoBytes: stats?.bytes ?? null,
      running: this.runs.isRunning(job.id),
      lastCheck,
      ...(lastRestoreTest ? { lastRestoreTest } : {}),
      ...(alarm ? { alarm } : {}),
    };
  }

  private async checkSources(sources: string[]): Promise<void> {
    const issues: { path: string; message: string }[] = [];
    for (const [i, src] of sources.entries()) {
      if (!path.isAbsolute(src))
        issues.push({ path: `sources.${i}`, message: `${src} is not an absolute path` });
      else {
        const st = await fs.stat(src).catch(() => null);
        if (!st) issues.push({ path: `sources.${i}`, message: `${src} does not exist` });
        else if (!st.isDirectory() && !st.isFile())
          issues.push({ path: `sources.${i}`, message: `${src} is not a folder or file` });
      }
    }
    if (issues.length) throw new ValidationError(issues);
  }

  /** A repository inside a backed-up folder would back itself up on every run (and the reverse). */
  private checkOverlap(sources: string[], destination: Destination): void {
    if (destination.kind !== 'local') return;
    const dest = path.resolve(destination.path);
    const inside = (a: string, b: string) => a === b || a.startsWith(b.endsWith(path.sep) ? b : b + path.sep);
    for (const src of sources.map((p) => path.resolve(p))) {
      if (inside(dest, src))
        throw new ValidationError([
          {
            path: 'destination.path',
            message: `the destination is inside ${src}, which is backed up: choose a folder outside it`,
          },
        ]);
      if (inside(src, dest))
        throw new ValidationError([
          { path: 'destination.path', message: `the folder ${src} is inside the destination` },
        ]);
    }
  }

  /**
   * Opens the repository at a destination with the password, or creates one there — with the
   * protection the destination asks for (./protection.ts). Returns the destination as it is: an
   * existing repository's protection is its own.
   */
  private async prepareDestination(
    destination: Destination,
    password: string,
    secretAccessKey?: string,
    protect: { maintenancePassword?: string; retention?: Retention } = {},
  ): Promise<Destination> {
    const init = initProtection(destination, protect);
    const opened = async (repo: RepoHandle) => {
      try {
        return withProtection(destination, repo.immutability);
      } finally {
        await repo.close();
      }
    };
    if (destination.kind === 's3') {
      if (!secretAccessKey)
        throw new ValidationError([
          { path: 'secretAccessKey', message: 'enter the secret access key of the S3 destination' },
        ]);
      const t = destinationTarget(destination, secretAccessKey);
      // wrong keys, a missing permission or an unreachable store fail here with a named error
      return opened(
        (await this.s.engine.exists(t.location, t.options))
          ? await this.s.engine.open(t.location, password, t.options) // throws WrongPasswordError
          : await this.s.engine.init(t.location, password, t.options, init),
      );
    }
    const location = path.resolve(destination.path);
    if (!path.isAbsolute(destination.path))
      throw new ValidationError([{ path: 'destination.path', message: 'use an absolute folder path' }]);
    if (await this.s.engine.exists(location)) {
      return opened(await this.s.engine.open(location, password)); // throws WrongPasswordError
    }
    const st = await fs.stat(location).catch(() => null);
    if (st && !st.isDirectory())
      throw new ValidationError([
        { path: 'destination.path', message: `${location} is a file, not a folder` },
      ]);
    if (st && (await fs.readdir(location)).length > 0)
      throw new ValidationError([
        {
          path: 'destination.path',
          message: `${location} is not empty and holds no Tidemark repository; choose an empty or new folder`,
        },
      ]);
    await fs.mkdir(location, { recursive: true });
    return opened(await this.s.engine.init(location, password, {}, init));
  }

  private async listDirs(p: string | undefined): Promise<DirListing> {
    const home = this.s.info.homeDir;
    const dir = path.resolve(p && p.length ? p : home);
    const dirents = await fs.readdir(dir, { withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
      throw new ApiUsageError(err.code ?? 'FS_ERROR', `cannot open ${dir}: ${err.message}`);
    });
    const entries = dirents
      .filter((d) => d.isDirectory() || (d.isSymbolicLink() && isDirSync(path.join(dir, d.name))))
      .map((d) => ({ name: d.name, path: path.join(dir, d.name) }))
      .sort((a, b) =>
        a.name.startsWith('.') === b.name.startsWith('.')
          ? a.name.localeCompare(b.name)
          : a.name.startsWith('.')
            ? 1
            : -1,
      );
    const parent = path.dirname(dir) === dir ? null : path.dirname(dir);
    const roots = [{ label: 'Home', path: home }];
    if (process.platform === 'win32') {
      for (const letter of 'CDEFGHIJ') roots.push({ label: `${letter}:`, path: `${letter}:\\` });
    } else {
      roots.push({ label: 'Computer', path: '/' });
      for (const m of ['/media', '/mnt', '/Volumes'])
        if (await fs.stat(m).catch(() => null)) roots.push({ label: m.slice(1), path: m });
    }
    return { path: dir, parent, entries, roots };
  }

  private startRestore(job: Job, a: ApiParsedArgs['restore.start']): RestoreStatus {
    const id = `restore-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
    const target = a.target.kind === 'original' ? path.parse(process.cwd()).root : a.target.path;
    const status: RestoreStatus = {
      id,
      jobId: job.id,
      snapshotId: a.snapshotId,
      target,
      status: 'running',
      filesTotal: 0,
      bytesTotal: 0,
      filesDone: 0,
      bytesDone: 0,
      skipped: 0,
      errors: [],
    };
    const abort = new AbortController();
    this.restores.set(id, { status, abort });
    dropOldFinished(this.restores, KEPT_FINISHED, (r) => r.status.status !== 'running');
    let lastEmit = 0;
    const emit = (force: boolean) => {
      const now = Date.now();
      if (!force && now - lastEmit < 250) return;
      lastEmit = now;
      this.emit('restore.progress', { ...status, errors: [...status.errors] });
    };
    void (async () => {
      try {
        // the snapshot may be any computer's in the repository (the engine's restore refreshes the index)
        const repo = await this.repoFor(job);
        if (a.target.kind === 'folder') await fs.mkdir(target, { recursive: true });
        const result = await this.s.engine.restore(repo, {
          snapshot: a.snapshotId,
          target,
          include: a.paths.filter((p) => p !== '/'),
          overwrite: a.overwrite,
          memory: job.options.memory,
          signal: abort.signal,
          progress: (p) => {
            Object.assign(status, {
              filesTotal: p.filesTotal,
              bytesTotal: p.bytesTotal,
              filesDone: p.filesDone,
              bytesDone: p.bytesDone,
            });
            emit(false);
          },
        });
        status.filesDone = Math.max(status.filesDone, result.filesRestored);
        status.bytesDone = Math.max(status.bytesDone, result.bytesRestored);
        status.skipped = result.skipped;
        status.errors = result.errors
          .slice(0, MAX_RESTORE_ERRORS)
          .map((e) => ({ path: e.path, message: e.message }));
        status.errorCount = result.errors.length;
        status.status = result.errors.length ? 'completed-with-errors' : 'completed';
      } catch (err) {
        const wire = toWire(err);
        status.status = abort.signal.aborted || wire.code === 'ABORTED' ? 'cancelled' : 'failed';
        status.error = wire;
      }
      emit(true);
    })();
    return { ...status };
  }

  private makeHandlers(): Handlers {
    const s = this.s;
    return {
      'app.info': async () => ({
        ...s.info,
        platform: process.platform,
        nativePicker: !!s.desktop?.pickFolder,
        ...(s.tracking ? { tracking: s.tracking() } : {}),
      }),
      'settings.get': async () => s.settings.getSettings(),
      'settings.update': async (changes) => {
        const next = { ...(await s.settings.getSettings()), ...changes };
        await s.settings.saveSettings(next);
        if (changes.startAtLogin !== undefined) s.desktop?.setStartAtLogin?.(changes.startAtLogin);
        this.emit('settings.changed', next);
        return next;
      },
      'fs.listDirs': async (a) => this.listDirs(a.path),
      'fs.pickFolder': async (a) => (s.desktop?.pickFolder ? s.desktop.pickFolder(a.title) : null),
      'jobs.list': async () => {
        const jobs = await s.jobs.listJobs();
        return Promise.all(jobs.map((j) => this.summary(j)));
      },
      'jobs.get': async (a) => this.summary(await this.job(a.id)),
      'jobs.create': async (a) => {
        await this.checkSources(a.sources);
        this.checkOverlap(a.sources, a.destination);
        const destination: Destination =
          a.destination.kind === 'local'
            ? { ...a.destination, path: path.resolve(a.destination.path) }
            : a.destination;
        const secret = destination.kind === 's3' ? a.secretAccessKey || undefined : undefined;
        const prepared = await this.prepareDestination(destination, a.password, secret, {
          maintenancePassword: a.maintenancePassword,
          retention: a.retention,
        });
        const spec: JobSpec = {
          name: a.name,
          sources: a.sources.map((p) => path.resolve(p)),
          excludes: a.excludes,
          excludePresets: a.excludePresets,
          destination: prepared,
          schedule: a.schedule,
          retention: a.retention,
          options: a.options,
        };
        const job = await s.jobs.createJob(spec, a.password, secret);
        this.emit('jobs.changed', { jobId: job.id });
        return this.summary(job);
      },
      'jobs.update': async (a) => {
        const job = await this.job(a.id);
        const c = a.changes;
        if (c.sources) await this.checkSources(c.sources);
        let dest: Destination = !c.destination
          ? job.destination
          : c.destination.kind === 'local'
            ? { ...c.destination, path: path.resolve(c.destination.path) }
            : c.destination;
        this.checkOverlap(c.sources ?? job.sources, dest);
        // a blank secret keeps the stored one, as long as the job stays on S3
        const newSecret = dest.kind === 's3' ? a.secretAccessKey || undefined : undefined;
        const secret =
          dest.kind === 's3'
            ? (newSecret ??
              (sameS3Credentials(job.destination, dest) ? await s.jobs.destinationSecret(job.id) : undefined))
            : undefined;
        const moved =
          placeKey(dest) !== placeKey(job.destination) ||
          destinationLocation(dest) !== destinationLocation(job.destination);
        const rekeyed =
          dest.kind === 's3' &&
          (newSecret !== undefined ||
            job.destination.kind !== 's3' ||
            dest.accessKeyId !== job.destination.accessKeyId ||
            !!dest.allowInsecureHttp !== !!job.destination.allowInsecureHttp);
        if (moved || rekeyed) {
          dest = await this.prepareDestination(dest, await this.password(job), secret as string | undefined, {
            retention: c.retention ?? job.retention,
          });
          this.dropRepo(job.id);
        } else dest = withProtection(dest, undefined, job.destination); // a repository's protection stays its own
        const { id: _id, createdAt: _c, ...current } = job;
        const spec: JobSpec = {
          ...current,
          ...(Object.fromEntries(Object.entries(c).filter(([, v]) => v !== undefined)) as Partial<JobSpec>),
        };
        spec.destination = dest;
        if (c.sources) spec.sources = c.sources.map((p) => path.resolve(p));
        const next = await s.jobs.updateJob(job.id, spec, newSecret);
        this.emit('jobs.changed', { jobId: job.id });
        return this.summary(next);
      },
      'jobs.remove': async (a) => {
        const job = await this.job(a.id);
        if (this.runs.isRunning(job.id))
          throw new ApiUsageError('ALREADY_RUNNING', 'stop the running backup first');
        this.dropRepo(job.id);
        await s.jobs.deleteJob(job.id);
        this.emit('jobs.changed', { jobId: null });
        return { removed: true as const };
      },
      'jobs.runNow': async (a) => this.runs.start(await this.job(a.id), a.full ?? false),
      'jobs.changePassword': async (a) => {
        const job = await this.job(a.id);
        if ((await this.password(job)) !== a.oldPassword)
          throw new ApiUsageError('WRONG_PASSWORD', 'the current password is not right');
        if (!s.engine.changePassword)
          throw new ApiUsageError('UNSUPPORTED', 'this engine cannot change passwords yet');
        const t = await this.target(job);
        await s.engine.changePassword(t.location, a.oldPassword, a.newPassword, t.options);
        await s.jobs.setJobPassword(job.id, a.newPassword);
        this.dropRepo(job.id);
        return { changed: true as const };
      },
      'jobs.previewRetention': async (a) => {
        const { repo, snaps, all } = await this.snapshotsOf(await this.job(a.id));
        const d = applyRetentionPolicy(snaps, a.retention);
        // as forget does: snapshots held by a mass-change alarm stay whatever the policy says
        const held = all.some((x) => x.massChange?.suspect)
          ? heldSnapshots(all, (await repo.listDismissals?.()) ?? [])
          : new Map<string, SnapshotEntry>();
        const keep = [
          ...d.keep,
          ...d.remove
            .filter((x) => held.has(x.id))
            .map((x) => ({ snapshot: x, reasons: [holdReason(held.get(x.id)!)] })),
        ];
        return {
          keep: keep.map((k) => ({ ...snapshotInfo(k.snapshot), reasons: k.reasons })),
          remove: d.remove.filter((x) => !held.has(x.id)).map(snapshotInfo),
        };
      },
      'jobs.check': async (a) => {
        const job = await this.job(a.id);
        if (!s.engine.check) throw new ApiUsageError('UNSUPPORTED', 'this engine cannot check repositories');
        const repo = await this.repoFor(job);
        const readData = a.readData ?? false;
        const report = await s.engine.check(repo, { readData });
        const summary = checkSummary(report, readData, (s.now ?? Date.now)());
        this.checks.set(job.id, summary);
        this.emit('jobs.changed', { jobId: job.id });
        return summary;
      },
      'jobs.maintenance': async (a) => {
        const job = await this.job(a.id);
        if (!s.engine.maintenance) return null;
        return s.engine.maintenance(await this.repoFor(job));
      },
      'jobs.testRestore': async (a) => this.protection.testRestore(a.id, a.allBlockFiles),
      'jobs.repair': async (a) => this.protection.repair(a.id, a.dryRun, a.maintenancePassword),
      'jobs.cleanUp': async (a) => this.protection.cleanUp(a.id, a.maintenancePassword),
      'restoreTests.list': async (a) => this.protection.list(a),
      'destinations.test': async (a) => {
        let secret = a.destination.kind === 's3' ? a.secretAccessKey || undefined : undefined;
        if (a.destination.kind === 's3' && !secret && a.jobId) {
          const job = await this.job(a.jobId);
          if (sameS3Credentials(job.destination, a.destination))
            secret = await s.jobs.destinationSecret(job.id);
        }
        if (a.destination.kind === 's3' && !secret)
          throw new ValidationError([
            { path: 'secretAccessKey', message: 'enter the secret access key to test the connection' },
          ]);
        if (a.destination.kind === 'local' && !path.isAbsolute(a.destination.path))
          throw new ValidationError([{ path: 'destination.path', message: 'use an absolute folder path' }]);
        const t = destinationTarget(a.destination, secret);
        return diagnoseLocation(t.location, t.options);
      },
      'runs.list': async (a) => s.runs.listRuns({ jobId: a.jobId, limit: a.limit ?? 100 }),
      'runs.get': async (a) => {
        const run = await s.runs.getRun(a.id);
        if (!run) throw new ApiUsageError('NOT_FOUND', `no run with id ${a.id}`);
        const live = this.runs.liveRuns().find((l) => l.run.id === a.id);
        return live ? { ...run, ...live.run, samples: live.samples } : run;
      },
      'runs.live': async () => this.runs.liveRuns(),
      'runs.pause': async (a) => this.runs.pause(a.id, true),
      'runs.resume': async (a) => this.runs.pause(a.id, false),
      'runs.cancel': async (a) => {
        this.runs.cancel(a.id);
        return { cancelled: true as const };
      },
      'snapshots.hosts': async (a) => {
        const { all } = await this.snapshotsOf(await this.job(a.jobId));
        const me = os.hostname();
        const hosts = new Map<string, { snapshots: number; latest: string }>();
        for (const x of all) {
          const h = hosts.get(x.host);
          if (!h) hosts.set(x.host, { snapshots: 1, latest: x.time });
          else {
            h.snapshots++;
            if (x.time > h.latest) h.latest = x.time;
          }
        }
        return [...hosts]
          .map(([host, h]) => ({ host, ...h, thisComputer: host === me }))
          .sort((x, y) =>
            x.thisComputer !== y.thisComputer ? (x.thisComputer ? -1 : 1) : x.host.localeCompare(y.host),
          );
      },
      'snapshots.list': async (a) => {
        const { snaps } = await this.snapshotsFor(await this.job(a.jobId), a.host);
        return snaps.map(snapshotInfo).sort((x, y) => y.time.localeCompare(x.time));
      },
      'snapshots.browse': async (a) => {
        const job = await this.job(a.jobId);
        // the catalog's file index covers the job's own snapshots only
        const fromIndex =
          a.host === undefined ? await s.fileIndex?.browse(job.id, a.snapshotId, a.path) : null;
        if (fromIndex) return fromIndex;
        const { repo, snaps } = await this.snapshotsFor(job, a.host);
        const snap = snaps.find((x) => x.id === a.snapshotId || x.id.startsWith(a.snapshotId));
        if (!snap) throw new ApiUsageError('NOT_FOUND', `snapshot ${a.snapshotId} not found`);
        return this.walker.browse(repo, snap, a.path);
      },
      'snapshots.search': async (a) => {
        const job = await this.job(a.jobId);
        const limit = a.limit ?? 500;
        const fromIndex = a.host === undefined ? await s.fileIndex?.search(job.id, a.query, limit) : null;
        if (fromIndex) return fromIndex;
        const { repo, snaps } = await this.snapshotsFor(job, a.host);
        return this.walker.search(repo, snaps, a.query, limit);
      },
      'snapshots.versions': async (a) => {
        const fromIndex = a.host === undefined ? await s.fileIndex?.versions(a.jobId, a.path) : null;
        if (fromIndex) return fromIndex;
        const { repo, snaps } = await this.snapshotsFor(await this.job(a.jobId), a.host);
        return this.walker.versions(repo, snaps, a.path);
      },
      'restore.start': async (a) => this.startRestore(await this.job(a.jobId), a),
      'speedtests.start': async (a) => {
        const t = await this.untriedTarget(a.destination, a.secretAccessKey, a.jobId, 'test its speed');
        const job = a.jobId ? await this.job(a.jobId) : undefined;
        const place = placeKey(a.destination);
        for (const j of await s.jobs.listJobs())
          if (placeKey(j.destination) === place && this.runs.isRunning(j.id))
            throw new ApiUsageError(
              'ALREADY_RUNNING',
              `"${j.name}" is backing up to this destination right now: test its speed when it is done`,
            );
        return this.speed.start({
          destination: a.destination,
          location: t.location,
          options: t.options,
          jobId: job?.id,
          sources: a.sources ?? job?.sources,
          settings: a.settings,
        });
      },
      'speedtests.get': async (a) => this.speed.get(a.id),
      'speedtests.cancel': async (a) => {
        this.speed.cancel(a.id);
        return { cancelled: true as const };
      },
      'speedtests.history': async (a) => {
        const dest = a.destination ?? (a.jobId ? (await this.job(a.jobId)).destination : undefined);
        return this.speed.history({ place: dest ? placeKey(dest) : undefined, limit: a.limit });
      },
      'restore.get': async (a) => {
        const r = this.restores.get(a.id);
        if (!r) throw new ApiUsageError('NOT_FOUND', `no restore with id ${a.id}`);
        return { ...r.status };
      },
      'restore.cancel': async (a) => {
        const r = this.restores.get(a.id);
        if (!r) throw new ApiUsageError('NOT_FOUND', `no restore with id ${a.id}`);
        r.abort.abort();
        return { cancelled: true as const };
      },
      'alarms.list': async (a) => {
        const jobs = a.jobId ? [await this.job(a.jobId)] : await s.jobs.listJobs();
        const out: AlarmInfo[] = [];
        for (const job of jobs) out.push(...(await this.alarmsOf(job, a.includeDismissed)));
        return out.sort((x, y) => (x.time < y.time ? 1 : x.time > y.time ? -1 : 0));
      },
      'alarms.dismiss': async (a) => {
        const job = await this.job(a.jobId);
        const { repo, snaps } = await this.snapshotsOf(job);
        const snap = snaps.find((x) => x.id === a.snapshotId);
        if (!snap?.massChange?.suspect)
          throw new ApiUsageError(
            'NOT_FOUND',
            `no mass-change alarm for snapshot ${a.snapshotId} of "${job.name}"`,
          );
        if (!repo.dismissAlarm) throw new ApiUsageError('UNSUPPORTED', 'this engine cannot dismiss alarms');
        await repo.dismissAlarm(snap, { note: a.note });
        await this.refreshStats(job.id);
        const info = (await this.alarmsOf(job, true)).find((x) => x.snapshotId === snap.id);
        if (!info) throw new ApiUsageError('NOT_FOUND', `snapshot ${a.snapshotId} is gone`);
        return info;
      },
    };
  }
}

function isDirSync(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}
