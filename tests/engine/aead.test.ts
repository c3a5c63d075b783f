/**
 * Blob encryption (src/main/engine/crypto): the native AES-256-GCM (native/aead) and Node's crypto are
 * interchangeable — each opens what the other sealed, byte for byte the same format — and both refuse a
 * changed byte, another blob's ID as associated data, or another key. The native half is skipped, with
 * the reason, when the addon was not built.
 */
import { describe, expect, it } from 'vitest';
import crypto from 'node:crypto';
import { importWithEnv } from '../helpers/env.js';

type CryptoModule = typeof import('../../src/main/engine/crypto/index.js');

const load = (native: boolean): Promise<CryptoModule> =>
  importWithEnv(
    { TIDEMARK_NO_NATIVE_AEAD: native ? '0' : '1' },
    () => import('../../src/main/engine/crypto/index.js'),
  );

/** The format, sealed and opened by Node's crypto directly: nonce(12) | ciphertext | tag(16). */
function referenceSeal(key: Buffer, plain: Buffer, aad?: Buffer): Buffer {
  const nonce = crypto.randomBytes(12);
  const c = crypto.createCipheriv('aes-256-gcm', key, nonce);
  if (aad) c.setAAD(aad);
  return Buffer.concat([nonce, c.update(plain), c.final(), c.getAuthTag()]);
}
function referenceOpen(key: Buffer, sealed: Buffer, aad?: Buffer): Buffer {
  const d = crypto.createDecipheriv('aes-256-gcm', key, sealed.subarray(0, 12));
  if (aad) d.setAAD(aad);
  d.setAuthTag(sealed.subarray(sealed.length - 16));
  return Buffer.concat([d.update(sealed.subarray(12, sealed.length - 16)), d.final()]);
}

const probe = await load(true);
const modes = [
  { name: "Node's crypto", native: false, skip: undefined as string | undefined },
  {
    name: 'native addon',
    native: true,
    skip: probe.nativeAead ? undefined : 'native/aead was not built (or Windows): the fallback is tested',
  },
];

for (const mode of modes) {
  const suite = mode.skip ? describe.skip : describe;
  suite(`blob encryption: ${mode.name}${mode.skip ? ` (skipped: ${mode.skip})` : ''}`, () => {
    it('is the format Node crypto reads and writes, for empty, small and large blobs, with or without an ID', async () => {
      const m = await load(mode.native);
      expect(m.nativeAead).toBe(mode.native);
      const key = crypto.randomBytes(32);
      for (const size of [0, 1, 8192, 3 * 1024 * 1024 + 5]) {
        const plain = crypto.randomBytes(size);
        const id = crypto.randomBytes(32);
        for (const aad of [id, undefined]) {
          const sealed = m.seal(key, plain, aad);
          expect(sealed.length).toBe(size + m.OVERHEAD);
          expect(referenceOpen(key, sealed, aad).equals(plain)).toBe(true);
          expect(m.open(key, referenceSeal(key, plain, aad), aad).equals(plain)).toBe(true);
          expect(m.openTransient(key, sealed, aad).equals(plain)).toBe(true); // this thread's buffer
          // sealInto writes at an offset and nowhere else
          const out = Buffer.alloc(size + m.OVERHEAD + 10, 0xee);
          expect(m.sealInto(key, plain, aad, out, 7)).toBe(size + m.OVERHEAD);
          expect(out.subarray(0, 7).every((b) => b === 0xee)).toBe(true);
          expect(out.subarray(out.length - 3).every((b) => b === 0xee)).toBe(true);
          expect(m.open(key, out.subarray(7, 7 + size + m.OVERHEAD), aad).equals(plain)).toBe(true);
        }
      }
    });

    it('refuses a changed byte, another ID, another key or a truncated blob', async () => {
      const m = await load(mode.native);
      const key = crypto.randomBytes(32);
      const id = crypto.randomBytes(32);
      const sealed = m.seal(key, crypto.randomBytes(5000), id);
      for (const at of [0, 11, 12, 2000, sealed.length - 1]) {
        const bad = Buffer.from(sealed);
        bad[at] ^= 1;
        expect(() => m.open(key, bad, id)).toThrow(m.DecryptError);
        expect(() => m.openTransient(key, bad, id)).toThrow(m.DecryptError);
      }
      expect(() => m.open(key, sealed, crypto.randomBytes(32))).toThrow(m.DecryptError);
      expect(() => m.open(key, sealed)).toThrow(m.DecryptError);
      expect(() => m.open(crypto.randomBytes(32), sealed, id)).toThrow(m.DecryptError);
      expect(() => m.open(key, sealed.subarray(0, 20), id)).toThrow(m.DecryptError);
      expect(m.open(key, sealed, id).length).toBe(5000); // and the original still opens
    });

    it('keeps one key set-up per key buffer and tells keys apart', async () => {
      const m = await load(mode.native);
      const a = crypto.randomBytes(32);
      const b = crypto.randomBytes(32);
      const plain = crypto.randomBytes(100);
      const sa = m.seal(a, plain);
      const sb = m.seal(b, plain);
      expect(m.open(a, sa).equals(plain)).toBe(true);
      expect(m.open(b, sb).equals(plain)).toBe(true);
      expect(() => m.open(a, sb)).toThrow(m.DecryptError);
      expect(() => m.open(Buffer.from(b), sa)).toThrow(m.DecryptError); // same bytes as b, another buffer
      expect(m.open(Buffer.from(a), sa).equals(plain)).toBe(true);
    });
  });
}

describe('blob IDs', () => {
  it('are keyed BLAKE3, the same as hex and as bytes, and follow the key', async () => {
    const m = await load(false);
    // reference: `b3sum --keyed` (BLAKE3's own tool) of these bytes under this key
    const key = Buffer.from('whats the Elvish word for friend');
    const want = '3a90d97c5d8e0c576b7d2a9b23c90c23fa739add837c32daed5ef41e5b67f5ad';
    expect(m.blobIdHex(key, Buffer.from('hello tidemark'))).toBe(want);
    expect(m.blobId(key, Buffer.from('hello tidemark')).toString('hex')).toBe(want);
    // a view into a larger buffer hashes only its own bytes; the hasher kept between calls is reset
    const big = Buffer.from('xxhello tidemarkyy');
    expect(m.blobIdHex(key, new Uint8Array(big.buffer, big.byteOffset + 2, 14))).toBe(want);
    expect(m.blobIdHex(key, Buffer.from('hello tidemark'))).toBe(want);
    // another key (the hasher is made again for it), then the first key again
    const other = m.blobIdHex(crypto.randomBytes(32), Buffer.from('hello tidemark'));
    expect(other).not.toBe(want);
    expect(m.blobIdHex(key, Buffer.from('hello tidemark'))).toBe(want);
  });
});
