/**
 * The backup engine: plain Node, no electron import (an eslint rule enforces it), run headless by the
 * CLI, the tests and the benchmarks, and in-process by the app. This is its public face; the stages
 * live one per folder, on floors that import only downward (docs/architecture.md §1 rule 9): crypto/,
 * chunk/, compress/ → backend/ → repo/ → scan/ → pool/ → backup/, restore/, check/ → workers/ →
 * catalog/ → schedule/. Long operations take an AbortSignal and report through an injected progress
 * sink; CPU work runs in worker threads (pool/, each feature's side in its worker/).
 */
export * from './errors.js';
export type * from './operations.js';
export {
  Repository,
  initRepository,
  openRepository,
  type RepoConfig,
  type InitOptions,
} from './repo/repository.js';
export type { ID, Snapshot, SnapshotEntry, Tree, TreeNode } from './repo/types.js';
export { openBackend, type Backend, type BackendOptions } from './backend/index.js';
export { backup, findParent } from './backup/index.js';
export { restore } from './restore/index.js';
export { check } from './check/index.js';
export { forget, prune } from './repo/retention.js';
export { diff, find, lookup, walk } from './repo/browse.js';
