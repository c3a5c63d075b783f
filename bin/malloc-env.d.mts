/** Types of bin/malloc-env.mjs (for TypeScript callers such as the benchmarks). */
export declare const MALLOC_ENV: Record<string, string>;
export declare const lowMemoryArgs: (argv: readonly string[]) => boolean;
export declare function withMallocEnv(
  env?: NodeJS.ProcessEnv,
  opts?: { lowMemory?: boolean },
): NodeJS.ProcessEnv;
export declare function reexecWithMallocEnv(): boolean;
