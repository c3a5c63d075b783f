/**
 * Browser mode entry (`npm run serve`, which runs it bundled: scripts/build-server.mjs): the API on 127.0.0.1 with a random access token, serving the
 * built renderer from out/renderer. Options: --port N, --data DIR (default $TIDEMARK_HOME or
 * ~/.tidemark), --static DIR, --fake-engine (an in-memory engine for UI work; nothing is kept).
 */
import '../engineHost.js'; // first: libuv's pool size and V8 tiering for the engine
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createApi } from './wiring.js';
import { startServer } from './server.js';
import { FakeEngine } from './fake-engine.js';

const argv = process.argv.slice(2);
const opt = (name: string) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
// the project's root: above the bundle (out/server/serve.js, what `npm start` runs) or the sources
const here = path.dirname(fileURLToPath(import.meta.url));
const root =
  [path.resolve(here, '../..'), path.resolve(here, '../../..')].find((d) =>
    fs.existsSync(path.join(d, 'package.json')),
  ) ?? path.resolve(here, '../../..');
const { api, services, close } = createApi({
  mode: 'browser',
  dataDir: opt('--data'),
  engine: argv.includes('--fake-engine') ? new FakeEngine(50) : undefined,
});
api.startScheduler();
const server = await startServer({
  api,
  staticDir: opt('--static') ?? path.join(root, 'out/renderer'),
  port: Number(opt('--port') ?? process.env.TIDEMARK_PORT ?? 0),
});
console.log(`Tidemark is running in browser mode (data: ${services.info.dataDir}).`);
console.log(`Open this address in a browser on this computer:\n\n  ${server.tokenUrl}\n`);
console.log('Press Ctrl+C to stop.');
const stop = async () => {
  await api.close();
  close();
  await server.close();
  process.exit(0);
};
process.on('SIGINT', () => void stop());
process.on('SIGTERM', () => void stop());
