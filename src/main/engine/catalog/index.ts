/**
 * catalog/ — the local SQLite catalog (better-sqlite3, WAL, foreign keys, user_version migrations).
 *
 * What it holds: repositories (location and non-secret backend options), jobs, runs with their
 * problems, log lines and per-second throughput samples, a cache of each repository's snapshots, and
 * a file index of every snapshot (browse a folder, search names across snapshots, list the versions of
 * one path) that answers without touching the repository, and the restore tests made of jobs' snapshots.
 *
 * Guarantees: everything learnt from a repository is a cache — `syncRepository` / `rebuildRepository`
 * recreate it from the repository alone with identical browse/search/version results. Secrets never
 * enter the database: passwords and secret keys go through a SecretStore (the Electron app supplies a
 * keychain-backed one; elsewhere a 0600 key file in the data folder).
 *
 * Not here: talking to backends or decrypting anything (callers hand in a SnapshotSource/TreeSource),
 * deciding when jobs run (schedule/).
 */
export { Catalog, assertNoSecrets, type SnapshotRow } from './catalog.js';
export { RestoreTestLog } from './restoreTests.js';
export {
  openCatalogDb,
  migrate,
  schemaVersion,
  databaseSize,
  MIGRATIONS,
  CATALOG_FILE,
  type DB,
} from './db.js';
export {
  FileIndex,
  NODE_TYPES,
  contentFingerprint,
  splitPath,
  type TreeSource,
  type IndexStats,
  type ListedEntry,
  type SearchHit,
  type SearchOptions,
  type VersionEntry,
} from './fileIndex.js';
export {
  syncRepository,
  rebuildRepository,
  indexSnapshotRow,
  type SnapshotSource,
  type SyncResult,
  type SyncOptions,
} from './sync.js';
export {
  KeyFileSecretStore,
  MemorySecretStore,
  secretKeys,
  SECRETS_FILE,
  type SecretStore,
} from './secrets.js';
export { SpeedTestLog, type SpeedTestRow } from './speedTests.js';
export type * from './types.js';
