// The renderer alone (browser mode and tests): the same settings as the renderer part of
// electron.vite.config.ts, buildable with plain `vite build -c src/renderer/vite.config.ts`.
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

const here = new URL('.', import.meta.url).pathname;

export default defineConfig({
  root: here,
  base: './',
  plugins: [react()],
  logLevel: 'warn',
  build: { outDir: `${here}../../out/renderer`, emptyOutDir: true, chunkSizeWarningLimit: 2000 },
});
