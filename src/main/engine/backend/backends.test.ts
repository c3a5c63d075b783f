import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { backendConformance } from './conformance.js';
import { MemoryBackend } from './memory/index.js';
import { LocalBackend } from './local/index.js';
import { FaultyBackend } from './faulty/index.js';

backendConformance('memory', async () => new MemoryBackend());
backendConformance(
  'local',
  async () => new LocalBackend(await fs.mkdtemp(path.join(os.tmpdir(), 'tm-local-'))),
  async (b) => fs.rm(b.location, { recursive: true, force: true }),
);
backendConformance('faulty (no faults) over memory', async () => new FaultyBackend(new MemoryBackend()));
