/**
 * backend/ — where repository objects live. One small `Backend` contract (save/load/stat/remove/list of
 * immutable objects by type and name) with implementations per storage: local/ (a folder, atomic
 * temp + fsync + rename), memory/ (tests), s3/ (S3-compatible object stores); and wrappers that add one
 * behaviour around any of them, kopia-style: retry/ (backoff with jitter), throttle/ (bandwidth),
 * requestlog/ (the run's request history), readonly/ (restores), faulty/ (fault injection for tests),
 * each on forwarding.ts's base (it overrides only what it changes; optional capabilities follow the calls).
 * open.ts turns a location string into the right stack. Every backend passes conformance.ts.
 * Not here: what the bytes mean (repo/ encrypts, packs and names them).
 */
export type { Backend, ObjectInfo, ObjectType, SaveOptions } from './types.js';
export { OBJECT_TYPES } from './types.js';
export { openBackend, type BackendOptions } from './open.js';
export { LocalBackend } from './local/index.js';
export { MemoryBackend } from './memory/index.js';
