/**
 * Cryptography of the repository (DESIGN.md §2):
 * - a random master key: 32 bytes for AES-256-GCM encryption + 32 bytes for keyed BLAKE3 blob IDs;
 * - the master key is wrapped by a key derived from a password with scrypt (N=2^15, r=8, p=1 by default);
 * - every stored object/blob is nonce(12) ‖ ciphertext ‖ tag(16); a blob's ID is bound as associated data,
 *   so a blob copied under another ID fails authentication.
 * Guarantees: decryption either returns the exact plaintext or throws. It does not pad lengths.
 */
import crypto from 'node:crypto';
import { Blake3Hasher } from '@napi-rs/blake-hash';

export const NONCE_BYTES = 12;
export const TAG_BYTES = 16;
export const OVERHEAD = NONCE_BYTES + TAG_BYTES;

export interface MasterKey {
  encryption: Buffer; // 32 bytes
  id: Buffer; // 32 bytes, BLAKE3 key
}

export interface KdfParams {
  N: number;
  r: number;
  p: number;
  salt: string; // base64
}

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

export function deriveKey(password: string, params: KdfParams): Promise<Buffer> {
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

/** Keyed BLAKE3 of a blob's plaintext: its ID. */
const asBuffer = (d: Uint8Array): Buffer =>
  Buffer.isBuffer(d) ? d : Buffer.from(d.buffer, d.byteOffset, d.byteLength);

// One keyed hasher per key, reset between uses (creating one per blob costs more than hashing 8 KiB).
let keyedFor: Buffer | undefined;
let keyed: Blake3Hasher | undefined;

export function blobId(idKey: Buffer, data: Uint8Array): Buffer {
  if (!keyed || !keyedFor!.equals(idKey)) {
    keyed = Blake3Hasher.newKeyed(idKey);
    keyedFor = Buffer.from(idKey);
  } else keyed.reset();
  return keyed.update(asBuffer(data)).digestBuffer();
}

/** Plain BLAKE3 of stored bytes: the name of a pack/index/snapshot file, so `check` can verify it. */
export function storageId(data: Uint8Array): string {
  return new Blake3Hasher().update(asBuffer(data)).digest('hex');
}

export function randomId(): string {
  return crypto.randomBytes(32).toString('hex');
}
