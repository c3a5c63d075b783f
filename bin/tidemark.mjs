#!/usr/bin/env node
// Runs the Tidemark CLI from the TypeScript sources (tsx registers the loader in-process).
// First, on Linux, it re-executes itself once with glibc's malloc settings (bin/malloc-env.mjs).
import { reexecWithMallocEnv } from './malloc-env.mjs';

if (!reexecWithMallocEnv()) {
  // More libuv threads: file reads and lstat calls of the scan run in parallel on them.
  process.env.UV_THREADPOOL_SIZE ??= '16';
  const { register } = await import('tsx/esm/api');
  register();
  await import(new URL('../src/main/cli/main.ts', import.meta.url).href);
}
