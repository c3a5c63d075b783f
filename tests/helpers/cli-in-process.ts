/**
 * The CLI run in process (the real program with the command groups a test gives), for tests that look
 * inside it (mocks, the catalog) where a child process would hide it.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { runCli, type CommandRegistrar } from '../../src/main/cli/program.js';

const VARS = ['TIDEMARK_HOME', 'TIDEMARK_PASSWORD', 'TIDEMARK_TEST_KDF_N', 'TIDEMARK_REPOSITORY'];

/**
 * A temp folder of the test file's own, with TIDEMARK_HOME in it, the repository password and a fast
 * key derivation set for the file's tests (no default repository), all put back and removed after.
 */
export function cliHome(prefix: string, password = 'cli-secret-pw'): { readonly dir: string } {
  let dir = '';
  const saved: Record<string, string | undefined> = {};
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    for (const k of VARS) saved[k] = process.env[k];
    process.env.TIDEMARK_HOME = path.join(dir, 'home');
    process.env.TIDEMARK_PASSWORD = password;
    process.env.TIDEMARK_TEST_KDF_N = '1024';
    delete process.env.TIDEMARK_REPOSITORY;
  });
  afterAll(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return {
    get dir() {
      return dir;
    },
  };
}

/** Runs `tidemark ARGS` in process with these command groups: its exit code and what it printed. */
export async function cliInProcess(
  registrars: CommandRegistrar[],
  args: string[],
  signal?: AbortSignal,
): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io = { out: (s: string) => (out += s), err: (s: string) => (err += s), isTTY: false };
  const code = await runCli(args, io, registrars, signal);
  return { code, out, err };
}
