import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'tests/**/*.test.ts'],
    // a limit for hangs, not a speed check: on a loaded 2-core machine a test that spawns ten CLIs took
    // 59 s (7 s when idle)
    testTimeout: 180_000,
    hookTimeout: 120_000,
    // expect.poll gives up after 1 s by default: far too little for a UI or a daemon on a loaded CI machine
    expect: { poll: { timeout: 30_000 } },
    // tests never leave a block tracker pinned in the kernel (the app pins one so tracking survives restarts)
    env: { TIDEMARK_BLOCK_PIN: '' },
    pool: 'forks',
    maxWorkers: 2,
    globalSetup: ['tests/s3/global-setup.ts'],
  },
});
