/** Types of scripts/build-server.mjs (for TypeScript callers such as bench/app-memory.ts). */
export declare function buildServer(opts?: { entry?: string; outdir?: string; name?: string }): Promise<string>;
