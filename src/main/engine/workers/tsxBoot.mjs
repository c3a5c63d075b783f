// Loads a TypeScript worker entry through tsx (development and tests only; builds use the bundled .js).
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';
register();
await import(workerData.__entry);
