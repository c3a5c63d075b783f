/**
 * The API layer: the one implementation of the contract in src/shared/api.ts (TidemarkApi), the
 * browser-mode HTTP+WebSocket transport (startServer) and the wiring of stores and engine (createApi).
 * The Electron IPC binding lives in src/main/app, because only that folder may import electron.
 *
 * Guarantees: every call's arguments are validated against the shared schema before a handler runs;
 * errors leave as `{name, code, message}`; one backup per job and one writer per repository at a time.
 * Deliberately not here: repository format, scheduling policy beyond a simple timer, UI state.
 */
export { TidemarkApi } from './api.js';
export { startServer, type RunningServer, type ServerOptions } from './server.js';
export { createApi, defaultDataDir } from './wiring.js';
export type * from './services.js';
