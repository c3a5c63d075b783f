import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'tests/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // tests never leave a block tracker pinned in the kernel (the app pins one so tracking survives restarts)
    env: { TIDEMARK_BLOCK_PIN: '' },
    pool: 'forks',
    maxWorkers: 2,
    globalSetup: ['tests/s3/global-setup.ts'],
  },
});
