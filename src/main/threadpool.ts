// Imported first by the Electron main entry: libuv sizes its thread pool (which runs the engine's file
// reads) when the pool is first used, from UV_THREADPOOL_SIZE. The default of 4 caps the reads in
// flight; block-level incrementals read scattered blocks and need a deeper queue. The CLI launchers
// and browser mode set it in their environment instead (bin/malloc-env.mjs).
process.env.UV_THREADPOOL_SIZE ??= '16';
export {};
