/**
 * Compression of blobs with zstd. A chunk is stored compressed only when that saves at least 3%:
 * zstd gives up on random data at well over 1 GB/s, so trying costs little, and already-compressed
 * files (media, archives) are stored raw and never pay a decompression on restore.
 * The default level (src/shared/compression.ts says why) is 2.
 */
import { Compressor, Decompressor } from 'zstd-napi';
import { createRequire } from 'node:module';
import { DEFAULT_COMPRESSION_LEVEL } from '../../../shared/compression.js';

// zstd-napi's low-level binding (a CommonJS module whose exports ES imports cannot name statically)
const zstd = createRequire(import.meta.url)('zstd-napi/binding.js') as typeof import('zstd-napi/binding.js');

export const DEFAULT_LEVEL = DEFAULT_COMPRESSION_LEVEL;
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

/**
 * Which of one file's blocks, in file order, get a compression attempt. zstd gives up on random data fast
 * (~1.4 GB/s per core), yet a region of a VM disk or database holding encrypted or already-compressed
 * data makes those attempts the largest CPU cost of sealing its blocks. After MISSES blocks in a row that
 * did not compress, only every PROBE-th block is tried until one compresses again; blocks not tried are
 * stored raw (as blocks that do not compress are). At most PROBE − 1 blocks of a compressible region that
 * follows an incompressible one are stored raw before a probe finds it.
 */
export class CompressionProbe {
  static readonly MISSES = 8;
  static readonly PROBE = 8;
  private misses = 0;
  private since = 0; // blocks passed over since the last attempt

  /** Whether to try compressing the next block. */
  shouldTry(): boolean {
    if (this.misses < CompressionProbe.MISSES || ++this.since >= CompressionProbe.PROBE) {
      this.since = 0;
      return true;
    }
    return false;
  }

  /** The outcome of an attempt shouldTry asked for. */
  record(compressed: boolean): void {
    this.misses = compressed ? 0 : this.misses + 1;
  }
}

/**
 * Whether a large buffer is worth a compression attempt, judged from PROBE_SAMPLES evenly spaced 32 KiB
 * samples (an eighth of the buffer apart): true when any of them compresses. A block file's list of random
 * block IDs (8 MiB for 256 Ki blocks) does not, and zstd held the event loop several ms to find that out
 * on every incremental. A list that repeats one ID (a sparse VM disk's zero blocks) over a run
 * longer than an eighth of it has a sample in that run; shorter runs may be missed, and the list is then
 * stored raw. Buffers under 1 MiB are always tried.
 */
export function worthCompressing(data: Uint8Array, level: number): boolean {
  const W = 32 * 1024;
  if (level <= 0) return false;
  if (data.length < 1024 * 1024) return true;
  for (let k = 0; k < PROBE_SAMPLES; k++) {
    const at = Math.floor(((data.length - W) * k) / (PROBE_SAMPLES - 1));
    if (maybeCompressTransient(data.subarray(at, at + W), level).compressed) return true;
  }
  return false;
}
const PROBE_SAMPLES = 9;

export function decompress(data: Uint8Array, expectedLength: number): Buffer {
  decompressor ??= new Decompressor();
  const out = decompressor.decompress(data);
  if (out.length !== expectedLength)
    throw new Error(`decompressed ${out.length} bytes, expected ${expectedLength}`);
  return out;
}

/*
 * The pipeline's per-thread variants: the output goes into one buffer per thread that the next call
 * reuses, so a chunk costs no allocation (glibc maps every buffer over 128 KiB afresh, zeroing its
 * pages, under the engine's MALLOC_MMAP_THRESHOLD_) and compressed text is not copied out of an
 * oversized destination. The caller must be done with the result (sealed it, written it) before the
 * next call on the same thread. A thread's buffer is allocated once at its full size (KEEP_SCRATCH):
 * memory is mapped lazily, so pages nobody writes cost nothing, where growing it to each new largest
 * chunk mapped a fresh buffer (and faulted in its pages again) every time (see scratchOf).
 */
type Binding = typeof import('zstd-napi/binding.js');
let cctxs: Map<number, InstanceType<Binding['CCtx']>> | undefined;
let dctx: InstanceType<Binding['DCtx']> | undefined;
let compressScratch: Buffer | undefined;
let decompressScratch: Buffer | undefined;
/** Larger buffers (the blocks of multi-terabyte block files) are allocated per call, not kept per thread. */
const KEEP_SCRATCH = 8 * 1024 * 1024;

/**
 * A thread's reusable buffer of at least `size` bytes: `kept` when large enough, else one of `cap` bytes
 * (or `size` when larger: the caller keeps it only if it is at most `cap`). Buffer.allocUnsafe does not
 * write the memory it gets, so its pages become resident only as they are first written; a page fault
 * is the price of that first write (~10-20 µs each in the VM the benchmarks run in), and a buffer grown to
 * each new largest input paid it again for every page, each time.
 */
export function scratchOf(kept: Buffer | undefined, size: number, cap: number): Buffer {
  return kept && kept.length >= size ? kept : Buffer.allocUnsafeSlow(Math.max(size, cap));
}

/**
 * The thread's compression context for inputs of this size. zstd sizes a context's tables to its input
 * (smaller tables for each halving of an input under 16 KiB, one parameter set up to 128 KiB, another
 * above) and, when a context's workspace stays over three times what its inputs need for 128 calls, frees
 * it and maps a new one the next time a larger input comes: fresh memory, a page fault per page as the
 * tables are zeroed. One context for all inputs under 128 KiB still did that as small files of 1–16 KiB
 * came mixed (a full backup faulted tens of thousands of pages in zstd's table reset, a tenth of that with
 * a context per doubling up to 16 KiB, one up to 128 KiB and one above). Seven contexts per thread and level.
 */
function cctxFor(level: number, size: number): InstanceType<Binding['CCtx']> {
  const sizeClass =
    size <= 16 * 1024 ? Math.ceil(Math.log2(Math.max(size, 1024))) : size <= 128 * 1024 ? 20 : 21;
  const key = level * 64 + sizeClass;
  cctxs ??= new Map();
  let c = cctxs.get(key);
  if (!c) {
    c = new zstd.CCtx();
    c.setParameter(zstd.CParameter.compressionLevel, level);
    cctxs.set(key, c);
  }
  return c;
}

/** Upper bound of compressInto's output for `size` bytes of input. */
export const compressBound = (size: number): number => zstd.compressBound(size);

/**
 * Compresses `data` at `level` into `out` (which needs compressBound(data.length) bytes) with the
 * thread's context; returns the compressed length, or 0 when compression does not pay (store it raw).
 */
export function compressInto(data: Uint8Array, level: number, out: Uint8Array): number {
  if (level <= 0 || data.length < 64) return 0;
  // Compressed in full, then judged: giving zstd only the bytes the saving allows made it fail with an
  // exception on every incompressible block, which cost more than the compression (about twice the time
  // for random 8 KiB blocks; random 1 MiB chunks are no slower in full).
  const n = cctxFor(level, data.length).compress2(out, data);
  return n > Math.floor(data.length * (1 - MIN_SAVING)) ? 0 : n;
}

/** maybeCompress into the thread's reusable buffer (valid until the next call on this thread). */
export function maybeCompressTransient(data: Uint8Array, level: number): Compressed {
  const raw = () => ({ data: Buffer.from(data.buffer, data.byteOffset, data.byteLength), compressed: false });
  if (level <= 0 || data.length < 64) return raw();
  const bound = zstd.compressBound(data.length);
  let out: Buffer;
  if (bound > KEEP_SCRATCH)
    out = Buffer.allocUnsafe(bound); // a huge block: not kept for the thread
  else {
    out = compressScratch = scratchOf(compressScratch, bound, KEEP_SCRATCH);
  }
  const n = compressInto(data, level, out.subarray(0, bound));
  if (!n) return raw(); // compression does not pay
  return { data: out.subarray(0, n), compressed: true };
}

/** decompress into the thread's reusable buffer (valid until the next call on this thread). */
export function decompressTransient(data: Uint8Array, expectedLength: number): Buffer {
  dctx ??= new zstd.DCtx();
  let out: Buffer;
  if (expectedLength > KEEP_SCRATCH) out = Buffer.allocUnsafe(expectedLength);
  else {
    out = decompressScratch = scratchOf(decompressScratch, expectedLength, KEEP_SCRATCH);
  }
  const n = dctx.decompress(out.subarray(0, expectedLength), data);
  if (n !== expectedLength) throw new Error(`decompressed ${n} bytes, expected ${expectedLength}`);
  return out.subarray(0, n);
}
