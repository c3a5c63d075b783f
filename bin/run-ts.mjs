#!/usr/bin/env node
// Runs a TypeScript entry point (benchmarks, scripts) with the tsx loader: `node bin/run-ts.mjs FILE [ARGS…]`.
import { register } from 'tsx/esm/api';
import { pathToFileURL } from 'node:url';
import path from 'node:path';
register();
const [file, ...rest] = process.argv.slice(2);
process.argv = [process.argv[0], path.resolve(file), ...rest];
await import(pathToFileURL(path.resolve(file)).href);
