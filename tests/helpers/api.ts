/** An API over in-memory jobs, runs and settings, for tests of the API with a real or fake engine. */
import path from 'node:path';
import { TidemarkApi } from '../../src/main/api/api.js';
import { MemoryState } from '../../src/main/api/state.js';
import type { ApiServices } from '../../src/main/api/services.js';

export function memoryApi(
  engine: ApiServices['engine'],
  dir: string,
  mode: ApiServices['info']['mode'] = 'browser',
): TidemarkApi {
  const state = new MemoryState();
  return new TidemarkApi({
    engine,
    jobs: state,
    runs: state,
    settings: state,
    info: { version: 'test', mode, dataDir: dir, defaultRepoDir: path.join(dir, 'repo'), homeDir: dir },
  });
}
