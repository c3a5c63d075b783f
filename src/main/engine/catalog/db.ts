/**
 * Opening the catalog database: WAL, foreign keys, and schema migrations keyed by
 * `PRAGMA user_version` (each migration runs once, in order, inside a transaction).
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';

export type DB = Database.Database;

export const CATALOG_FILE = 'catalog.sqlite';

/**
 * The migrations, in order. Never edit a released entry: append a new one. Index i brings the
 * schema from user_version i to i+1.
 */
export const MIGRATIONS: ((db: DB) => void)[] = [
  // 1: jobs, runs, snapshots cache and the file index
  (db) => {
    db.exec(`
      CREATE TABLE repositories (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        location TEXT NOT NULL,
        options TEXT NOT NULL DEFAULT '{}',      -- backend options as JSON; never secrets (see SecretStore)
        prune_every_days REAL NOT NULL DEFAULT 7,
        last_prune_at INTEGER,                   -- ms since epoch
        last_sync_at INTEGER,
        created_at INTEGER NOT NULL
      );

      CREATE TABLE jobs (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,                -- stable tag written into snapshots (snapshot.job)
        name TEXT NOT NULL UNIQUE,
        repository_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE RESTRICT,
        sources TEXT NOT NULL,                   -- JSON string[]
        excludes TEXT NOT NULL DEFAULT '[]',     -- JSON string[]
        schedule TEXT NOT NULL,                  -- JSON Schedule
        retention TEXT NOT NULL DEFAULT '{}',    -- JSON RetentionPolicy
        compression_level INTEGER NOT NULL DEFAULT 3,
        options TEXT NOT NULL DEFAULT '{}',      -- JSON JobOptions
        enabled INTEGER NOT NULL DEFAULT 1,
        sched_checked_at INTEGER,                -- scheduler: fire times up to here have been handled
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
      );

      CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        job_id INTEGER REFERENCES jobs(id) ON DELETE CASCADE,
        kind TEXT NOT NULL DEFAULT 'backup',     -- backup | full | missed
        trigger TEXT NOT NULL DEFAULT 'manual',  -- manual | schedule | catch-up
        status TEXT NOT NULL CHECK (status IN
          ('queued','running','completed','completed-with-warnings','failed','cancelled','missed')),
        scheduled_for INTEGER,
        started_at INTEGER,
        ended_at INTEGER,
        snapshot_id TEXT,
        counters TEXT NOT NULL DEFAULT '{}',     -- JSON: last BackupProgress + extra counters
        error TEXT,                              -- JSON {name, code, message} when failed
        verify TEXT,                             -- JSON summary of verify-after-backup
        retention TEXT                           -- JSON summary of forget/prune
      );
      CREATE INDEX runs_by_job ON runs(job_id, id);

      CREATE TABLE run_problems (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        severity TEXT NOT NULL CHECK (severity IN ('warning','error')),
        path TEXT,
        message TEXT NOT NULL,
        code TEXT,
        PRIMARY KEY (run_id, seq)
      ) WITHOUT ROWID;

      CREATE TABLE run_log (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        t INTEGER NOT NULL,
        line TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
      ) WITHOUT ROWID;

      CREATE TABLE run_samples (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        t INTEGER NOT NULL,                      -- ms since the run started
        read_bps REAL NOT NULL,
        written_bps REAL NOT NULL,
        files_ps REAL NOT NULL,
        dedup_ratio REAL NOT NULL,
        PRIMARY KEY (run_id, t)
      ) WITHOUT ROWID;

      CREATE TABLE snapshots (
        id INTEGER PRIMARY KEY,
        repository_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
        snap_id TEXT NOT NULL,
        time INTEGER NOT NULL,
        host TEXT NOT NULL,
        job TEXT,
        tree TEXT NOT NULL,
        data TEXT NOT NULL,                      -- JSON SnapshotEntry
        indexed INTEGER NOT NULL DEFAULT 0,      -- file index complete for this snapshot
        UNIQUE (repository_id, snap_id)
      );
      CREATE INDEX snapshots_by_time ON snapshots(repository_id, time);

      -- File index. Names and directory paths are interned; a directory version is one directory
      -- path with one tree ID (a Merkle tree: an unchanged directory keeps its tree ID, so its
      -- listing is stored once however many snapshots contain it).
      CREATE TABLE names (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE
      );
      CREATE VIRTUAL TABLE names_fts USING fts5(name, content='names', content_rowid='id',
        tokenize='trigram case_sensitive 0', detail='none');

      CREATE TABLE dirs (
        id INTEGER PRIMARY KEY,                  -- 1 is the root "/"
        parent INTEGER NOT NULL,
        name_id INTEGER NOT NULL,
        UNIQUE (parent, name_id)
      );

      CREATE TABLE dir_versions (
        id INTEGER PRIMARY KEY,
        dir_id INTEGER NOT NULL,
        tree BLOB NOT NULL,
        UNIQUE (dir_id, tree)
      );

      CREATE TABLE entries (
        dv INTEGER NOT NULL,                     -- dir_versions.id of the containing directory
        name_id INTEGER NOT NULL,
        type INTEGER NOT NULL,                   -- see NODE_TYPES
        size INTEGER,
        mtime INTEGER,                           -- ms since epoch
        fp INTEGER,                              -- content fingerprint (files), to tell versions apart
        child INTEGER,                           -- dirs: dir_versions.id of the subdirectory
        PRIMARY KEY (dv, name_id)
      ) WITHOUT ROWID;
      CREATE INDEX entries_by_name ON entries(name_id);
      CREATE INDEX entries_children ON entries(dv, child) WHERE child IS NOT NULL;

      CREATE TABLE snapshot_dirs (
        snapshot INTEGER NOT NULL,               -- snapshots.id
        dir_id INTEGER NOT NULL,
        dv INTEGER NOT NULL,
        PRIMARY KEY (snapshot, dir_id)
      ) WITHOUT ROWID;
      CREATE INDEX snapshot_dirs_by_dv ON snapshot_dirs(dv);
    `);
    db.prepare('INSERT INTO names(id, name) VALUES (0, ?)').run('');
    db.prepare('INSERT INTO dirs(id, parent, name_id) VALUES (1, 0, 0)').run();
  },
  // 2: which process owns a queued/running run ("host:pid"), so a second process (the CLI beside the
  // app) does not mark another live process's runs as interrupted.
  (db) => {
    db.exec('ALTER TABLE runs ADD COLUMN owner TEXT');
  },
  // 3: the name index without per-row token counts (columnsize=0: only ranking needs them).
  (db) => {
    db.exec(`DROP TABLE names_fts;
      CREATE VIRTUAL TABLE names_fts USING fts5(name, content='names', content_rowid='id',
        tokenize='trigram case_sensitive 0', detail='none', columnsize=0);
      INSERT INTO names_fts(names_fts) VALUES ('rebuild');`);
  },
  // 4: what a run asked of its repository (request totals, failures, slowest; JSON RequestLogSummary).
  (db) => {
    db.exec('ALTER TABLE runs ADD COLUMN requests TEXT');
  },
  // 5: which sources a run read from a filesystem snapshot, and why not the others (JSON SnapshotReport).
  (db) => {
    db.exec('ALTER TABLE runs ADD COLUMN snapshots TEXT');
  },
  // 6: restore tests (catalog/restoreTests.ts): after a job's backups, or on demand.
  (db) => {
    db.exec(`
      CREATE TABLE restore_tests (
        id INTEGER PRIMARY KEY,
        job_id INTEGER REFERENCES jobs(id) ON DELETE CASCADE,
        run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,
        repository_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
        snapshot_id TEXT NOT NULL,
        trigger TEXT NOT NULL,                   -- schedule | manual
        status TEXT NOT NULL CHECK (status IN ('passed','failed','error')),
        started_at INTEGER NOT NULL,
        ended_at INTEGER NOT NULL,
        files INTEGER NOT NULL DEFAULT 0,
        bytes INTEGER NOT NULL DEFAULT 0,
        block_files INTEGER NOT NULL DEFAULT 0,
        all_block_files INTEGER NOT NULL DEFAULT 0,
        failures TEXT NOT NULL DEFAULT '[]',     -- JSON {path, message}[]
        skipped TEXT NOT NULL DEFAULT '[]',      -- JSON {path, reason}[]
        error TEXT                               -- JSON {name, code, message} when it could not run
      );
      CREATE INDEX restore_tests_by_job ON restore_tests(job_id, id);
    `);
  },
  // 7: mass-change alarms (catalog/alarms.ts): suspect snapshots by repository, and their dismissals
  // (a cache of the repository's alarms/ objects, like the snapshots table of its snapshots).
  (db) => {
    db.exec(`
      CREATE TABLE alarms (
        repository_id INTEGER NOT NULL REFERENCES repositories(id) ON DELETE CASCADE,
        snap_id TEXT NOT NULL,
        time INTEGER NOT NULL,
        host TEXT NOT NULL,
        job TEXT,
        verdict TEXT NOT NULL,                   -- JSON MassChangeVerdict
        dismissed_at INTEGER,                    -- ms since epoch; NULL while the alarm holds
        dismissal TEXT,                          -- JSON AlarmDismissal
        PRIMARY KEY (repository_id, snap_id)
      ) WITHOUT ROWID;`);
  },
  // 8: destination speed tests (speedTests.ts), kept per destination to show how it changes over time.
  (db) => {
    db.exec(`CREATE TABLE speed_tests (
        id INTEGER PRIMARY KEY,
        place TEXT NOT NULL,                     -- which destination: the same folder, or bucket + prefix
        location TEXT NOT NULL,                  -- the destination as people read it
        job_id INTEGER REFERENCES jobs(id) ON DELETE SET NULL,
        started_at INTEGER NOT NULL,
        ended_at INTEGER NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('completed','failed','cancelled')),
        settings TEXT NOT NULL,                  -- JSON: patterns, file and block size, duration, …
        results TEXT NOT NULL,                   -- JSON: one entry per pattern
        estimate TEXT,                           -- JSON: full backup / restore times, last runs
        notes TEXT NOT NULL DEFAULT '[]',
        error TEXT                               -- JSON {name, code, message} when failed
      );
      CREATE INDEX speed_tests_by_place ON speed_tests(place, started_at);`);
  },
];

export interface OpenOptions {
  /** Open an in-memory database (tests). */
  memory?: boolean;
  readonly?: boolean;
}

/** Opens (creating if needed) the catalog in `dataDir` and brings its schema up to date. */
export function openCatalogDb(dataDir: string, opts: OpenOptions = {}): DB {
  let db: DB;
  if (opts.memory) db = new Database(':memory:');
  else {
    fs.mkdirSync(dataDir, { recursive: true });
    db = new Database(path.join(dataDir, CATALOG_FILE), { readonly: opts.readonly === true });
  }
  if (!opts.readonly) {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('journal_size_limit = 67108864'); // shrink the WAL back to 64 MiB after big writes
  }
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  db.pragma('cache_size = -65536'); // 64 MiB page cache
  db.pragma('temp_store = MEMORY');
  if (!opts.readonly) migrate(db);
  return db;
}

export function schemaVersion(db: DB): number {
  return db.pragma('user_version', { simple: true }) as number;
}

export function migrate(db: DB, migrations = MIGRATIONS): void {
  let v = schemaVersion(db);
  if (v > migrations.length) {
    throw new Error(
      `the catalog was written by a newer Tidemark (schema ${v}, this version knows ${migrations.length}); ` +
        'update Tidemark or run "tidemark catalog rebuild"',
    );
  }
  while (v < migrations.length) {
    const step = migrations[v];
    db.transaction(() => {
      step(db);
      db.pragma(`user_version = ${v + 1}`);
    })();
    v++;
  }
}

/** Size of the database in bytes (pages in use, after a WAL checkpoint). */
export function databaseSize(db: DB): number {
  try {
    db.pragma('wal_checkpoint(TRUNCATE)');
  } catch {}
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  const pages = db.pragma('page_count', { simple: true }) as number;
  const free = db.pragma('freelist_count', { simple: true }) as number;
  return pageSize * (pages - free);
}
