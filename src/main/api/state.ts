/**
 * Stores for jobs, runs, settings and secrets behind the API's small interfaces: an in-memory one
 * (tests) and a file-backed one (a JSON state file written atomically, secrets in a separate 0600
 * file) used until the SQLite catalog (engine/catalog) is wired in.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Job, RunDetail, RunSummary, Settings } from '../../shared/api.js';
import type { JobSpec, JobStore, RunStore, SettingsStore } from './services.js';
import { summaryOf } from './runner.js';
import { DEFAULT_COMPRESSION_LEVEL } from '../../shared/compression.js';

export const defaultSettings: Settings = {
  theme: 'system',
  notifications: true,
  startAtLogin: false,
  compressionLevel: DEFAULT_COMPRESSION_LEVEL,
  readLimitMBps: 0,
  workers: 2,
};

const MAX_RUNS = 1000;

export class MemoryState implements JobStore, RunStore, SettingsStore {
  protected jobs = new Map<string, Job>();
  protected runs = new Map<string, RunDetail>();
  protected secrets = new Map<string, string>();
  protected settings: Settings = { ...defaultSettings };

  listJobs(): Job[] {
    return [...this.jobs.values()].sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }
  getJob(id: string): Job | undefined {
    return this.jobs.get(id);
  }
  createJob(spec: JobSpec, password: string, secretAccessKey?: string): Job {
    const now = Date.now();
    const id = `job-${now.toString(36)}-${Math.random().toString(36).slice(2, 6)}`;
    const job: Job = {
      ...structuredClone(spec),
      id,
      createdAt: new Date(now).toISOString(),
      snapshotTag: id,
    };
    this.jobs.set(job.id, job);
    this.setJobPassword(job.id, password);
    if (secretAccessKey) this.setDestinationSecret(job.id, secretAccessKey);
    this.changed();
    return structuredClone(job);
  }
  updateJob(id: string, spec: JobSpec, secretAccessKey?: string): Job {
    const cur = this.jobs.get(id);
    if (!cur) throw new Error(`no job ${id}`);
    if (secretAccessKey) this.setDestinationSecret(id, secretAccessKey);
    else if (spec.destination.kind !== 's3') this.secrets.delete(`job:${id}:s3-secret`);
    const job: Job = { ...structuredClone(spec), id, createdAt: cur.createdAt, snapshotTag: cur.snapshotTag };
    this.jobs.set(id, job);
    this.changed();
    return structuredClone(job);
  }
  deleteJob(id: string): void {
    this.jobs.delete(id);
    this.secrets.delete(`job:${id}`);
    this.secrets.delete(`job:${id}:s3-secret`);
    this.secretsChanged();
    this.changed();
  }
  jobPassword(id: string): string | undefined {
    return this.secrets.get(`job:${id}`);
  }
  setJobPassword(id: string, password: string): void {
    this.secrets.set(`job:${id}`, password);
    this.secretsChanged();
  }
  destinationSecret(id: string): string | undefined {
    return this.secrets.get(`job:${id}:s3-secret`);
  }
  private setDestinationSecret(id: string, secret: string): void {
    this.secrets.set(`job:${id}:s3-secret`, secret);
    this.secretsChanged();
  }

  saveRun(run: RunDetail): void {
    this.runs.set(run.id, structuredClone(run));
    if (this.runs.size > MAX_RUNS) this.runs.delete(this.runs.keys().next().value as string);
    this.changed();
  }
  listRuns(filter: { jobId?: string; limit?: number }): RunSummary[] {
    return [...this.runs.values()]
      .filter((r) => !filter.jobId || r.jobId === filter.jobId)
      .sort((a, b) => b.startedAt.localeCompare(a.startedAt))
      .slice(0, filter.limit ?? 100)
      .map(summaryOf);
  }
  getRun(id: string): RunDetail | undefined {
    const r = this.runs.get(id);
    return r && structuredClone(r);
  }

  getSettings(): Settings {
    return { ...this.settings };
  }
  saveSettings(settings: Settings): void {
    this.settings = { ...settings };
    this.changed();
  }

  protected changed(): void {}
  protected secretsChanged(): void {}
}

function writeAtomic(file: string, data: string, mode = 0o644): void {
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, data, { mode });
  fs.renameSync(tmp, file);
}

/** MemoryState persisted under `dir`: state.json (jobs, runs, settings) and secrets.json (0600). */
export class FileState extends MemoryState {
  private stateFile: string;
  private secretsFile: string;
  private timer?: ReturnType<typeof setTimeout>;

  constructor(dir: string) {
    super();
    fs.mkdirSync(dir, { recursive: true });
    this.stateFile = path.join(dir, 'state.json');
    this.secretsFile = path.join(dir, 'secrets.json');
    try {
      const st = JSON.parse(fs.readFileSync(this.stateFile, 'utf8')) as {
        jobs: Job[];
        runs: RunDetail[];
        settings: Settings;
      };
      for (const j of st.jobs ?? []) this.jobs.set(j.id, j);
      for (const r of st.runs ?? []) {
        // a run that was live when the process stopped did not finish
        if (r.status === 'running' || r.status === 'queued' || r.status === 'paused') {
          r.status = 'failed';
          r.error = {
            name: 'Interrupted',
            code: 'INTERRUPTED',
            message: 'Tidemark stopped while this backup was running',
          };
          r.endedAt ??= r.startedAt;
        }
        this.runs.set(r.id, r);
      }
      this.settings = { ...defaultSettings, ...st.settings };
    } catch {}
    try {
      const sec = JSON.parse(fs.readFileSync(this.secretsFile, 'utf8')) as Record<string, string>;
      for (const [k, v] of Object.entries(sec)) this.secrets.set(k, v);
    } catch {}
  }

  protected override changed(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => this.flush(), 200);
  }

  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    writeAtomic(
      this.stateFile,
      JSON.stringify({
        jobs: [...this.jobs.values()],
        runs: [...this.runs.values()],
        settings: this.settings,
      }),
    );
  }

  protected override secretsChanged(): void {
    writeAtomic(this.secretsFile, JSON.stringify(Object.fromEntries(this.secrets)), 0o600);
    fs.chmodSync(this.secretsFile, 0o600);
  }
}
