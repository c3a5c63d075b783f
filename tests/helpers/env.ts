import { vi } from 'vitest';

/** Imports a module afresh with these environment variables set while it loads (modules that read the
 *  environment once, at load: which native addon to use), then puts the environment back. */
export async function importWithEnv<T>(env: Record<string, string>, load: () => Promise<T>): Promise<T> {
  vi.resetModules();
  const before = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  try {
    return await load();
  } finally {
    for (const [k, v] of Object.entries(before))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
  }
}
