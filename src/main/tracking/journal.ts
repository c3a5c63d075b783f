/**
 * The persistent change journal: the set of directories a tracker saw change, each stamped with the
 * sequence number of the batch that last dirtied it, plus a cursor that says which tracker run the
 * numbers belong to: {bootId, generation (new random id each time a tracker starts), sequence}.
 *
 * A backup asks `changesSince(parent snapshot's cursor)`. The answer is a ChangeHint only when the
 * journal can prove the tracker ran the whole time since that cursor: same boot, same tracker
 * generation, same roots, no lost events or breakdown since, and the entries since then still held.
 * Otherwise it says why, and the backup falls back to a full scan (docs/architecture.md §3). After a successful
 * backup, `commit(cursor)` makes the cursor captured at the backup's start that consumer's baseline;
 * entries no consumer needs any more are dropped, changes that arrived during the backup stay.
 *
 * One process owns the journal (it runs the tracker and writes the file durably: temp + fsync +
 * rename, front-coded and deflated); others may open it read-only (`ChangeJournal.open`) and trust it
 * only while the owner process is alive. Not here: choosing a backend (select.ts), scanning (engine).
 *
 * Resumable trackers (the NTFS USN journal, whose records outlive the process and reboots) report a
 * position with their batches; started again from the saved position (`resumePoint`) they replay what
 * happened meanwhile, so the journal keeps its generation and the boot ID does not matter.
 */
import { randomBytes } from 'node:crypto';
import { promises as fsp, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import type { ChangeHint } from '../engine/operations.js';
import type { ChangeTracker, TrackerBatch } from './types.js';
import { isUnder } from './util.js';

export interface JournalCursor {
  journal: 'tidemark/1';
  bootId: string;
  generation: string;
  sequence: number;
  /** The tracked roots (sorted, absolute). */
  roots: string[];
  backend: string;
}

export type ChangesSince = { ok: true; hint: ChangeHint } | { ok: false; reason: string };

export type JournalStatus = 'running' | 'broken' | 'stopped' | 'unavailable' | 'empty';

interface JournalState {
  bootId: string;
  generation: string;
  backend: string;
  roots: string[];
  sequence: number;
  status: JournalStatus;
  reason?: string;
  writer: { pid: number; startTime: string | null };
  lostAt: number;
  lostReason?: string;
  /** Entries stamped at or below this were dropped (no consumer needs them). */
  droppedUpTo: number;
  startedAt: string;
  /** The tracker's journal outlives the process (USN): continuity survives restarts and reboots. */
  resumable?: boolean;
  /** Resumable trackers: where to resume from (the last position recorded). */
  position?: string;
  dirs: Map<string, number>;
  trees: Map<string, number>;
}

export interface JournalOptions {
  /** More dirty directories than this and the journal gives up (a full scan is cheaper). */
  maxEntries?: number;
  /** Batches are written at most this often (commit, stop and breakdown write at once). */
  persistDelayMs?: number;
  /** For tests: the machine's boot ID. */
  bootId?: () => string;
}

export const JOURNAL_FILE = 'change-journal.bin';
const CONSUMERS_DIR = 'change-journal-consumers';

/** The kernel's boot ID on Linux; elsewhere the boot time to the minute. */
export function currentBootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    const bootSec = Math.round((Date.now() / 1000 - os.uptime()) / 60) * 60;
    return `${os.hostname()}@${bootSec}`;
  }
}

/** The start time of a process (Linux: clock ticks since boot), to tell a live owner from a reused pid. */
function processStartTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

function processAlive(pid: number, startTime: string | null): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  return startTime === null || processStartTime(pid) === startTime;
}

export function isJournalCursor(c: unknown): c is JournalCursor {
  const o = c as Partial<JournalCursor> | undefined;
  return (
    !!o &&
    o.journal === 'tidemark/1' &&
    typeof o.bootId === 'string' &&
    typeof o.generation === 'string' &&
    typeof o.sequence === 'number' &&
    Number.isInteger(o.sequence) &&
    Array.isArray(o.roots) &&
    o.roots.every((r) => typeof r === 'string')
  );
}

// ---- encoding: JSON with front-coded sorted paths, deflated -------------------------------------

function encodePaths(m: Map<string, number>): (string | number)[] {
  const out: (string | number)[] = [];
  let prev = '';
  for (const p of [...m.keys()].sort()) {
    let i = 0;
    const max = Math.min(prev.length, p.length);
    while (i < max && prev.charCodeAt(i) === p.charCodeAt(i)) i++;
    out.push(i, p.slice(i), m.get(p)!);
    prev = p;
  }
  return out;
}

function decodePaths(a: unknown): Map<string, number> {
  const m = new Map<string, number>();
  if (!Array.isArray(a)) return m;
  let prev = '';
  for (let i = 0; i + 2 < a.length; i += 3) {
    const p = prev.slice(0, a[i] as number) + (a[i + 1] as string);
    m.set(p, a[i + 2] as number);
    prev = p;
  }
  return m;
}

export function encodeJournal(s: JournalState): Buffer {
  const json = JSON.stringify({
    v: 1,
    ...s,
    dirs: encodePaths(s.dirs),
    trees: encodePaths(s.trees),
  });
  return zlib.deflateRawSync(Buffer.from(json), { level: 6 });
}

export function decodeJournal(buf: Buffer): JournalState {
  const o = JSON.parse(zlib.inflateRawSync(buf).toString('utf8'));
  if (o.v !== 1) throw new Error(`unsupported change journal version ${o.v}`);
  return { ...o, dirs: decodePaths(o.dirs), trees: decodePaths(o.trees) } as JournalState;
}

async function writeDurably(file: string, data: Buffer | string): Promise<void> {
  await fsp.mkdir(path.dirname(file), { recursive: true });
  const tmp = `${file}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  const fh = await fsp.open(tmp, 'w', 0o600);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await fsp.rename(tmp, file);
  try {
    const dir = await fsp.open(path.dirname(file), 'r');
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  } catch {
    // directories cannot be opened for fsync on every platform
  }
}

// ---- the journal --------------------------------------------------------------------------------

export class ChangeJournal {
  readonly file: string;
  private s: JournalState;
  private readonly owner: boolean;
  private tracker?: ChangeTracker;
  private unsubscribe?: () => void;
  private persistTimer?: NodeJS.Timeout;
  private persisting: Promise<void> = Promise.resolve();
  private readonly consumers = new Map<string, number>();
  private consumersReadAt = 0;
  private readonly maxEntries: number;
  private readonly persistDelayMs: number;
  private readonly bootId: () => string;
  /** The last error writing the journal file (the in-memory journal stays usable). */
  lastWriteError?: string;

  /** An owner journal: attach() a started tracker to begin a new generation. */
  constructor(
    readonly dataDir: string,
    opts: JournalOptions = {},
    loaded?: JournalState,
  ) {
    this.file = path.join(dataDir, JOURNAL_FILE);
    this.maxEntries = opts.maxEntries ?? 250_000;
    this.persistDelayMs = opts.persistDelayMs ?? 250;
    this.bootId = opts.bootId ?? currentBootId;
    this.owner = !loaded;
    this.s = loaded ?? {
      bootId: this.bootId(),
      generation: '',
      backend: 'none',
      roots: [],
      sequence: 0,
      status: 'empty',
      reason: 'no change tracker has run',
      writer: { pid: process.pid, startTime: processStartTime(process.pid) },
      lostAt: 0,
      droppedUpTo: 0,
      startedAt: new Date().toISOString(),
      dirs: new Map(),
      trees: new Map(),
    };
  }

  /** Opens the journal another process (the app or `tidemark daemon`) writes, read-only. */
  static async open(dataDir: string, opts: JournalOptions = {}): Promise<ChangeJournal> {
    const file = path.join(dataDir, JOURNAL_FILE);
    let state: JournalState;
    try {
      state = decodeJournal(await fsp.readFile(file));
    } catch (err) {
      const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
      state = {
        bootId: '',
        generation: '',
        backend: 'none',
        roots: [],
        sequence: 0,
        status: 'empty',
        reason: missing
          ? 'no change tracker has run'
          : `the change journal is unreadable (${(err as Error).message})`,
        writer: { pid: 0, startTime: null },
        lostAt: 0,
        droppedUpTo: 0,
        startedAt: '',
        dirs: new Map(),
        trees: new Map(),
      };
    }
    return new ChangeJournal(dataDir, opts, state);
  }

  get status(): JournalStatus {
    return this.s.status;
  }
  get statusReason(): string | undefined {
    return this.s.reason;
  }
  get generation(): string {
    return this.s.generation;
  }
  get sequence(): number {
    return this.s.sequence;
  }
  get backend(): string {
    return this.s.backend;
  }
  /** Number of dirty directories and trees held. */
  get size(): number {
    return this.s.dirs.size + this.s.trees.size;
  }

  /**
   * Starts a new generation fed by `tracker` (already started on its roots). Everything recorded
   * before is dropped: a restarted tracker cannot vouch for the time it was not running.
   */
  async attach(tracker: ChangeTracker): Promise<void> {
    if (!this.owner) throw new Error('a journal opened read-only cannot attach a tracker');
    this.detach();
    this.tracker = tracker;
    const running = tracker.state === 'running';
    const roots = [...tracker.roots].map((r) => path.resolve(r)).sort();
    const resumed =
      running && tracker.resumable && tracker.resumedFrom
        ? await this.continuationOf(tracker, roots)
        : undefined;
    if (resumed) {
      // the tracker replays everything since the saved position: same generation, same entries
      this.s = {
        ...resumed,
        status: 'running',
        reason: undefined,
        writer: { pid: process.pid, startTime: processStartTime(process.pid) },
      };
      this.consumers.clear();
      this.unsubscribe = tracker.onEvents((b) => this.record(b));
      await this.persistNow();
      return;
    }
    this.s = {
      bootId: this.bootId(),
      generation: randomBytes(12).toString('hex'),
      backend: tracker.backend,
      roots: [...tracker.roots].map((r) => path.resolve(r)).sort(),
      sequence: 0,
      status: running ? 'running' : 'unavailable',
      reason: running ? undefined : (tracker.broken ?? `tracker ${tracker.backend} is ${tracker.state}`),
      writer: { pid: process.pid, startTime: processStartTime(process.pid) },
      lostAt: 0,
      droppedUpTo: 0,
      startedAt: new Date().toISOString(),
      resumable: !!tracker.resumable,
      position: undefined,
      dirs: new Map(),
      trees: new Map(),
    };
    this.consumers.clear();
    if (running) this.unsubscribe = tracker.onEvents((b) => this.record(b));
    await this.persistNow();
  }

  /** The saved state a resumable tracker started from `resumedFrom` continues, if it matches. */
  private async continuationOf(tracker: ChangeTracker, roots: string[]): Promise<JournalState | undefined> {
    let prev: JournalState;
    try {
      prev = decodeJournal(await fsp.readFile(this.file));
    } catch {
      return undefined;
    }
    const sameRoots = prev.roots.length === roots.length && prev.roots.every((r, i) => r === roots[i]);
    if (!prev.resumable || prev.status === 'broken' || !sameRoots || prev.backend !== tracker.backend)
      return undefined;
    return prev.position === tracker.resumedFrom ? prev : undefined;
  }

  /**
   * Where a resumable tracker on `roots` should start so that the journal in `dataDir` continues
   * (undefined: start fresh). Pass it to startChangeTracker({resume}).
   */
  static async resumePoint(dataDir: string, roots: string[]): Promise<string | undefined> {
    try {
      const prev = decodeJournal(await fsp.readFile(path.join(dataDir, JOURNAL_FILE)));
      const want = roots.map((r) => path.resolve(r)).sort();
      const sameRoots = prev.roots.length === want.length && prev.roots.every((r, i) => r === want[i]);
      return prev.resumable && prev.status !== 'broken' && sameRoots ? prev.position : undefined;
    } catch {
      return undefined;
    }
  }

  private detach(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.tracker = undefined;
  }

  /** Folds one tracker batch in (exposed for tests and for trackers fed by other means). */
  record(b: TrackerBatch): void {
    if (this.s.status !== 'running') return;
    if (b.position) this.s.position = b.position;
    if (!b.dirtyDirs.length && !b.dirtyTrees.length && !b.lost && !b.broken) {
      if (b.position) this.schedulePersist();
      return;
    }
    const seq = ++this.s.sequence;
    for (const d of b.dirtyDirs) this.s.dirs.set(d, seq);
    for (const t of b.dirtyTrees) this.s.trees.set(t, seq);
    if (b.lost) {
      this.s.lostAt = seq;
      this.s.lostReason = b.lost;
    }
    if (this.size > this.maxEntries) {
      this.s.dirs.clear();
      this.s.trees.clear();
      this.s.droppedUpTo = seq;
      this.s.lostAt = seq;
      this.s.lostReason = `more than ${this.maxEntries} folders changed; a full scan is cheaper`;
    }
    if (b.broken) {
      this.s.status = 'broken';
      this.s.reason = b.broken;
      void this.persistNow();
      return;
    }
    this.schedulePersist();
  }

  /** The cursor a backup starting now is consistent with; undefined when nothing is tracked. */
  cursor(): JournalCursor | undefined {
    if (!this.s.generation || this.s.status === 'unavailable' || this.s.status === 'empty') return undefined;
    return {
      journal: 'tidemark/1',
      bootId: this.s.bootId,
      generation: this.s.generation,
      sequence: this.s.sequence,
      roots: [...this.s.roots],
      backend: this.s.backend,
    };
  }

  /** Why the journal cannot vouch for anything right now, or undefined when it can. */
  private unusable(): string | undefined {
    const s = this.s;
    if (s.status === 'empty' || s.status === 'unavailable') return s.reason ?? 'no change tracker is running';
    if (s.status === 'stopped') return `the change tracker was stopped${s.reason ? ` (${s.reason})` : ''}`;
    if (s.status === 'broken') return `the change tracker broke down: ${s.reason ?? 'unknown reason'}`;
    if (!s.resumable && s.bootId !== this.bootId())
      return 'the machine restarted since the change tracker last ran';
    if (!this.owner && !processAlive(s.writer.pid, s.writer.startTime))
      return `the change tracker (process ${s.writer.pid}) is no longer running`;
    if (this.owner && this.tracker && this.tracker.state !== 'running')
      return `the change tracker is ${this.tracker.state}${this.tracker.broken ? `: ${this.tracker.broken}` : ''}`;
    return undefined;
  }

  /**
   * What changed since `previous` (the parent snapshot's journal cursor). `paths`, when given, are
   * the backup's sources: each must be inside a tracked root, and the hint is limited to them.
   */
  changesSince(previous: Record<string, unknown> | undefined | null, paths?: string[]): ChangesSince {
    if (previous === undefined || previous === null)
      return { ok: false, reason: 'the previous snapshot has no change-journal cursor' };
    if (!isJournalCursor(previous))
      return { ok: false, reason: 'the previous snapshot has no usable change-journal cursor' };
    const bad = this.unusable();
    if (bad) return { ok: false, reason: bad };
    const s = this.s;
    if (!s.resumable && previous.bootId !== s.bootId)
      return { ok: false, reason: 'the machine restarted since the previous snapshot' };
    if (previous.generation !== s.generation)
      return {
        ok: false,
        reason:
          'the change tracker restarted since the previous snapshot (it was not running the whole time)',
      };
    const prevRoots = [...previous.roots].sort();
    if (prevRoots.length !== s.roots.length || prevRoots.some((r, i) => r !== s.roots[i]))
      return { ok: false, reason: 'the tracked folders changed since the previous snapshot' };
    const sources = paths?.map((p) => path.resolve(p));
    const untracked = sources?.find((p) => !s.roots.some((r) => isUnder(p, r)));
    if (untracked) return { ok: false, reason: `${untracked} is not tracked by the change tracker` };
    if (previous.sequence > s.sequence)
      return { ok: false, reason: 'the previous snapshot’s cursor is ahead of the journal' };
    if (s.lostAt > previous.sequence) return { ok: false, reason: s.lostReason ?? 'change events were lost' };
    if (previous.sequence < s.droppedUpTo)
      return {
        ok: false,
        reason:
          'the journal no longer holds the changes since the previous snapshot (a newer backup was committed)',
      };
    // Directories above a source are not part of the snapshot (the scanner re-reads the sources'
    // own metadata every time); a dirty tree above a source covers the whole source.
    const inside = (p: string) => !sources || sources.some((src) => isUnder(p, src));
    const dirtyDirs = new Set<string>();
    const dirtyTrees = new Set<string>();
    for (const [p, seq] of s.dirs) if (seq > previous.sequence && inside(p)) dirtyDirs.add(p);
    for (const [p, seq] of s.trees) {
      if (seq <= previous.sequence || !(inside(p) || sources!.some((src) => isUnder(src, p)))) continue;
      // a dirty tree above a source covers the whole source
      const covered = sources?.filter((src) => isUnder(src, p) && src !== p);
      if (covered?.length) for (const src of covered) dirtyTrees.add(src);
      else dirtyTrees.add(p);
    }
    return { ok: true, hint: { dirtyDirs, dirtyTrees, cursor: { ...this.cursor()! } } };
  }

  /** Waits until the tracker delivered every change made before the call, then writes the file. */
  async sync(): Promise<void> {
    await this.tracker?.flush();
    if (this.owner) await this.persistNow();
  }

  /**
   * Everything a backup needs, in one call: waits for pending events, then returns a ChangeHint (or
   * the reason for a full scan) and the cursor to record and to commit after the backup succeeds.
   */
  async planBackup(
    previous: Record<string, unknown> | undefined | null,
    paths?: string[],
  ): Promise<{ changeHint?: ChangeHint; fullScanReason?: string; cursor?: JournalCursor }> {
    await this.sync();
    const r = this.changesSince(previous, paths);
    if (r.ok) return { changeHint: r.hint, cursor: r.hint.cursor as unknown as JournalCursor };
    return { fullScanReason: r.reason, cursor: this.cursor() };
  }

  /**
   * After a successful backup: `cursor` (captured when the backup started) becomes `consumer`'s
   * baseline. Entries newer than it stay dirty; entries no consumer needs are dropped.
   */
  async commit(cursor: Record<string, unknown> | undefined, consumer = 'default'): Promise<void> {
    if (!isJournalCursor(cursor) || cursor.generation !== this.s.generation || !this.s.generation) return;
    const name = consumer.replace(/[^A-Za-z0-9._-]/g, '_');
    await writeDurably(
      path.join(this.dataDir, CONSUMERS_DIR, `${name}.json`),
      JSON.stringify({ generation: cursor.generation, sequence: cursor.sequence }),
    );
    this.consumers.set(name, cursor.sequence);
    if (this.owner) {
      await this.readConsumers(true);
      this.prune();
      await this.persistNow();
    }
  }

  private async readConsumers(force: boolean): Promise<void> {
    if (!force && Date.now() - this.consumersReadAt < 10_000) return;
    this.consumersReadAt = Date.now();
    const dir = path.join(this.dataDir, CONSUMERS_DIR);
    let names: string[];
    try {
      names = await fsp.readdir(dir);
    } catch {
      return;
    }
    for (const n of names) {
      if (!n.endsWith('.json')) continue;
      try {
        const c = JSON.parse(await fsp.readFile(path.join(dir, n), 'utf8'));
        if (c.generation === this.s.generation && typeof c.sequence === 'number')
          this.consumers.set(n.slice(0, -5), c.sequence);
      } catch {
        // a half-written or foreign file: ignore
      }
    }
  }

  private prune(): void {
    if (!this.consumers.size) return;
    const floor = Math.min(...this.consumers.values());
    if (floor <= this.s.droppedUpTo) return;
    for (const [p, seq] of this.s.dirs) if (seq <= floor) this.s.dirs.delete(p);
    for (const [p, seq] of this.s.trees) if (seq <= floor) this.s.trees.delete(p);
    this.s.droppedUpTo = floor;
  }

  private schedulePersist(): void {
    if (!this.owner || this.persistTimer) return;
    this.persistTimer = setTimeout(() => {
      this.persistTimer = undefined;
      void this.persistNow();
    }, this.persistDelayMs);
    this.persistTimer.unref?.();
  }

  /** Writes the journal file now (serialised with any write in progress). */
  async persistNow(): Promise<void> {
    if (!this.owner) return;
    if (this.persistTimer) {
      clearTimeout(this.persistTimer);
      this.persistTimer = undefined;
    }
    const run = async () => {
      try {
        await this.readConsumers(false);
        this.prune();
        await writeDurably(this.file, encodeJournal(this.s));
        this.lastWriteError = undefined;
      } catch (err) {
        this.lastWriteError = (err as Error).message;
      }
    };
    this.persisting = this.persisting.then(run, run);
    await this.persisting;
  }

  /** Stops listening and records that the tracker stopped (readers then fall back to full scans). */
  async close(reason = 'the tracker was stopped'): Promise<void> {
    if (!this.owner) return;
    this.detach();
    if (this.s.status === 'running') {
      this.s.status = 'stopped';
      this.s.reason = reason;
    }
    await this.persistNow();
  }
}
