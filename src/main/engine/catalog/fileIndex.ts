/**
 * The snapshot file index: browse a snapshot's folders, search names across snapshots, and list the
 * versions of one path, without touching the repository.
 *
 * Layout (see the schema in db.ts): names and directory paths are interned (`names`, `dirs`); a
 * *directory version* is one directory path with one tree ID. Because a snapshot is a Merkle tree, an
 * unchanged directory keeps its tree ID, so its listing (`entries`) is stored once no matter how many
 * snapshots contain it; each snapshot only adds one small `snapshot_dirs` row per directory. Indexing
 * an incremental snapshot therefore costs a lookup per directory plus the rows of what changed.
 * Name search runs over distinct names (FTS5 trigram: substrings and globs, case-insensitive for
 * ASCII), not over rows; the matching names then lead to their folders and snapshots.
 *
 * Writes are batched into transactions of multi-row prepared inserts; IDs of new rows are allocated
 * here, so one FileIndex must be the only writer of a catalog's file index at a time (`exclusive`).
 * A first index or a rebuild loads without the entries-by-name index and builds it once at the end.
 */
import type { DB } from './db.js';
import type { NodeType, Tree, TreeNode } from '../repo/types.js';
import { AbortedError } from '../errors.js';

/** What the indexer needs from a repository: trees by ID. */
export interface TreeSource {
  loadTree(id: string): Promise<Tree>;
}

export const NODE_TYPES: NodeType[] = ['file', 'dir', 'symlink', 'fifo', 'socket', 'chardev', 'blockdev'];
const TYPE_CODE = new Map(NODE_TYPES.map((t, i) => [t, i]));

export interface IndexStats {
  /** Directories walked (a reused directory counts once: its subtree is not walked). */
  dirsVisited: number;
  /** Directory versions written now, and those found already indexed (shared with other snapshots). */
  newDirVersions: number;
  reusedDirVersions: number;
  /** Entry rows written now. */
  newEntries: number;
}

export interface ListedEntry {
  name: string;
  path: string;
  type: NodeType;
  size: number | null;
  /** Modification time, ms since the epoch. */
  mtime: number | null;
}

export interface SearchHit {
  path: string;
  name: string;
  type: NodeType;
  /** Snapshots (catalog row IDs) containing this path, newest first. */
  snapshots: number[];
  /** The entry as it is in the newest of those snapshots. */
  size: number | null;
  mtime: number | null;
}

export interface SearchOptions {
  /** Only snapshots of this repository. */
  repositoryId?: number;
  /** Only these snapshots (catalog row IDs). */
  snapshots?: number[];
  /** Maximum number of distinct paths (default 500). */
  limit?: number;
}

export interface VersionEntry {
  snapshot: number;
  snapId: string;
  time: number;
  type: NodeType;
  size: number | null;
  mtime: number | null;
  /** Content fingerprint: equal fingerprints mean the same content. */
  fingerprint: number | null;
  /** True when this version differs from the previous (older) one listed. */
  changed: boolean;
}

/** Splits "/a/b/c" into ["a","b","c"]; "/" and "" give []. */
export function splitPath(p: string): string[] {
  return p.split('/').filter((c) => c.length > 0 && c !== '.');
}

/** A 53-bit fingerprint of a file's chunk list (not cryptographic: it only tells versions apart). The same
 *  list gives the same fingerprint whether it is stored as hex IDs or as a binary block list. */
export function contentFingerprint(node: Pick<TreeNode, 'content' | 'blockIds'>): number | null {
  const { content, blockIds } = node;
  if (!content && !blockIds) return null;
  let a = 0x811c9dc5 | 0;
  let b = 0x01000193 | 0;
  const mix = (hi: number, lo: number) => {
    a = Math.imul(a ^ hi, 0x01000193) ^ (a >>> 15);
    b = Math.imul(b ^ lo, 0x5bd1e995) ^ (b >>> 13);
  };
  if (blockIds)
    for (let i = 0; i < blockIds.length; i += 32) mix(blockIds.readInt32BE(i), blockIds.readInt32BE(i + 4));
  else for (const id of content!) mix(parseInt(id.slice(0, 8), 16) | 0, parseInt(id.slice(8, 16), 16) | 0);
  return (a >>> 0) * 2 ** 21 + ((b >>> 0) >>> 11);
}

function mtimeMs(ns: string | undefined): number | null {
  if (!ns) return null;
  const v = Math.floor(Number(ns) / 1e6);
  return Number.isFinite(v) ? v : null;
}

function hexToBuf(id: string): Buffer {
  return Buffer.from(id, 'hex');
}

/** Escapes a user string for LIKE with ESCAPE '\'. */
function likeEscape(s: string): string {
  return s.replace(/[\\%_]/g, (c) => '\\' + c);
}

const FLUSH_ROWS = 20_000;
const ENTRIES_BY_NAME = 'CREATE INDEX IF NOT EXISTS entries_by_name ON entries(name_id)';
const ROWS_PER_INSERT = 64;

export class FileIndex {
  private readonly nameIds = new Map<string, number>();
  private readonly dirIds = new Map<string, number>(); // `${parent}/${nameId}` → id
  private readonly dirPaths = new Map<number, string>();
  private busy = false;

  private readonly st;

  constructor(private readonly db: DB) {
    // A bulk load interrupted by a crash may have left the name index dropped (see bulkLoad).
    if (!db.readonly) db.exec(ENTRIES_BY_NAME);
    this.st = {
      nameGet: db.prepare('SELECT id FROM names WHERE name = ?').pluck(),
      nameIns: db.prepare('INSERT INTO names(id, name) VALUES (?, ?)'),
      ftsBulk: db.prepare(
        'INSERT INTO names_fts(rowid, name) SELECT id, name FROM names WHERE id >= ? ORDER BY id',
      ),
      allNames: db.prepare('SELECT name, id FROM names').raw(),
      nameCount: db.prepare('SELECT count(*) FROM names').pluck(),
      nameText: db.prepare('SELECT name FROM names WHERE id = ?').pluck(),
      dirGet: db.prepare('SELECT id FROM dirs WHERE parent = ? AND name_id = ?').pluck(),
      dirIns: db.prepare('INSERT INTO dirs(id, parent, name_id) VALUES (?, ?, ?)'),
      dirRow: db.prepare('SELECT parent, name_id FROM dirs WHERE id = ?'),
      dvGet: db.prepare('SELECT id FROM dir_versions WHERE dir_id = ? AND tree = ?').pluck(),
      dvIns: db.prepare('INSERT INTO dir_versions(id, dir_id, tree) VALUES (?, ?, ?)'),
      entIns: db.prepare(
        'INSERT INTO entries(dv, name_id, type, size, mtime, fp, child) VALUES (?, ?, ?, ?, ?, ?, ?)',
      ),
      // Many rows per statement: a call into SQLite costs more than the row itself.
      entInsMany: db.prepare(
        'INSERT INTO entries(dv, name_id, type, size, mtime, fp, child) VALUES ' +
          Array.from({ length: ROWS_PER_INSERT }, () => '(?, ?, ?, ?, ?, ?, ?)').join(', '),
      ),
      nameInsMany: db.prepare(
        'INSERT INTO names(id, name) VALUES ' +
          Array.from({ length: ROWS_PER_INSERT }, () => '(?, ?)').join(', '),
      ),
      sdIns: db.prepare('INSERT OR REPLACE INTO snapshot_dirs(snapshot, dir_id, dv) VALUES (?, ?, ?)'),
      sdReuse: db.prepare(`
        WITH RECURSIVE sub(dv) AS (
          SELECT @dv
          UNION ALL
          SELECT e.child FROM entries e JOIN sub ON e.dv = sub.dv WHERE e.child IS NOT NULL
        )
        INSERT OR REPLACE INTO snapshot_dirs(snapshot, dir_id, dv)
        SELECT @snapshot, d.dir_id, d.id FROM sub JOIN dir_versions d ON d.id = sub.dv`),
      sdCount: db.prepare('SELECT count(*) FROM snapshot_dirs WHERE snapshot = ?').pluck(),
      sdDelete: db.prepare('DELETE FROM snapshot_dirs WHERE snapshot = ?'),
      maxName: db.prepare('SELECT coalesce(max(id), 0) FROM names').pluck(),
      maxDir: db.prepare('SELECT coalesce(max(id), 1) FROM dirs').pluck(),
      maxDv: db.prepare('SELECT coalesce(max(id), 0) FROM dir_versions').pluck(),
      dvOf: db.prepare('SELECT dv FROM snapshot_dirs WHERE snapshot = ? AND dir_id = ?').pluck(),
      list: db.prepare(`
        SELECT n.name AS name, e.type AS type, e.size AS size, e.mtime AS mtime
        FROM entries e JOIN names n ON n.id = e.name_id
        WHERE e.dv = ? ORDER BY n.name`),
      snapTimes: db.prepare('SELECT id, time, repository_id FROM snapshots'),
      dirsOfName: db
        .prepare(
          'SELECT DISTINCT d.dir_id FROM entries e JOIN dir_versions d ON d.id = e.dv WHERE e.name_id = ?',
        )
        .pluck(),
      occurrences: db
        .prepare(
          `SELECT e.type, e.size, e.mtime, group_concat(sd.snapshot)
           FROM dir_versions d
           JOIN entries e ON e.dv = d.id AND e.name_id = ?
           JOIN snapshot_dirs sd ON sd.dv = d.id AND sd.dir_id = d.dir_id
           WHERE d.dir_id = ?
           GROUP BY d.id`,
        )
        .raw(),
    };
  }

  // ---- interning -------------------------------------------------------------------------------

  private nextName = 0;
  private nextDir = 0;
  private nextDv = 0;
  private pendingNames: [number, string][] = [];
  /** Reused bind arrays for the multi-row inserts. */
  private readonly nameArgs: (number | string)[] = new Array(ROWS_PER_INSERT * 2);
  private readonly entryArgs: (number | null)[] = new Array(ROWS_PER_INSERT * 7);
  private pendingDirs: [number, number, number][] = [];
  private pendingDvs: [number, number, Buffer][] = [];
  /** Entry rows, 7 values each, flat (fewer allocations than an array per row). */
  private pendingEntries: (number | null)[] = [];
  private pendingSd: [number, number, number][] = [];
  private pendingReuse: [number, number][] = [];

  /** True while nameIds holds every name in the database (then a miss means "new"). */
  private namesComplete = false;

  /** Loads all names into memory for a big indexing run (saves a query per new name). */
  private preloadNames(): void {
    if (this.namesComplete) return;
    if ((this.st.nameCount.get() as number) > 1_500_000) return;
    this.nameIds.clear();
    for (const [name, id] of this.st.allNames.iterate() as Iterable<[string, number]>)
      this.nameIds.set(name, id);
    this.namesComplete = true;
  }

  /** Frees the in-memory name table (call after a batch of indexing). */
  releaseMemory(): void {
    this.namesComplete = false;
    this.nameIds.clear();
    this.dirIds.clear();
    this.dirPaths.clear();
  }

  /** Names and directories in the lookup caches now. */
  cacheSizes(): { names: number; dirs: number } {
    return { names: this.nameIds.size, dirs: this.dirIds.size + this.dirPaths.size };
  }

  /** Most names and directories kept in the lookup caches (tests lower them). */
  cacheLimits = { names: 3_000_000, dirs: 1_000_000 };

  private internName(name: string, create: boolean): number | undefined {
    // Trim the cache only when every cached ID is in the database (none pending), or a pending name
    // would be allocated twice.
    if (this.nameIds.size > this.cacheLimits.names && this.pendingNames.length === 0) {
      this.namesComplete = false;
      this.nameIds.clear();
    }
    let id = this.nameIds.get(name);
    if (id !== undefined) return id;
    if (this.namesComplete) {
      if (!create) return undefined;
      id = ++this.nextName;
      this.pendingNames.push([id, name]);
      this.nameIds.set(name, id);
      return id;
    }
    id = this.st.nameGet.get(name) as number | undefined;
    if (id === undefined) {
      if (!create) return undefined;
      id = ++this.nextName;
      this.pendingNames.push([id, name]);
    }
    this.nameIds.set(name, id);
    return id;
  }

  private internDir(parent: number, nameId: number, create: boolean): number | undefined {
    if (this.dirIds.size > this.cacheLimits.dirs && this.pendingDirs.length === 0) this.dirIds.clear();
    const key = `${parent}/${nameId}`;
    let id = this.dirIds.get(key);
    if (id !== undefined) return id;
    id = this.st.dirGet.get(parent, nameId) as number | undefined;
    if (id === undefined) {
      if (!create) return undefined;
      id = ++this.nextDir;
      this.pendingDirs.push([id, parent, nameId]);
    }
    this.dirIds.set(key, id);
    return id;
  }

  private pendingRows(): number {
    return this.pendingEntries.length / 7 + this.pendingNames.length + this.pendingSd.length;
  }

  private flush(): void {
    const st = this.st;
    this.db.transaction(() => {
      const names = this.pendingNames;
      if (names.length) {
        let i = 0;
        for (; i + ROWS_PER_INSERT <= names.length; i += ROWS_PER_INSERT) {
          const args = this.nameArgs;
          for (let k = 0; k < ROWS_PER_INSERT; k++) {
            args[2 * k] = names[i + k][0];
            args[2 * k + 1] = names[i + k][1];
          }
          st.nameInsMany.run(args);
        }
        for (; i < names.length; i++) st.nameIns.run(names[i][0], names[i][1]);
        st.ftsBulk.run(names[0][0]);
      }
      for (const r of this.pendingDirs) st.dirIns.run(r[0], r[1], r[2]);
      for (const r of this.pendingDvs) st.dvIns.run(r[0], r[1], r[2]);
      const e = this.pendingEntries;
      const many = ROWS_PER_INSERT * 7;
      let i = 0;
      const args = this.entryArgs;
      for (; i + many <= e.length; i += many) {
        for (let k = 0; k < many; k++) args[k] = e[i + k];
        st.entInsMany.run(args);
      }
      for (; i < e.length; i += 7)
        st.entIns.run(e[i], e[i + 1], e[i + 2], e[i + 3], e[i + 4], e[i + 5], e[i + 6]);
      for (const r of this.pendingSd) st.sdIns.run(r[0], r[1], r[2]);
      for (const r of this.pendingReuse) st.sdReuse.run({ snapshot: r[0], dv: r[1] });
    })();
    this.pendingNames = [];
    this.pendingDirs = [];
    this.pendingDvs = [];
    this.pendingEntries = [];
    this.pendingSd = [];
    this.pendingReuse = [];
  }

  /**
   * Runs `fn` (which indexes snapshots) with the entries-by-name index dropped when the index is empty,
   * and builds that index once at the end: a first index or a rebuild then costs a quarter less.
   */
  async bulkLoad<T>(fn: () => Promise<T>): Promise<T> {
    const empty = this.db.prepare('SELECT NOT EXISTS (SELECT 1 FROM entries)').pluck().get() === 1;
    if (!empty) return fn();
    this.db.exec('DROP INDEX IF EXISTS entries_by_name');
    try {
      return await fn();
    } finally {
      this.db.exec(ENTRIES_BY_NAME);
    }
  }

  private lock: Promise<unknown> = Promise.resolve();

  /** Runs `fn` after every earlier exclusive section has finished (one writer of the index at a time). */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.lock.then(fn, fn);
    this.lock = run.catch(() => {});
    return run;
  }

  // ---- indexing --------------------------------------------------------------------------------

  /**
   * Indexes the tree rooted at `rootTree` as the contents of catalog snapshot `snapshot` (a row of
   * `snapshots`). Re-indexing a snapshot replaces its previous rows. Not atomic across the whole
   * snapshot (that would hold one huge transaction), but every directory version written is complete,
   * and the caller marks the snapshot indexed only after this resolves.
   */
  async indexSnapshot(
    snapshot: number,
    rootTree: string,
    source: TreeSource,
    opts: { signal?: AbortSignal; preloadNames?: boolean } = {},
  ): Promise<IndexStats> {
    if (this.busy) throw new Error('the file index is already being written');
    this.busy = true;
    const stats: IndexStats = { dirsVisited: 0, newDirVersions: 0, reusedDirVersions: 0, newEntries: 0 };
    // Checkpoint the WAL rarely while bulk-writing (each checkpoint syncs the disk), once at the end.
    const wal = this.db.pragma('journal_mode', { simple: true }) === 'wal';
    const autocheckpoint = wal ? (this.db.pragma('wal_autocheckpoint', { simple: true }) as number) : 0;
    if (wal) this.db.pragma('wal_autocheckpoint = 16384');
    try {
      this.st.sdDelete.run(snapshot);
      this.nextName = this.st.maxName.get() as number;
      this.nextDir = this.st.maxDir.get() as number;
      this.nextDv = this.st.maxDv.get() as number;
      if (opts.preloadNames) this.preloadNames();
      await this.indexDir(snapshot, 1, rootTree, source, stats, opts.signal);
      this.flush();
      return stats;
    } catch (err) {
      this.pendingNames = [];
      this.pendingDirs = [];
      this.pendingDvs = [];
      this.pendingEntries = [];
      this.pendingSd = [];
      this.pendingReuse = [];
      this.releaseMemory();
      throw err;
    } finally {
      this.busy = false;
      if (wal) {
        this.db.pragma(`wal_autocheckpoint = ${autocheckpoint}`);
        try {
          this.db.pragma('wal_checkpoint(PASSIVE)');
        } catch {}
      }
    }
  }

  /** Post-order: children are written before their parent, so a written directory version is complete. */
  private async indexDir(
    snapshot: number,
    dirId: number,
    treeId: string,
    source: TreeSource,
    stats: IndexStats,
    signal?: AbortSignal,
  ): Promise<number> {
    if (signal?.aborted) throw new AbortedError('indexing cancelled');
    const treeBuf = hexToBuf(treeId);
    stats.dirsVisited++;
    const existing = this.st.dvGet.get(dirId, treeBuf) as number | undefined;
    if (existing !== undefined) {
      stats.reusedDirVersions++;
      this.pendingReuse.push([snapshot, existing]);
      return existing;
    }
    const tree = await source.loadTree(treeId);
    const dv = ++this.nextDv;
    // Children first (post-order), so that a written directory version always has complete children.
    let children: number[] | undefined;
    for (let i = 0; i < tree.nodes.length; i++) {
      const node = tree.nodes[i];
      if (node.type === 'dir' && node.subtree) {
        const childDir = this.internDir(dirId, this.internName(node.name, true)!, true)!;
        (children ??= new Array(tree.nodes.length))[i] = await this.indexDir(
          snapshot,
          childDir,
          node.subtree,
          source,
          stats,
          signal,
        );
      }
    }
    const out = this.pendingEntries;
    for (let i = 0; i < tree.nodes.length; i++) {
      const node = tree.nodes[i];
      out.push(
        dv,
        this.internName(node.name, true)!,
        TYPE_CODE.get(node.type) ?? 0,
        node.size ?? null,
        mtimeMs(node.mtimeNs),
        node.type === 'file' ? contentFingerprint(node) : null,
        children?.[i] ?? null,
      );
    }
    stats.newEntries += tree.nodes.length;
    stats.newDirVersions++;
    this.pendingDvs.push([dv, dirId, treeBuf]);
    this.pendingSd.push([snapshot, dirId, dv]);
    if (this.pendingRows() >= FLUSH_ROWS) this.flush();
    return dv;
  }

  /** Removes a snapshot from the index (its shared directory versions stay until gc()). */
  removeSnapshot(snapshot: number): void {
    this.st.sdDelete.run(snapshot);
  }

  /** Deletes directory versions, entries, directories and names no snapshot refers to any more. */
  gc(): { dirVersions: number; names: number } {
    // Never while a snapshot is being indexed: it may be about to reuse a directory version that no
    // snapshot refers to yet. The next gc collects what this one skips.
    if (this.busy) return { dirVersions: 0, names: 0 };
    let dirVersions = 0;
    let names = 0;
    this.db.transaction(() => {
      this.db.exec(`CREATE TEMP TABLE IF NOT EXISTS gc_dv(id INTEGER PRIMARY KEY); DELETE FROM gc_dv;
        INSERT INTO gc_dv SELECT id FROM dir_versions WHERE id NOT IN (SELECT dv FROM snapshot_dirs);`);
      this.db.exec('DELETE FROM entries WHERE dv IN (SELECT id FROM gc_dv)');
      dirVersions = this.db
        .prepare('DELETE FROM dir_versions WHERE id IN (SELECT id FROM gc_dv)')
        .run().changes;
      this.db.exec(`DELETE FROM dirs WHERE id > 1 AND id NOT IN (SELECT dir_id FROM dir_versions)
        AND id NOT IN (SELECT parent FROM dirs)`);
      const dead = this.db
        .prepare(
          `SELECT id, name FROM names WHERE id > 0 AND id NOT IN (SELECT name_id FROM entries)
           AND id NOT IN (SELECT name_id FROM dirs)`,
        )
        .all() as { id: number; name: string }[];
      const delFts = this.db.prepare(`INSERT INTO names_fts(names_fts, rowid, name) VALUES ('delete', ?, ?)`);
      const delName = this.db.prepare('DELETE FROM names WHERE id = ?');
      for (const d of dead) {
        delFts.run(d.id, d.name);
        delName.run(d.id);
      }
      names = dead.length;
      this.db.exec('DROP TABLE gc_dv');
    })();
    this.releaseMemory();
    return { dirVersions, names };
  }

  // ---- queries ---------------------------------------------------------------------------------

  /** The interned directory ID of a path, or undefined when no snapshot ever had it. */
  dirIdOf(p: string): number | undefined {
    let id = 1;
    for (const c of splitPath(p)) {
      const nameId = this.internName(c, false);
      if (nameId === undefined) return undefined;
      const next = this.internDir(id, nameId, false);
      if (next === undefined) return undefined;
      id = next;
    }
    return id;
  }

  /** The path of an interned directory ("/" for the root). */
  dirPath(dirId: number): string {
    if (dirId === 1) return '/';
    const cached = this.dirPaths.get(dirId);
    if (cached !== undefined) return cached;
    const row = this.st.dirRow.get(dirId) as { parent: number; name_id: number } | undefined;
    if (!row) throw new Error(`unknown directory ${dirId}`);
    const parent = this.dirPath(row.parent);
    const p = (parent === '/' ? '' : parent) + '/' + (this.st.nameText.get(row.name_id) as string);
    if (this.dirPaths.size > 200_000) this.dirPaths.clear();
    this.dirPaths.set(dirId, p);
    return p;
  }

  /** Lists the directory `p` of a snapshot, sorted by name; undefined when it is not a directory there. */
  list(snapshot: number, p: string): ListedEntry[] | undefined {
    const dirId = this.dirIdOf(p);
    if (dirId === undefined) return undefined;
    const dv = this.st.dvOf.get(snapshot, dirId) as number | undefined;
    if (dv === undefined) return undefined;
    const base = this.dirPath(dirId);
    const prefix = base === '/' ? '/' : base + '/';
    const rows = this.st.list.all(dv) as {
      name: string;
      type: number;
      size: number | null;
      mtime: number | null;
    }[];
    return rows.map((r) => ({
      name: r.name,
      path: prefix + r.name,
      type: NODE_TYPES[r.type],
      size: r.size,
      mtime: r.mtime,
    }));
  }

  /**
   * Case-insensitive search over entry names across snapshots: a substring ("report"), or a glob over
   * the whole name when the query has * or ? ("*.pdf", "IMG_????.JPG"). Returns distinct paths with
   * the snapshots that contain them. Queries with 3+ literal characters in a row use the trigram index.
   */
  search(query: string, opts: SearchOptions = {}): SearchHit[] {
    const q = query.trim();
    if (!q) return [];
    const limit = opts.limit ?? 500;
    // Plain text matches anywhere in the name; with * or ? it is a glob over the whole name ("*.pdf").
    const glob = /[*?]/.test(q);
    const pattern = glob
      ? q
          .split(/([*?])/)
          .map((part) => (part === '*' ? '%' : part === '?' ? '_' : likeEscape(part)))
          .join('')
      : `%${likeEscape(q)}%`;
    // The trigram index needs a run of 3 literal characters; shorter queries scan the names.
    const indexed = (glob ? q.split(/[*?]/) : [q]).some((part) => [...part].length >= 3);
    // 1. distinct names that match. SQLite's LIKE folds only ASCII case: for other letters try the
    // usual spellings too (as typed, lower, upper, capitalised).
    const stmt = this.db.prepare(
      indexed
        ? `SELECT rowid AS id, name FROM names_fts WHERE name LIKE ? ESCAPE '\\'`
        : `SELECT id, name FROM names WHERE id > 0 AND name LIKE ? ESCAPE '\\'`,
    );
    let names = stmt.all(pattern) as { id: number; name: string }[];
    if (/[^\u0020-\u007e]/.test(pattern)) {
      const lower = pattern.toLowerCase();
      const variants = new Set([
        lower,
        pattern.toUpperCase(),
        lower.replace(/\p{L}/u, (c) => c.toUpperCase()),
      ]);
      variants.delete(pattern);
      const seen = new Set(names.map((n) => n.id));
      for (const v of variants) {
        for (const n of stmt.all(v) as { id: number; name: string }[]) {
          if (!seen.has(n.id)) {
            seen.add(n.id);
            names.push(n);
          }
        }
      }
      names = names.sort((a, b) => a.id - b.id);
    }
    // The snapshots asked for, ranked newest first, in memory for this search (there are few
    // snapshots, and joining them per row costs more than the rows). rank[id] = 0: not wanted.
    const wanted = opts.snapshots ? new Set(opts.snapshots) : undefined;
    const rows = (this.st.snapTimes.all() as { id: number; time: number; repository_id: number }[]).filter(
      (r) =>
        (opts.repositoryId === undefined || r.repository_id === opts.repositoryId) &&
        (!wanted || wanted.has(r.id)),
    );
    if (!rows.length) return [];
    rows.sort((a, b) => b.time - a.time || b.id - a.id);
    const rank = new Int32Array(Math.max(...rows.map((r) => r.id)) + 1);
    rows.forEach((r, i) => (rank[r.id] = i + 1));
    const hits: SearchHit[] = [];
    // 2. the folders holding an entry of that name; 3. the snapshots holding each such path
    outer: for (const n of names) {
      for (const dirId of this.st.dirsOfName.all(n.id) as number[]) {
        if (hits.length >= limit) break outer;
        // One row per version of the folder: the entry there and the snapshots holding that version.
        const versions = this.st.occurrences.all(n.id, dirId) as [
          number,
          number | null,
          number | null,
          string,
        ][];
        const list: number[] = [];
        let best: [number, number | null, number | null] | undefined;
        let bestRank = Infinity;
        for (const [type, size, mtime, ids] of versions) {
          for (const part of ids.split(',')) {
            const id = Number(part);
            const r = id < rank.length ? rank[id] : 0;
            if (r === 0) continue;
            list.push(id);
            if (r < bestRank) {
              bestRank = r;
              best = [type, size, mtime];
            }
          }
        }
        if (!best) continue;
        list.sort((x, y) => rank[x] - rank[y]);
        const dir = this.dirPath(dirId);
        hits.push({
          path: (dir === '/' ? '' : dir) + '/' + n.name,
          name: n.name,
          type: NODE_TYPES[best[0]],
          snapshots: list,
          size: best[1],
          mtime: best[2],
        });
      }
    }
    return hits.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }

  /** Every snapshot's version of one path (oldest first), optionally within one repository. */
  history(p: string, opts: { repositoryId?: number } = {}): VersionEntry[] {
    const parts = splitPath(p);
    if (parts.length === 0) return [];
    const name = parts.pop()!;
    const dirId = this.dirIdOf('/' + parts.join('/'));
    const nameId = this.internName(name, false);
    if (dirId === undefined || nameId === undefined) return [];
    const rows = this.db
      .prepare(
        `SELECT sd.snapshot AS snapshot, s.snap_id AS snapId, s.time AS time, e.type AS type, e.size AS size,
                e.mtime AS mtime, e.fp AS fp
         FROM dir_versions d
         JOIN entries e ON e.dv = d.id AND e.name_id = ?
         JOIN snapshot_dirs sd ON sd.dv = d.id AND sd.dir_id = d.dir_id
         JOIN snapshots s ON s.id = sd.snapshot
         WHERE d.dir_id = ? ${opts.repositoryId !== undefined ? 'AND s.repository_id = ?' : ''}
         ORDER BY s.time, s.id`,
      )
      .all(...[nameId, dirId, ...(opts.repositoryId !== undefined ? [opts.repositoryId] : [])]) as {
      snapshot: number;
      snapId: string;
      time: number;
      type: number;
      size: number | null;
      mtime: number | null;
      fp: number | null;
    }[];
    let prev: (typeof rows)[number] | undefined;
    return rows.map((r) => {
      const changed =
        !prev || prev.type !== r.type || prev.size !== r.size || prev.mtime !== r.mtime || prev.fp !== r.fp;
      prev = r;
      return {
        snapshot: r.snapshot,
        snapId: r.snapId,
        time: r.time,
        type: NODE_TYPES[r.type],
        size: r.size,
        mtime: r.mtime,
        fingerprint: r.fp,
        changed,
      };
    });
  }

  /** Number of directories recorded for a snapshot (0: not indexed). */
  snapshotDirCount(snapshot: number): number {
    return this.st.sdCount.get(snapshot) as number;
  }
}
