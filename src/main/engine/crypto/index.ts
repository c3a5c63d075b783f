/**
 * Cryptography of the repository (docs/architecture.md §2):
 * - a random master key: 32 bytes for AES-256-GCM encryption + 32 bytes for keyed BLAKE3 blob IDs;
 * - the master key is wrapped by a key derived from a password with scrypt (N=2^15, r=8, p=1 by default);
 * - every stored object/blob is nonce(12) ‖ ciphertext ‖ tag(16); a blob's ID is bound as associated data,
 *   so a blob copied under another ID fails authentication.
 * Guarantees: decryption either returns the exact plaintext or throws. It does not pad lengths.
 */
import crypto from 'node:crypto';
import { createRequire } from 'node:module';
import { loadNativeAddon } from '../native.js';

/**
 * BLAKE3 from @napi-rs/blake-hash. Its loader asks process.report for the C library in use (a report of
 * the whole process: ~8 ms of every thread that loads it, each worker's start-up included); on Linux x64
 * its glibc binary is loaded directly, and through the loader anywhere else or if that fails (musl).
 */
function loadBlake(): typeof import('@napi-rs/blake-hash') {
  const require = createRequire(import.meta.url);
  if (process.platform === 'linux' && process.arch === 'x64')
    try {
      return require('@napi-rs/blake-hash-linux-x64-gnu') as typeof import('@napi-rs/blake-hash');
    } catch {}
  return require('@napi-rs/blake-hash') as typeof import('@napi-rs/blake-hash');
}
export const { Blake3Hasher } = loadBlake();

export const NONCE_BYTES = 12;
export const TAG_BYTES = 16;
export const OVERHEAD = NONCE_BYTES + TAG_BYTES;

export interface MasterKey {
  encryption: Buffer; // 32 bytes
  id: Buffer; // 32 bytes, BLAKE3 key
}

export { deriveKey, type KdfParams } from './kdf.js';
import type { KdfParams } from './kdf.js';

export class DecryptError extends Error {
  constructor(message = 'authentication failed') {
    super(message);
    this.name = 'DecryptError';
  }
}

export function newMasterKey(): MasterKey {
  return { encryption: crypto.randomBytes(32), id: crypto.randomBytes(32) };
}

export function encodeMasterKey(k: MasterKey): Buffer {
  return Buffer.concat([k.encryption, k.id]);
}

export function decodeMasterKey(b: Buffer): MasterKey {
  if (b.length !== 64) throw new DecryptError('master key has the wrong length');
  return { encryption: Buffer.from(b.subarray(0, 32)), id: Buffer.from(b.subarray(32, 64)) };
}

export function defaultKdfParams(): KdfParams {
  // ~100 ms and 32 MiB here: slow enough to hinder guessing, fast enough to open a repository instantly.
  return { N: 1 << 15, r: 8, p: 1, salt: crypto.randomBytes(32).toString('base64') };
}

// Random nonces drawn from a pool refilled 1024 at a time (one getrandom call instead of one per blob);
// each is used once and never handed out again.
const noncePool = Buffer.allocUnsafe(NONCE_BYTES * 1024);
let noncePos = noncePool.length;
function nextNonce(): Buffer {
  if (noncePos === noncePool.length) {
    crypto.randomFillSync(noncePool);
    noncePos = 0;
  }
  const n = noncePool.subarray(noncePos, noncePos + NONCE_BYTES);
  noncePos += NONCE_BYTES;
  return n;
}

/**
 * AES-256-GCM with the key set up once per thread (native/aead, on Node's own OpenSSL): Node's
 * createCipheriv builds a cipher object and expands the key on every call, ~9 µs a blob of which the
 * encryption of 8 KiB is ~1.5 µs — a block file's incremental seals thousands of 8 KiB blocks, a restore
 * opens one blob per small file. Without the addon (not built, Windows, TIDEMARK_NO_NATIVE_AEAD=1) Node's
 * crypto does the same, byte for byte.
 */
interface Aead {
  newKey(key: Uint8Array): object;
  seal(
    key: object,
    nonce: Uint8Array,
    aad: Uint8Array | null,
    plain: Uint8Array,
    out: Uint8Array,
    at: number,
  ): number;
  open(key: object, sealed: Uint8Array, aad: Uint8Array | null, out: Uint8Array, at: number): number;
}
const aead =
  process.platform === 'win32' || process.env.TIDEMARK_NO_NATIVE_AEAD === '1'
    ? undefined
    : loadNativeAddon<Aead>('aead', 'tidemark_aead');
/** Whether blobs are sealed and opened by the native addon (else by Node's crypto). */
export const nativeAead = !!aead;
const aeadKeys = new WeakMap<Buffer, object>(); // key buffers live as long as their repository or thread

function aeadKey(key: Buffer): object {
  let h = aeadKeys.get(key);
  if (!h) aeadKeys.set(key, (h = aead!.newKey(key)));
  return h;
}

/** Encrypts `plaintext` with AES-256-GCM under `key`; `aad` binds context (e.g. a blob ID). */
export function seal(key: Buffer, plaintext: Uint8Array, aad?: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(NONCE_BYTES + plaintext.length + TAG_BYTES);
  sealInto(key, plaintext, aad, out, 0);
  return out;
}

/** seal() into `out` at `at` (which must have OVERHEAD + plaintext.length bytes free); returns the bytes
 *  written. */
export function sealInto(
  key: Buffer,
  plaintext: Uint8Array,
  aad: Uint8Array | undefined,
  out: Buffer,
  at: number,
): number {
  const nonce = nextNonce();
  if (aead) return aead.seal(aeadKey(key), nonce, aad ?? null, plaintext, out, at);
  nonce.copy(out, at);
  const cipher = crypto.createCipheriv('aes-256-gcm', key, nonce);
  if (aad) cipher.setAAD(aad);
  const n1 = cipher.update(plaintext).copy(out, at + NONCE_BYTES);
  const fin = cipher.final();
  fin.copy(out, at + NONCE_BYTES + n1);
  cipher.getAuthTag().copy(out, at + NONCE_BYTES + n1 + fin.length);
  return NONCE_BYTES + n1 + fin.length + TAG_BYTES;
}

export function open(key: Buffer, sealed: Uint8Array, aad?: Uint8Array): Buffer {
  if (sealed.length < OVERHEAD) throw new DecryptError('ciphertext is too short');
  if (aead) {
    const out = Buffer.allocUnsafe(sealed.length - OVERHEAD);
    if (aead.open(aeadKey(key), sealed, aad ?? null, out, 0) < 0) throw new DecryptError();
    return out;
  }
  const buf = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
  const nonce = buf.subarray(0, NONCE_BYTES);
  const tag = buf.subarray(buf.length - TAG_BYTES);
  const decipher = crypto.createDecipheriv('aes-256-gcm', key, nonce);
  if (aad) decipher.setAAD(aad);
  decipher.setAuthTag(tag);
  try {
    const a = decipher.update(buf.subarray(NONCE_BYTES, buf.length - TAG_BYTES));
    const b = decipher.final();
    return b.length ? Buffer.concat([a, b]) : a;
  } catch {
    throw new DecryptError();
  }
}

let openScratch: Buffer | undefined;

/** open() into a buffer of this thread's that the next call reuses: the caller must be done with the
 *  plaintext (decompressed, hashed, written, copied) before calling again on the same thread. */
export function openTransient(key: Buffer, sealed: Uint8Array, aad?: Uint8Array): Buffer {
  const len = sealed.length - OVERHEAD;
  if (!aead || len < 0 || len > 8 * 1024 * 1024) return open(key, sealed, aad);
  // allocated once at its largest (see compress/index.ts scratchOf: unwritten pages cost nothing)
  openScratch ??= Buffer.allocUnsafeSlow(8 * 1024 * 1024);
  if (aead.open(aeadKey(key), sealed, aad ?? null, openScratch, 0) < 0) throw new DecryptError();
  return openScratch.subarray(0, len);
}

/** Keyed BLAKE3 of a blob's plaintext: its ID. */
const asBuffer = (d: Uint8Array): Buffer =>
  Buffer.isBuffer(d) ? d : Buffer.from(d.buffer, d.byteOffset, d.byteLength);

// One keyed hasher per key, reset between uses (creating one per blob costs more than hashing 8 KiB).
let keyedFor: Buffer | undefined;
let keyed: import('@napi-rs/blake-hash').Blake3Hasher | undefined;

/** blobId as hex. The hasher's digestBuffer() hands back a Buffer of the addon's own memory (an external
 *  buffer with a finalizer, ~2.7 µs a call here), where digest('hex') is a plain string (~0.3 µs): a
 *  blob's ID cost more than hashing a 4 KiB blob, once per chunk in a backup and once per blob restored. */
export function blobIdHex(idKey: Buffer, data: Uint8Array): string {
  if (!keyed || !keyedFor!.equals(idKey)) {
    keyed = Blake3Hasher.newKeyed(idKey);
    keyedFor = Buffer.from(idKey);
  } else keyed.reset();
  return keyed.update(asBuffer(data)).digest('hex');
}

export function blobId(idKey: Buffer, data: Uint8Array): Buffer {
  return Buffer.from(blobIdHex(idKey, data), 'hex');
}

/** Plain BLAKE3 of stored bytes: the name of a pack/index/snapshot file, so `check` can verify it. */
export function storageId(data: Uint8Array): string {
  return new Blake3Hasher().update(asBuffer(data)).digest('hex');
}

export function randomId(): string {
  return crypto.randomBytes(32).toString('hex');
}
