#!/usr/bin/env node
// Runs the Tidemark CLI from the TypeScript sources (tsx registers the loader in-process).
import { register } from 'tsx/esm/api';
register();
await import(new URL('../src/main/cli/main.ts', import.meta.url).href);
