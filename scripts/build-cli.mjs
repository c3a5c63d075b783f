#!/usr/bin/env node
// Bundles the headless CLI and its pipeline worker with esbuild into out/cli/ (what benchmarks and
// packaged installs run; development runs the TypeScript sources through tsx, see bin/tidemark.mjs).
import { build } from 'esbuild';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
await build({
  absWorkingDir: root,
  entryPoints: { tidemark: 'src/main/cli/main.ts', pipelineWorker: 'src/main/engine/workers/pipelineWorker.ts' },
  outdir: 'out/cli',
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  sourcemap: true,
  // native and large SDK packages stay in node_modules
  packages: 'external',
  logLevel: 'warning',
});
console.log('built out/cli/tidemark.js and out/cli/pipelineWorker.js');
