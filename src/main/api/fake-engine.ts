/**
 * An in-memory stand-in for the engine, for API and UI tests that do not need the real repository
 * format: it really reads the source files (whole files as single "chunks", SHA-256 IDs), keeps trees
 * shaped like the real engine's (absolute paths from the root), honours the read limit, pause gate
 * and abort signal, and restores bytes to disk. It is not used by the app.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { createHash } from 'node:crypto';
import os from 'node:os';
import type {
  BackupOptions,
  BackupProgress,
  BackupResult,
  CheckReport,
  RestoreOptions,
  RestoreResult,
} from '../engine/operations.js';
import type { SnapshotEntry, Tree, TreeNode } from '../engine/repo/types.js';
import {
  AbortedError,
  NotFoundError,
  RepoExistsError,
  RepoNotFoundError,
  WrongPasswordError,
} from '../engine/errors.js';
import type { Engine, RepoHandle } from './services.js';
import { Excluder } from '../engine/scan/index.js';
import { newBackupProgress } from '../engine/operations.js';
import { s3OptionsFrom, type BackendOptions } from '../engine/backend/open.js';
import { isS3Location } from '../engine/backend/s3/location.js';
import { S3WrongKeysError } from '../engine/backend/s3/errors.js';

interface FakeRepo {
  password: string;
  /** For s3: locations, the key pair it was created with (a store refuses other keys). */
  keys?: string;
  snapshots: SnapshotEntry[];
  trees: Map<string, Tree>;
  blobs: Map<string, Buffer>;
}

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

class FakeHandle implements RepoHandle {
  constructor(readonly repo: FakeRepo) {}
  async listSnapshots(): Promise<SnapshotEntry[]> {
    return structuredClone(this.repo.snapshots);
  }
  async loadTree(id: string): Promise<Tree> {
    const t = this.repo.trees.get(id);
    if (!t) throw new NotFoundError(`tree ${id}`);
    return t;
  }
  async close(): Promise<void> {}
}

export class FakeEngine implements Engine {
  readonly supportsPause = true;
  private repos = new Map<string, FakeRepo>();
  /** Milliseconds to wait per file (makes runs long enough to watch in tests). */
  constructor(private perFileDelayMs = 0) {}

  /**
   * An S3 location is read as openBackend reads it (bucket, keys: a missing secret fails the same
   * way), and its repository answers only to the key pair it was created with.
   */
  private keysOf(location: string, options: BackendOptions): string | undefined {
    if (!isS3Location(location)) return undefined;
    const o = s3OptionsFrom(location, { env: {}, ...options });
    return `${o.accessKeyId}:${o.secretAccessKey}`;
  }
  private checkKeys(repo: FakeRepo, location: string, options: BackendOptions): void {
    const keys = this.keysOf(location, options);
    if (repo.keys !== undefined && keys !== repo.keys)
      throw new S3WrongKeysError(`the access keys are not accepted for ${location} (check the keys)`);
  }

  async exists(location: string, options: BackendOptions = {}): Promise<boolean> {
    const repo = this.repos.get(location);
    if (repo) this.checkKeys(repo, location, options);
    else this.keysOf(location, options);
    return !!repo;
  }
  async init(location: string, password: string, options: BackendOptions = {}): Promise<RepoHandle> {
    if (this.repos.has(location)) throw new RepoExistsError(location);
    const repo: FakeRepo = {
      password,
      keys: this.keysOf(location, options),
      snapshots: [],
      trees: new Map(),
      blobs: new Map(),
    };
    this.repos.set(location, repo);
    return new FakeHandle(repo);
  }
  async open(location: string, password: string, options: BackendOptions = {}): Promise<RepoHandle> {
    const repo = this.repos.get(location);
    if (!repo) throw new RepoNotFoundError(location);
    this.checkKeys(repo, location, options);
    if (repo.password !== password) throw new WrongPasswordError();
    return new FakeHandle(repo);
  }
  async changePassword(
    location: string,
    oldPassword: string,
    newPassword: string,
    options: BackendOptions = {},
  ): Promise<void> {
    const h = (await this.open(location, oldPassword, options)) as FakeHandle;
    h.repo.password = newPassword;
  }
  async repoBytes(location: string): Promise<number | null> {
    const repo = this.repos.get(location);
    if (!repo) return null;
    let n = 0;
    for (const b of repo.blobs.values()) n += b.length;
    return n;
  }

  async check(handle: RepoHandle): Promise<CheckReport> {
    const repo = (handle as FakeHandle).repo;
    return {
      ok: true,
      problems: [],
      unreferencedPacks: [],
      unusedBlobs: 0,
      snapshots: repo.snapshots.length,
      packs: 0,
      blobs: repo.blobs.size,
    };
  }

  async backup(handle: RepoHandle, opts: BackupOptions): Promise<BackupResult> {
    const repo = (handle as FakeHandle).repo;
    const start = Date.now();
    const p: BackupProgress = newBackupProgress('scanning');
    const report = () => opts.progress?.({ ...p, elapsedMs: Date.now() - start });
    const skipped: { path: string; reason: string; code?: string }[] = [];
    const excluder = new Excluder(opts.excludes); // the engine's own exclusion rules
    const excluded = (abs: string) => excluder.excludes(abs, path.basename(abs));
    // scan
    const files: string[] = [];
    const walk = async (abs: string): Promise<void> => {
      const st = await fs.lstat(abs);
      if (st.isDirectory()) {
        for (const name of (await fs.readdir(abs)).sort()) {
          const child = path.join(abs, name);
          if (!excluded(child)) await walk(child);
        }
      } else if (st.isFile()) {
        files.push(abs);
        p.filesScanned++;
        p.bytesScanned += st.size;
      }
    };
    for (const src of opts.paths) await walk(path.resolve(src));
    p.scanComplete = true;
    p.phase = 'backing-up';
    report();
    // read and build a nested map of absolute paths
    type DirMap = Map<string, DirMap | TreeNode>;
    const root: DirMap = new Map();
    const limit = opts.readLimitBytesPerSec ?? 0;
    for (const file of files) {
      if (opts.signal?.aborted) throw new AbortedError();
      await opts.pauseGate?.wait();
      if (this.perFileDelayMs) await sleep(this.perFileDelayMs);
      p.currentFile = file;
      let data: Buffer;
      try {
        data = await fs.readFile(file);
      } catch (err) {
        skipped.push({
          path: file,
          reason: (err as Error).message,
          code: (err as NodeJS.ErrnoException).code,
        });
        p.errors++;
        continue;
      }
      if (limit > 0) await sleep((data.length / limit) * 1000);
      const st = await fs.stat(file);
      const id = sha(data);
      p.filesRead++;
      p.bytesRead += data.length;
      if (!repo.blobs.has(id)) {
        repo.blobs.set(id, data);
        p.bytesNew += data.length;
        p.bytesStored += data.length;
      }
      p.filesDone++;
      p.bytesDone += data.length;
      const parts = file.split(path.sep).filter(Boolean);
      let dir = root;
      for (const part of parts.slice(0, -1)) {
        let next = dir.get(part);
        if (!next || !(next instanceof Map)) dir.set(part, (next = new Map()));
        dir = next as DirMap;
      }
      dir.set(parts[parts.length - 1], {
        name: parts[parts.length - 1],
        type: 'file',
        mode: st.mode,
        mtimeNs: (BigInt(Math.round(st.mtimeMs)) * 1_000_000n).toString(),
        size: data.length,
        content: [id],
      });
      report();
    }
    p.phase = 'finalizing';
    report();
    const saveTree = (dir: DirMap): string => {
      const nodes: TreeNode[] = [];
      for (const [name, v] of [...dir.entries()].sort(([a], [b]) => a.localeCompare(b))) {
        if (v instanceof Map)
          nodes.push({ name, type: 'dir', mode: 0o755, mtimeNs: '0', subtree: saveTree(v) });
        else nodes.push(v);
      }
      const tree = { nodes };
      const id = sha(JSON.stringify(tree));
      repo.trees.set(id, tree);
      return id;
    };
    const snap: SnapshotEntry = {
      id: sha(`${Date.now()}-${Math.random()}`),
      version: 1,
      time: new Date().toISOString(),
      host: opts.host ?? os.hostname(),
      paths: opts.paths,
      tags: opts.tags ?? [],
      job: opts.job,
      tree: saveTree(root),
      stats: {
        files: files.length,
        dirs: 0,
        totalBytes: p.bytesScanned,
        filesRead: p.filesRead,
        bytesRead: p.bytesRead,
        filesUnchanged: 0,
        newBlobs: 0,
        newBytes: p.bytesNew,
        storedBytes: p.bytesStored,
        durationMs: Date.now() - start,
      },
      skipped,
    };
    repo.snapshots.push(snap);
    p.phase = 'done';
    report();
    return {
      snapshotId: snap.id,
      snapshot: snap,
      skipped,
      status: skipped.length ? 'completed-with-warnings' : 'completed',
    };
  }

  async restore(handle: RepoHandle, opts: RestoreOptions): Promise<RestoreResult> {
    const repo = (handle as FakeHandle).repo;
    const snap = repo.snapshots.find((s) => s.id.startsWith(opts.snapshot));
    if (!snap) throw new NotFoundError(`snapshot ${opts.snapshot}`);
    const out: { rel: string; node: TreeNode }[] = [];
    const collect = (treeId: string, rel: string) => {
      for (const n of repo.trees.get(treeId)!.nodes) {
        const p = `${rel}/${n.name}`;
        if (n.type === 'dir' && n.subtree) collect(n.subtree, p);
        else out.push({ rel: p, node: n });
      }
    };
    collect(snap.tree, '');
    const inc = opts.include ?? [];
    const chosen = out.filter(
      ({ rel }) =>
        inc.length === 0 || inc.some((i) => rel === i || rel.startsWith(i.replace(/\/$/, '') + '/')),
    );
    const result: RestoreResult = { filesRestored: 0, bytesRestored: 0, skipped: 0, errors: [] };
    const bytesTotal = chosen.reduce((n, c) => n + (c.node.size ?? 0), 0);
    for (const { rel, node } of chosen) {
      if (opts.signal?.aborted) throw new AbortedError();
      let dest = path.join(opts.target, rel);
      const exists = await fs.stat(dest).then(
        () => true,
        () => false,
      );
      if (exists && opts.overwrite === 'skip') {
        result.skipped++;
        continue;
      }
      if (exists && opts.overwrite === 'keep-both') {
        const ext = path.extname(dest);
        dest = `${dest.slice(0, dest.length - ext.length)} (restored)${ext}`;
      }
      await fs.mkdir(path.dirname(dest), { recursive: true });
      const data = Buffer.concat((node.content ?? []).map((id) => repo.blobs.get(id)!));
      await fs.writeFile(dest, data);
      result.filesRestored++;
      result.bytesRestored += data.length;
      opts.progress?.({
        phase: 'restoring',
        filesTotal: chosen.length,
        bytesTotal,
        filesDone: result.filesRestored,
        bytesDone: result.bytesRestored,
        errors: 0,
        currentFile: dest,
        elapsedMs: 0,
      });
    }
    return result;
  }
}
