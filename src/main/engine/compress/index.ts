/**
 * Compression of blobs with zstd. A chunk is stored compressed only when that saves at least 3%:
 * zstd gives up on random data at well over 1 GB/s, so trying costs little, and already-compressed
 * files (media, archives) are stored raw and never pay a decompression on restore.
 * The default level is 3: see bench/ (level 1 is ~1.6x faster but stores ~8% more on text).
 */
import { Compressor, Decompressor } from 'zstd-napi';

export const DEFAULT_LEVEL = 3;
const MIN_SAVING = 0.03;

const compressors = new Map<number, Compressor>();
let decompressor: Decompressor | undefined;

export interface Compressed {
  data: Buffer;
  compressed: boolean;
}

/** Compresses `data` at `level` (0: never) and returns it raw when compression does not pay. */
export function maybeCompress(data: Uint8Array, level: number): Compressed {
  if (level <= 0 || data.length < 64)
    return { data: Buffer.from(data.buffer, data.byteOffset, data.byteLength), compressed: false };
  let c = compressors.get(level);
  if (!c) {
    c = new Compressor();
    c.setParameters({ compressionLevel: level });
    compressors.set(level, c);
  }
  const out = c.compress(data);
  if (out.length <= data.length * (1 - MIN_SAVING)) return { data: out, compressed: true };
  return { data: Buffer.from(data.buffer, data.byteOffset, data.byteLength), compressed: false };
}

export function decompress(data: Uint8Array, expectedLength: number): Buffer {
  decompressor ??= new Decompressor();
  const out = decompressor.decompress(data);
  if (out.length !== expectedLength)
    throw new Error(`decompressed ${out.length} bytes, expected ${expectedLength}`);
  return out;
}
