/**
 * The password key derivation (scrypt), apart from the rest of crypto/ so that the CLI's launcher can
 * start one before it loads anything else (../../cli/early.ts): scrypt takes ~0.1 s of a core, which a
 * backup or restore spent waiting, its main thread idle, after the CLI had loaded (~0.2 s). Started
 * ahead, it runs on libuv's pool while the CLI loads, and opening the repository takes its result.
 */
import crypto from 'node:crypto';

export interface KdfParams {
  N: number;
  r: number;
  p: number;
  salt: string; // base64
}

function scrypt(password: string, params: KdfParams): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    crypto.scrypt(
      password.normalize('NFC'),
      Buffer.from(params.salt, 'base64'),
      32,
      { N: params.N, r: params.r, p: params.p, maxmem: 256 * params.N * params.r + 64 * 1024 * 1024 },
      (err, key) => (err ? reject(err) : resolve(key)),
    );
  });
}

interface Ahead {
  password: string;
  params: KdfParams;
  key: Promise<Buffer>;
}
/** Derivations started ahead and not yet taken: one list for the process, on globalThis, because the
 *  launcher's bundle and the CLI's each have their own copy of this module (like pool/early.ts). */
const AHEAD = Symbol.for('tidemark.kdfAhead');
const ahead = (): Ahead[] => ((globalThis as Record<symbol, Ahead[]>)[AHEAD] ??= []);

const same = (a: KdfParams, b: KdfParams) => a.N === b.N && a.r === b.r && a.p === b.p && a.salt === b.salt;

const RUNNING = Symbol.for('tidemark.kdfAheadRunning');
const running = (): Set<Promise<unknown>> =>
  ((globalThis as Record<symbol, Set<Promise<unknown>>>)[RUNNING] ??= new Set());

/** Starts deriving the key of `password` with `params` for a later deriveKey to take. */
export function deriveKeyAhead(password: string, params: KdfParams): void {
  const key = scrypt(password, params);
  key.catch(() => {}); // whoever takes it sees the error; untaken, it is nobody's
  ahead().push({ password, params: { ...params }, key });
  const done = key.then(
    () => {},
    () => {},
  );
  running().add(done);
  void done.then(() => running().delete(done));
}

/** Settles once the derivations started ahead have ended (taken or not); undefined when none runs. Memory
 *  mode 'low' starts its worker threads after it: scrypt's 32 MiB and the threads' boot then do not add
 *  up in the peak (pool/threads.ts prestartWorkers). */
export function derivingAhead(): Promise<void> | undefined {
  const list = [...running()];
  return list.length ? Promise.all(list).then(() => {}) : undefined;
}

/** The key derived from `password` with `params`: one started ahead for exactly these, else a new one. */
export function deriveKey(password: string, params: KdfParams): Promise<Buffer> {
  const list = ahead();
  const i = list.findIndex((a) => a.password === password && same(a.params, params));
  if (i >= 0) return list.splice(i, 1)[0].key;
  return scrypt(password, params);
}

/** How many derivations started ahead are still waiting to be taken (for tests). */
export function derivationsAhead(): number {
  return ahead().length;
}

/** Forgets the derivations started ahead and not taken (for tests). */
export function dropDerivationsAhead(): void {
  ahead().length = 0;
}
