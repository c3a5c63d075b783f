#!/usr/bin/env node
// Bundles browser mode's server (src/main/api/serve.ts) and the engine's pipeline worker with esbuild into
// out/server/, as out/cli is bundled (scripts/build-cli.mjs) and Electron's main process is (electron-vite):
// what `npm start` / `npm run serve` run. Running the sources through tsx instead cost the server ~35 MiB
// of RSS (the loader, the transpiled modules and their source maps, in the main thread and in each engine
// worker thread): docs/performance.md, "App memory".
// `buildServer({ entry, outdir })` bundles another entry the same way (bench/app-memory.ts bundles its
// instrumented server with it).
import { build } from 'esbuild';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Bundles `entry` (a path from the project root) as `<outdir>/<name>.js`, with pipelineWorker.js beside it. */
export async function buildServer({ entry = 'src/main/api/serve.ts', outdir = 'out/server', name = 'serve' } = {}) {
  await build({
    absWorkingDir: root,
    outdir,
    entryPoints: { [name]: entry, pipelineWorker: 'src/main/engine/workers/pipelineWorker.ts' },
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    sourcemap: true,
    // native packages and the AWS SDK stay in node_modules (as in out/cli); code loaded on first use (the
    // S3 backend and the AWS SDK) goes into chunks of its own
    external: ['@aws-sdk/*', '@napi-rs/*', 'better-sqlite3', 'zstd-napi', 'ws', 'tsx'],
    splitting: true,
    chunkNames: 'chunks/[name]-[hash]',
    // bundled CommonJS packages require Node's own modules
    banner: {
      js: "import { createRequire as __tmCreateRequire } from 'node:module'; const require = __tmCreateRequire(import.meta.url);",
    },
    logLevel: 'warning',
  });
  return path.join(root, outdir, `${name}.js`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const file = await buildServer();
  console.log(`built ${path.relative(root, file)} and out/server/pipelineWorker.js`);
}
