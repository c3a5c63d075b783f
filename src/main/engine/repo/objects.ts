/**
 * Encoding of the repository's small encrypted objects (config, index, snapshots, locks):
 * stored bytes = seal(encryptionKey, zstd(payload)), named by the BLAKE3 hash of the stored bytes
 * (except config, which has a fixed name). Loading verifies the name, so a damaged file is reported
 * as corrupt instead of being misread.
 */
import type { Backend, ObjectType, SaveOptions } from '../backend/types.js';
import { open, seal, storageId, DecryptError, type MasterKey } from '../crypto/index.js';
import { CorruptObjectError } from '../errors.js';
import { Compressor, Decompressor } from 'zstd-napi';

const compressor = new Compressor();
compressor.setParameters({ compressionLevel: 3 });
const decompressor = new Decompressor();

export function encodeObject(key: MasterKey, payload: Uint8Array): Buffer {
  return seal(key.encryption, compressor.compress(payload));
}

export function decodeObject(key: MasterKey, stored: Uint8Array, what: string): Buffer {
  try {
    return decompressor.decompress(open(key.encryption, stored));
  } catch (err) {
    if (err instanceof DecryptError)
      throw new CorruptObjectError(`${what} is damaged or was not written with this repository's key`);
    throw new CorruptObjectError(`${what} cannot be decoded: ${(err as Error).message}`, { cause: err });
  }
}

export async function saveJson(
  backend: Backend,
  key: MasterKey,
  type: ObjectType,
  value: unknown,
  options?: SaveOptions,
): Promise<{ id: string; size: number }> {
  const bytes = encodeObject(key, Buffer.from(JSON.stringify(value)));
  const id = storageId(bytes);
  await backend.save(type, id, bytes, options);
  return { id, size: bytes.length };
}

export async function loadJson<T>(
  backend: Backend,
  key: MasterKey,
  type: ObjectType,
  id: string,
  verifyName = true,
): Promise<T> {
  const bytes = await backend.load(type, id);
  if (verifyName && storageId(bytes) !== id)
    throw new CorruptObjectError(`${type}/${id.slice(0, 12)} does not match its hash (damaged file)`);
  const plain = decodeObject(key, bytes, `${type}/${id.slice(0, 12)}`);
  try {
    return JSON.parse(plain.toString('utf8')) as T;
  } catch (err) {
    throw new CorruptObjectError(`${type}/${id.slice(0, 12)} holds invalid JSON`, { cause: err });
  }
}
