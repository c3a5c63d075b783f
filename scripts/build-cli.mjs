#!/usr/bin/env node
// Bundles the headless CLI and its pipeline worker with esbuild into out/cli/ (what benchmarks and
// packaged installs run; development runs the TypeScript sources through tsx, see bin/tidemark.mjs).
// out/cli/tidemark.js is a small launcher: on Linux it re-executes itself once with glibc's malloc
// settings (bin/malloc-env.mjs) before loading the CLI proper, out/cli/cli.js.
import { build } from 'esbuild';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const common = {
  absWorkingDir: root,
  outdir: 'out/cli',
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  sourcemap: true,
  // native packages and the AWS SDK stay in node_modules; small pure-JavaScript ones (commander, minimatch,
  // croner…) are bundled: resolving and loading their files one by one cost every CLI command tens of
  // milliseconds of start-up
  external: ['@aws-sdk/*', '@napi-rs/*', 'better-sqlite3', 'zstd-napi', 'ws', 'tsx'],
  logLevel: 'warning',
};
await build({
  ...common,
  entryPoints: { cli: 'src/main/cli/main.ts', pipelineWorker: 'src/main/engine/workers/pipelineWorker.ts' },
  // code loaded on first use (the S3 backend and the AWS SDK) goes into chunks of its own, so commands
  // on a local repository do not spend start-up time loading it
  splitting: true,
  chunkNames: 'chunks/[name]-[hash]',
  // bundled CommonJS packages require Node's own modules
  banner: {
    js: "import { createRequire as __tmCreateRequire } from 'node:module'; const require = __tmCreateRequire(import.meta.url);",
  },
});
await build({
  ...common,
  sourcemap: false,
  stdin: {
    contents: [
      `import { reexecWithMallocEnv } from './bin/malloc-env.mjs';`,
      `import { fileURLToPath } from 'node:url';`,
      `import { startEarlyKeyDerivation, startEarlyWorkers } from './src/main/cli/early.ts';`,
      `if (!reexecWithMallocEnv()) {`,
      `  process.env.UV_THREADPOOL_SIZE ??= '16';`,
      // a backup's or restore's key derivation runs and its worker threads boot while the CLI loads
      // (src/main/cli/early.ts)
      `  startEarlyKeyDerivation(process.argv.slice(2));`,
      `  startEarlyWorkers(process.argv.slice(2), fileURLToPath(new URL('./pipelineWorker.js', import.meta.url)));`,
      `  await import('./cli.js');`,
      `}`,
    ].join('\n'),
    resolveDir: root,
    sourcefile: 'tidemark-launcher.mjs',
  },
  outfile: 'out/cli/tidemark.js',
  outdir: undefined,
  external: ['./cli.js'],
  banner: { js: '#!/usr/bin/env node' },
});
console.log('built out/cli/tidemark.js (launcher), out/cli/cli.js and out/cli/pipelineWorker.js');
