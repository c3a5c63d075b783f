// electron-vite builds the three parts of the app: main (Node/Electron, out/main), preload (a sandboxed
// CommonJS script, out/preload/index.cjs) and the React renderer (out/renderer, also served by browser mode).
import { resolve } from 'node:path';
import { defineConfig } from 'electron-vite';
import react from '@vitejs/plugin-react';

export default defineConfig({
  main: {
    build: {
      // native modules and the rest of node_modules stay external (electron-builder unpacks them from the asar)
      externalizeDeps: true,
      rolldownOptions: {
        input: {
          index: resolve(__dirname, 'src/main/index.ts'),
          // the engine's worker threads load out/main/pipelineWorker.js (see engine/pool/threads.ts)
          pipelineWorker: resolve(__dirname, 'src/main/engine/workers/pipelineWorker.ts'),
        },
      },
    },
  },
  preload: {
    build: {
      // a sandboxed preload must be one CommonJS file
      externalizeDeps: false,
      rolldownOptions: {
        input: { index: resolve(__dirname, 'src/preload/index.ts') },
        output: { format: 'cjs', entryFileNames: '[name].cjs' },
      },
    },
  },
  renderer: {
    root: resolve(__dirname, 'src/renderer'),
    plugins: [react()],
    build: {
      outDir: resolve(__dirname, 'out/renderer'),
      rolldownOptions: { input: { index: resolve(__dirname, 'src/renderer/index.html') } },
    },
  },
});
