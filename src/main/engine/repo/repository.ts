/**
 * Repository: opens a backend with a password and offers blobs, trees, snapshots, index and locks.
 * Writing: sealed blobs go into pack builders (data and trees in separate packs, so tree packs stay
 * small and cacheable); full packs are uploaded with bounded concurrency; `flush` uploads what is left
 * and writes one index file for everything uploaded since the last flush. Only then may a snapshot
 * that refers to those blobs be saved (`saveSnapshot` flushes first).
 */
import crypto from 'node:crypto';
import type { Backend } from '../backend/types.js';
import { blobId, newMasterKey, storageId, type MasterKey } from '../crypto/index.js';
import { maybeCompress, decompress, worthCompressing, DEFAULT_LEVEL } from '../compress/index.js';
import { DEFAULT_CHUNKER, type ChunkerParams } from '../chunk/index.js';
import {
  CorruptObjectError,
  NotFoundError,
  RepoExistsError,
  RepoNotFoundError,
  TidemarkError,
  UnsupportedVersionError,
  addContext,
} from '../errors.js';
import { openKey, writeKey, listKeys, type KeyInfo } from './keys.js';
import { decodeObject, encodeObject, loadJson, saveJson } from './objects.js';
import { BlobIndex, BlobType, type BlobLocation } from './blobIndex.js';
import { encodeIndex, addIndexFile, indexEntryCount, type IndexPack } from './indexFile.js';
import {
  PackBuilder,
  PackStream,
  openBlob,
  sealBlob,
  savePack,
  DEFAULT_PACK_SIZE,
  type PackedBlob,
} from './pack.js';
import { decodeTree, encodeTree, joinBlockList } from './tree.js';
import { acquireLock, type RepoLock } from './lock.js';
import type { ID, Snapshot, SnapshotEntry, Tree, TreeNode } from './types.js';
import { listDismissals, type AlarmDismissal } from './holds.js';
import {
  assertMayDelete,
  enforceImmutability,
  newImmutability,
  unlockMaintenance,
  type Immutability,
  type ImmutabilityOptions,
  lockingStore,
} from './immutability.js';

export const FORMAT_VERSION = 1;
/** Packs a backup writes at once where its backend does not say (Backend.writeConcurrency): an object
 *  store's latency wants overlap. */
export const DEFAULT_PACK_WRITES = 2;
/** Streamed data packs (PackStream) being finished at once (header, sync, rename) while the next fills:
 *  they hold no buffer (their stages are the store's, bounded by bytes in flight), only a file. */
const STREAMED_PACKS_FINISHING = 2;
/**
 * What the trees a repository keeps loaded may weigh in all, in entries (files, folders: ~400 bytes of
 * JavaScript objects each; a block file's list counts as its bytes / 800 more, so one list of 512 Ki
 * blocks, 16 MiB, fits). A larger cache mostly held trees a no-change backup's walk never asks for
 * again (each counted ~4× with V8's heap growth), raising a million-file backup's peak RSS by almost half;
 * this one costs no measurable speed there nor in a restore (each tree is read once; tree packs stay
 * cached where a range read costs a request, see treePackOf).
 */
const TREE_CACHE_WEIGHT = 24_000;

function treeWeight(tree: Tree): number {
  let w = tree.nodes.length;
  for (const n of tree.nodes) if (n.blockIds) w += Math.ceil(n.blockIds.length / 800);
  return w;
}

export interface RepoConfig {
  version: number;
  id: string;
  created: string;
  chunker: ChunkerParams;
  chunkerSeed: string;
  compressionLevel: number;
  packSize: number;
  /** S3 object lock and/or append-only (immutability.ts); absent: neither. */
  immutability?: Immutability;
}

export interface InitOptions extends ImmutabilityOptions {
  chunker?: Partial<ChunkerParams>;
  compressionLevel?: number;
  packSize?: number;
  /** Lower scrypt cost for tests only. */
  kdf?: { N?: number; r?: number; p?: number };
}

export interface RepoStats {
  storedBytes: number;
  /** Bytes sealed into packs so far (uploaded or about to be): moves smoothly, for progress. */
  packedBytes: number;
  newBlobs: number;
  newBytes: number;
}

/**
 * Lends the buffers of sealed blobs (a backup's workers seal into buffers they want back: pool/ledger.ts
 * implements this). The pack writer takes a hold on a blob's buffer while a pack refers to it.
 */
export interface BufferLender {
  /** Takes one more hold on `buffer` if it is lent (held); false, taking nothing, if not. */
  retain(buffer: ArrayBufferLike): boolean;
  release(buffer: ArrayBufferLike): void;
}

export class Repository {
  /** Blobs per index file written during a long backup. */
  static indexEvery = 20_000;
  index = new BlobIndex();
  private indexLoaded = false;
  private indexLoading?: Promise<void>;
  readonly indexFiles = new Set<string>();
  /** Index files that could not be read: their blobs count as absent (re-uploaded, or reported by check). */
  readonly indexErrors: { name: string; message: string }[] = [];
  /** Blob IDs (hex) accepted for writing but not yet in an uploaded pack. */
  private readonly pending = new Set<string>();
  private readonly builders = new Map<BlobType, PackBuilder | PackStream>();
  /** The lent buffers each open pack keeps views of (addSealedBlob's `lender`), released once it is written. */
  private readonly lent = new Map<PackBuilder, { lender: BufferLender; buffer: ArrayBufferLike }[]>();
  private readonly uploads = new Set<Promise<void>>();
  /** While a full pack waits for an upload slot (see uploadPack): blobs wait for it too. */
  private slotWait?: Promise<void>;
  /** Data packs held in memory at once (gathered in their buffers, ~20 MiB each: repo/pack.ts), the one
   *  filling included. Unset: as many as the backend writes at once, and one filling meanwhile; 1: the
   *  next pack waits until the last one is written (BackupOptions.memory 'low'). */
  packBuffers: number | undefined;
  /** Where data packs are written as they fill (Backend.openWriter): the bytes their writes may hold at
   *  once (BackupOptions.memory; unset: the store's default). packBuffers does not apply to them. */
  packWriteBytes: number | undefined;
  /** Streamed data packs being finished (see STREAMED_PACKS_FINISHING). */
  private readonly finishing = new Set<Promise<void>>();
  /** Data packs started since the last flush (see packTarget). */
  private dataPacksSinceFlush = 0;
  private uploadError?: unknown;
  private unindexed: IndexPack[] = [];
  private unindexedBlobs = 0;
  /** Recently loaded trees and their weights, up to TREE_CACHE_WEIGHT in all (see loadTree). */
  private readonly treeCache = new Map<string, { tree: Tree; weight: number }>();
  private treeCacheWeight = 0;
  /** Tree packs read whole (see treePackOf): the last few, and how often each pack was asked for. */
  private readonly treePacks = new Map<string, Promise<Buffer | undefined>>();
  private readonly treePackReads = new Map<string, number>();
  readonly stats: RepoStats = { storedBytes: 0, packedBytes: 0, newBlobs: 0, newBytes: 0 };

  private constructor(
    readonly backend: Backend,
    readonly key: MasterKey,
    readonly config: RepoConfig,
    readonly keyId: string,
  ) {}

  static async init(backend: Backend, password: string, opts: InitOptions = {}): Promise<Repository> {
    const immutability = await newImmutability(backend, opts, password, opts.kdf);
    await backend.init();
    if (await backend.exists()) throw new RepoExistsError(backend.location);
    if (immutability?.objectLock) await lockingStoreOf(backend).verifyObjectLock();
    const master = newMasterKey();
    const config: RepoConfig = {
      version: FORMAT_VERSION,
      id: crypto.randomBytes(16).toString('hex'),
      created: new Date().toISOString(),
      chunker: { ...DEFAULT_CHUNKER, ...opts.chunker },
      chunkerSeed: crypto.randomBytes(32).toString('hex'),
      compressionLevel: opts.compressionLevel ?? DEFAULT_LEVEL,
      packSize: opts.packSize ?? DEFAULT_PACK_SIZE,
      ...(immutability ? { immutability } : {}),
    };
    const keyId = await writeKey(backend, master, password, opts.kdf);
    await backend.save('config', 'config', encodeObject(master, Buffer.from(JSON.stringify(config))), {
      ifNotExists: true,
    });
    return new Repository(enforceImmutability(backend, immutability), master, config, keyId);
  }

  static async open(backend: Backend, password: string): Promise<Repository> {
    if (!(await backend.exists())) throw new RepoNotFoundError(backend.location);
    const { master, keyId } = await openKey(backend, password);
    const config = JSON.parse(
      decodeObject(master, await backend.load('config', 'config'), 'config').toString('utf8'),
    ) as RepoConfig;
    if (config.version !== FORMAT_VERSION) throw new UnsupportedVersionError(config.version);
    return new Repository(enforceImmutability(backend, config.immutability), master, config, keyId);
  }

  // ---- immutability (immutability.ts) ------------------------------------------------------

  /** Whether this repository's history is protected (S3 object lock, append-only). */
  get immutability(): Immutability | undefined {
    return this.config.immutability;
  }

  /** Append-only: checks the maintenance password and allows prune, forget and key changes from now on. */
  unlockMaintenance(password: string): Promise<void> {
    return unlockMaintenance(this.backend, this.config.immutability, password);
  }

  /** Throws AppendOnlyError when `what` would delete from an append-only repository not unlocked. */
  assertMayDelete(what: string): void {
    assertMayDelete(this.backend, this.config.immutability, what);
  }

  // ---- keys -------------------------------------------------------------------------------

  addKey(password: string, kdf?: InitOptions['kdf']): Promise<string> {
    return writeKey(this.backend, this.key, password, kdf);
  }

  listKeys(): Promise<KeyInfo[]> {
    return listKeys(this.backend);
  }

  async removeKey(id: string): Promise<void> {
    this.assertMayDelete('removing a key');
    const keys = await this.listKeys();
    const match = keys.filter((k) => k.id.startsWith(id));
    if (match.length !== 1) throw new NotFoundError(`key ${id}`);
    if (match[0].id === this.keyId)
      throw new TidemarkError(
        'KEY_IN_USE',
        'cannot remove the key that opened the repository; use "key passwd" to change it',
      );
    if (keys.length === 1) throw new TidemarkError('LAST_KEY', 'cannot remove the last key');
    await this.backend.remove('keys', match[0].id);
  }

  /** Replaces the key that opened the repository with one for a new password. */
  async changePassword(password: string, kdf?: InitOptions['kdf']): Promise<string> {
    this.assertMayDelete('changing the password (its old key is removed)');
    const id = await writeKey(this.backend, this.key, password, kdf);
    await this.backend.remove('keys', this.keyId);
    (this as { keyId: string }).keyId = id;
    return id;
  }

  // ---- index ------------------------------------------------------------------------------

  /**
   * Loads the index files. With `refresh`, an already loaded index picks up index files other writers
   * added since (and starts over when a prune elsewhere removed some, since packs may have moved).
   */
  async loadIndex(refresh = false): Promise<void> {
    if (this.indexLoaded && !refresh) return;
    if (this.indexLoading) return this.indexLoading;
    this.indexLoading = (async () => {
      const names: string[] = [];
      for await (const o of this.backend.list('index')) names.push(o.name);
      const listed = new Set(names);
      if ([...this.indexFiles].some((n) => !listed.has(n))) this.invalidateIndex();
      const known = new Set(this.indexErrors.map((e) => e.name));
      await mapLimit(names, 8, async (name) => {
        if (this.indexFiles.has(name) || known.has(name)) return;
        try {
          const raw = await this.backend.load('index', name);
          const what = `index/${name.slice(0, 12)}`;
          const plain = decodeObject(this.key, raw, what);
          // (a damaged file adds nothing: addIndexFile checks it whole first; addAt copies the ID)
          this.index.reserve(this.index.size + indexEntryCount(plain, what));
          addIndexFile(plain, what, this.index);
          this.indexFiles.add(name);
        } catch (err) {
          if (err instanceof NotFoundError) return; // replaced by a concurrent prune
          if (!(err instanceof CorruptObjectError)) throw err;
          this.indexErrors.push({ name, message: err.message });
        }
      });
      this.indexLoaded = true;
    })().finally(() => (this.indexLoading = undefined));
    await this.indexLoading;
  }

  /** Whether the index is loaded (the first use that needs it loads it). */
  get indexIsLoaded(): boolean {
    return this.indexLoaded;
  }

  /** Forgets the loaded index (after prune replaced index files); the next use reloads it. */
  invalidateIndex(): void {
    this.index = new BlobIndex();
    this.indexLoaded = false;
    this.indexLoading = undefined;
    this.indexFiles.clear();
    this.indexErrors.length = 0;
    this.treeCache.clear();
    this.treeCacheWeight = 0;
    this.treePacks.clear();
    this.treePackReads.clear();
  }

  /** True when the blob is stored or being stored. */
  hasBlob(id: string): boolean {
    return this.pending.has(id) || this.index.has(id);
  }

  /**
   * Claims a blob for writing: returns true when the caller must store it (it is neither stored nor
   * claimed), false when it is a duplicate. Claims are synchronous, so concurrent workers never both
   * store the same chunk.
   */
  claimBlob(id: string): boolean {
    if (this.hasBlob(id)) return false;
    this.pending.add(id);
    return true;
  }

  /**
   * Adds a sealed blob (from sealBlob) to the pack of its type; uploads the pack when full. With a
   * `lender` (the backup's buffer ledger, pool/ledger.ts), a blob that stays a view of its buffer in the
   * pack (one too large to copy into the pack's own) keeps that buffer held until the pack is written.
   */
  async addSealedBlob(
    type: BlobType,
    id: Buffer,
    sealed: Buffer,
    rawLength: number,
    compressed: boolean,
    lender?: BufferLender,
  ): Promise<void> {
    if (this.uploadError) throw this.uploadError;
    // A full pack waiting for its upload slot holds its buffer (~20 MiB); blobs added meanwhile would
    // start the next pack, and the next, one per sealer that found its pack full: wait with them instead.
    while (this.slotWait) await this.slotWait;
    let b = this.builders.get(type);
    const stream = type === BlobType.Data && !!this.backend.openWriter;
    // a new data pack takes its buffer only while fewer than packBuffers - 1 are being written
    if (type === BlobType.Data && !b?.count && !stream && this.packBuffers !== undefined)
      while (this.uploads.size && this.uploads.size >= this.packBuffers - 1) await Promise.race(this.uploads);
    if (stream && !b?.count)
      while (this.finishing.size >= STREAMED_PACKS_FINISHING) await Promise.race(this.finishing);
    b = this.builders.get(type);
    if (!b) {
      // data packs are streamed to the store where it can (PackStream), else gathered in one buffer (see
      // PackBuilder); trees are few and sealed here, not moved
      b = stream
        ? new PackStream(
            this.key,
            (options) => this.backend.openWriter!('data', { ...options, inFlightBytes: this.packWriteBytes }),
            this.packTarget(type),
          )
        : new PackBuilder(
            this.key,
            this.packTarget(type),
            type === BlobType.Data ? this.config.packSize : undefined,
          );
      this.builders.set(type, b);
    }
    if (b instanceof PackStream) {
      // copied into the store's stages (at once, or once one is free): the caller's buffer is not kept
      const copied = b.add(id, type, compressed, rawLength, sealed);
      this.counted(sealed.length, rawLength);
      if (b.full) {
        this.dataPacksSinceFlush++;
        this.finishStream(b);
        b.targetSize = this.packTarget(type);
      }
      if (copied)
        await copied.catch((err: unknown) => {
          throw this.streamFailed(err);
        });
      return;
    }
    if (b.add(id, type, compressed, rawLength, sealed) && lender?.retain(sealed.buffer)) {
      let lent = this.lent.get(b);
      if (!lent) this.lent.set(b, (lent = []));
      lent.push({ lender, buffer: sealed.buffer });
    }
    this.counted(sealed.length, rawLength);
    if (b.full) {
      if (type === BlobType.Data) this.dataPacksSinceFlush++;
      await this.uploadPack(b);
      b.targetSize = this.packTarget(type);
    }
  }

  private counted(stored: number, raw: number): void {
    this.stats.packedBytes += stored;
    this.stats.newBlobs++;
    this.stats.newBytes += raw;
  }

  /** The first failure of a streamed pack (reported by its writes and its finish alike: context once).
   *  A named error (the destination is full, unwritable) says what it was writing itself. */
  private streamFailed(err: unknown): unknown {
    this.uploadError ??= err instanceof TidemarkError ? err : addContext('writing a data pack', err);
    return this.uploadError;
  }

  /** Finishes a streamed pack in the background (header, sync, rename: PackStream.finish); the next
   *  pack fills meanwhile. Its blobs are indexed once it is whole under its name. */
  private finishStream(b: PackStream): void {
    if (b.count === 0) return;
    const p: Promise<void> = b
      .finish()
      .then(({ id, size, blobs }) => {
        this.stats.storedBytes += size;
        this.registerPack(id, blobs);
      })
      .catch((err) => {
        this.streamFailed(err);
      })
      .finally(() => {
        this.uploads.delete(p);
        this.finishing.delete(p);
      });
    this.uploads.add(p);
    this.finishing.add(p);
  }

  /**
   * How large the next pack of this type may grow. Data packs start at 4 MiB and double every second
   * pack up to the configured size (16 MiB): an incremental's few tens of MB reach the disk while it is
   * still reading, instead of mostly after its last read (at 16 MiB from the start, a block-tracked night
   * wrote nearly all of its packs at the end); a full backup's first 24 MiB take four packs instead of
   * two. Trees: 4 MiB.
   */
  private packTarget(type: BlobType): number {
    const full = this.config.packSize;
    if (type === BlobType.Tree) return Math.min(4 * 1024 * 1024, full);
    return Math.min(full, 4 * 1024 * 1024 * 2 ** Math.floor(this.dataPacksSinceFlush / 2));
  }

  /** Compresses, seals and stores a blob from its plaintext (main-thread path for trees and small data). */
  async saveBlob(type: BlobType, plain: Buffer): Promise<string> {
    const idBuf = blobId(this.key.id, plain);
    const id = idBuf.toString('hex');
    if (!this.claimBlob(id)) return id;
    // Large trees (a block file's list of up to 512 Ki IDs) compress at level 1: random IDs gain nothing
    // from level 3, which would hold the event loop ~4× longer. Whether to try at all is judged from
    // samples (worthCompressing): a mostly empty VM disk lists the same zero-block ID over and over, which
    // compresses a thousandfold.
    const level =
      type === BlobType.Tree && plain.length > 1024 * 1024
        ? Math.min(1, this.config.compressionLevel)
        : this.config.compressionLevel;
    const c = worthCompressing(plain, level)
      ? maybeCompress(plain, level)
      : { data: plain, compressed: false };
    await this.addSealedBlob(type, idBuf, sealBlob(this.key, idBuf, c.data), plain.length, c.compressed);
    return id;
  }

  private async uploadPack(b: PackBuilder | PackStream): Promise<void> {
    if (b instanceof PackStream) return this.finishStream(b);
    if (b.count === 0) return;
    // Take the pack's contents at once, so blobs added while this waits for an upload slot start a new
    // pack (a full pack never grows, and no caller uploads an empty one).
    const { id, parts, size, blobs, release: releasePack } = b.finish();
    const lent = this.lent.get(b);
    this.lent.delete(b);
    const release = () => {
      releasePack();
      lent?.forEach(({ lender, buffer }) => lender.release(buffer));
    };
    while (this.uploads.size >= (this.backend.writeConcurrency ?? DEFAULT_PACK_WRITES)) {
      if (!this.slotWait) {
        const wait: Promise<void> = Promise.race(this.uploads).finally(() => {
          if (this.slotWait === wait) this.slotWait = undefined;
        });
        this.slotWait = wait;
      }
      await this.slotWait;
    }
    if (this.uploadError) {
      release();
      throw this.uploadError;
    }
    const p = savePack(this.backend, id, parts)
      .then(() => {
        this.stats.storedBytes += size;
        this.registerPack(id, blobs);
      })
      .catch((err) => {
        this.uploadError ??= addContext(`writing pack ${id.slice(0, 12)}`, err);
      })
      .finally(() => {
        release(); // the pack's bytes are written (or failed): its parts are free
        this.uploads.delete(p);
      });
    this.uploads.add(p);
  }

  private registerPack(pack: string, blobs: PackedBlob[]): void {
    const entry: IndexPack = { pack, blobs: [] };
    for (const b of blobs) {
      const loc: BlobLocation = {
        pack,
        offset: b.offset,
        length: b.length,
        rawLength: b.rawLength,
        type: b.type,
        compressed: b.compressed,
      };
      this.index.add(b.id, loc);
      this.pending.delete(b.id.toString('hex'));
      entry.blobs.push({ id: b.id, loc });
    }
    this.unindexedBlobs += entry.blobs.length;
    this.unindexed.push(entry);
    // A long backup writes its index as it goes: memory stays flat, and after a crash the uploaded packs
    // are already indexed (the next backup does not upload them again).
    if (this.unindexedBlobs >= Repository.indexEvery) {
      const packs = this.unindexed;
      this.unindexed = [];
      this.unindexedBlobs = 0;
      const p: Promise<void> = this.saveIndexFile(packs)
        .then(({ id, size }) => {
          this.indexFiles.add(id);
          this.stats.storedBytes += size;
        })
        .catch((err) => {
          this.uploadError ??= addContext('writing an index file', err);
        })
        .finally(() => this.uploads.delete(p));
      this.uploads.add(p);
    }
  }

  /** Uploads every open pack, waits for all uploads, and writes an index file for them. */
  async flush(): Promise<void> {
    this.dataPacksSinceFlush = 0; // the next backup starts with small packs again
    for (const [type, b] of this.builders) {
      await this.uploadPack(b);
      b.targetSize = this.packTarget(type);
    }
    while (this.uploads.size) await Promise.all([...this.uploads]); // finished uploads may start index writes
    if (this.uploadError) throw this.uploadError;
    if (this.unindexed.length) {
      const packs = this.unindexed;
      this.unindexed = [];
      this.unindexedBlobs = 0;
      const { id, size } = await this.saveIndexFile(packs);
      this.indexFiles.add(id);
      this.stats.storedBytes += size;
    }
  }

  async saveIndexFile(packs: IndexPack[]): Promise<{ id: string; size: number }> {
    const bytes = encodeObject(this.key, encodeIndex(packs));
    const id = storageId(bytes);
    await this.backend.save('index', id, bytes);
    return { id, size: bytes.length };
  }

  // ---- blobs and trees --------------------------------------------------------------------

  /** Loads the stored (sealed) bytes of a blob. */
  async loadSealedBlob(id: string): Promise<{ sealed: Buffer; loc: BlobLocation }> {
    await this.loadIndex();
    const loc = this.index.get(id);
    if (!loc) throw new CorruptObjectError(`blob ${id.slice(0, 12)} is missing from the index`);
    if (loc.type === BlobType.Tree) {
      const whole = await this.treePackOf(loc.pack);
      if (whole && whole.length >= loc.offset + loc.length)
        return { sealed: whole.subarray(loc.offset, loc.offset + loc.length), loc };
    }
    const sealed = await this.backend.load('data', loc.pack, loc.offset, loc.length).catch((err) => {
      throw addContext(`reading pack ${loc.pack.slice(0, 12)}`, err);
    });
    if (sealed.length !== loc.length)
      throw new CorruptObjectError(`pack ${loc.pack.slice(0, 12)} is shorter than its index says`);
    return { sealed, loc };
  }

  /**
   * A pack of trees read whole once several of its trees were asked for: a restore or a walk of a
   * snapshot reads hundreds of trees that one backup wrote into the same pack (the bench dataset's 324
   * trees are one 2.6 MiB pack), and one read beats hundreds of small ones (locally an open, a read and
   * a close each; on S3 a request each). The first three trees of a pack are read alone, so opening one
   * folder of an old snapshot does not fetch a whole pack; packs over 8 MiB are never read whole; the
   * last four are kept (≤ 32 MiB). A failed whole read falls back to reading the tree alone. Not for a
   * pack that is a local file (Backend.localFile: a folder repository's): a range of it costs a read, and
   * the packs kept grew with the snapshot (a 300,000-file restore held 13.5 MiB of them).
   */
  private treePackOf(pack: string): Promise<Buffer | undefined> | undefined {
    if (this.backend.localFile?.('data', pack) !== undefined) return undefined;
    const cached = this.treePacks.get(pack);
    if (cached) {
      this.treePacks.delete(pack); // most recently used last
      this.treePacks.set(pack, cached);
      return cached;
    }
    const reads = (this.treePackReads.get(pack) ?? 0) + 1;
    if (this.treePackReads.size > 10_000) this.treePackReads.clear();
    this.treePackReads.set(pack, reads);
    const extent = this.index.packExtent(pack);
    if (reads < 4 || extent === undefined || extent > 8 * 1024 * 1024) return undefined;
    const whole = this.backend.load('data', pack, 0, extent).then(
      (b) => Buffer.from(b), // a tight copy: a reused buffer (bufferPool.ts) may be much larger
      () => {
        this.treePacks.delete(pack);
        return undefined;
      },
    );
    this.treePacks.set(pack, whole);
    if (this.treePacks.size > 4) this.treePacks.delete(this.treePacks.keys().next().value!);
    return whole;
  }

  /** Decrypts, decompresses and verifies a blob read from a pack. */
  decodeBlob(id: string, sealed: Buffer, loc: BlobLocation): Buffer {
    const idBuf = Buffer.from(id, 'hex');
    let plain: Buffer;
    try {
      plain = openBlob(this.key, idBuf, sealed);
      if (loc.compressed) plain = decompress(plain, loc.rawLength);
    } catch (err) {
      throw new CorruptObjectError(`blob ${id.slice(0, 12)} in pack ${loc.pack.slice(0, 12)} is damaged`, {
        cause: err,
      });
    }
    if (!blobId(this.key.id, plain).equals(idBuf))
      throw new CorruptObjectError(
        `blob ${id.slice(0, 12)} in pack ${loc.pack.slice(0, 12)} does not match its ID`,
      );
    return plain;
  }

  async loadBlob(id: string): Promise<Buffer> {
    const { sealed, loc } = await this.loadSealedBlob(id);
    return this.decodeBlob(id, sealed, loc);
  }

  /**
   * A tree, its block lists in two parts joined (tree.ts) — unless `joinLists` is false: the backup's walk
   * needs only a previous list's parts (such trees are not cached; cached trees are always joined).
   * `cache: false` leaves the tree out of the cache (a restore's walk reads each tree once: kept in the
   * cache, every tree's nodes outlived two young-generation GCs and were copied by both).
   */
  async loadTree(id: ID, opts: { joinLists?: boolean; cache?: boolean } = {}): Promise<Tree> {
    const cached = this.treeCache.get(id);
    if (cached) return cached.tree;
    const tree = decodeTree(await this.loadBlob(id), `tree ${id.slice(0, 12)}`);
    const inParts = tree.nodes.filter((n) => n.blockBase !== undefined && !n.blockIds);
    if (inParts.length && opts.joinLists === false) return tree;
    for (const n of inParts) await this.joinBlockList(n, `tree ${id.slice(0, 12)}`);
    if (opts.cache === false) return tree;
    // Bounded by weight, not trees: a count of trees let a no-change backup of 1,000,000 files in 10,500
    // folders keep every folder's tree, hundreds of MiB.
    const weight = treeWeight(tree);
    if (weight <= TREE_CACHE_WEIGHT && !this.treeCache.has(id)) {
      for (const [old, t] of this.treeCache) {
        if (this.treeCacheWeight + weight <= TREE_CACHE_WEIGHT) break;
        this.treeCache.delete(old);
        this.treeCacheWeight -= t.weight;
      }
      this.treeCache.set(id, { tree, weight });
      this.treeCacheWeight += weight;
    }
    return tree;
  }

  /** Sets a node's blockIds from its list's two parts (loads the base; tree.ts). */
  async joinBlockList(n: TreeNode, where = 'a tree'): Promise<void> {
    if (n.blockBase === undefined || n.blockIds) return;
    const what = `${where}, ${JSON.stringify(n.name)}`;
    const base = await this.loadBlob(n.blockBase).catch((err: Error) => {
      throw new CorruptObjectError(`${what}: its base block list cannot be read (${err.message})`);
    });
    n.blockIds = joinBlockList(n, base, what);
  }

  saveTree(tree: Tree): Promise<ID> {
    return this.saveBlob(BlobType.Tree, encodeTree(tree));
  }

  // ---- snapshots --------------------------------------------------------------------------

  async saveSnapshot(snapshot: Snapshot): Promise<ID> {
    await this.flush();
    const { id, size } = await saveJson(this.backend, this.key, 'snapshots', snapshot);
    this.stats.storedBytes += size;
    return id;
  }

  /**
   * The snapshots, oldest first. A damaged snapshot file (CorruptObjectError) fails the listing, as
   * pruning and retention need every snapshot to know what is still used; a caller that only browses
   * or looks for a parent passes `damaged` instead: the damaged ones are handed to it and left out.
   */
  async listSnapshots(
    opts: { damaged?: (id: ID, err: CorruptObjectError) => void } = {},
  ): Promise<SnapshotEntry[]> {
    const names: string[] = [];
    for await (const o of this.backend.list('snapshots')) names.push(o.name);
    const out: SnapshotEntry[] = [];
    await mapLimit(names, 8, async (name) => {
      try {
        out.push({ ...(await loadJson<Snapshot>(this.backend, this.key, 'snapshots', name)), id: name });
      } catch (err) {
        if (err instanceof NotFoundError) return; // removed meanwhile by forget
        if (err instanceof CorruptObjectError && opts.damaged) return opts.damaged(name, err);
        throw err;
      }
    });
    // by code unit: ISO times and hex IDs sort so, and localeCompare's first call builds an ICU collator
    // (~20 ms of a restore's start, before it can plan anything)
    return out.sort((a, b) => codeUnitOrder(a.time, b.time) || codeUnitOrder(a.id, b.id));
  }

  /** Loads a snapshot by full ID, unique prefix, or "latest". */
  async loadSnapshot(ref: string): Promise<SnapshotEntry> {
    if (ref === 'latest') {
      const all = await this.listSnapshots();
      if (!all.length) throw new NotFoundError('snapshot "latest" (the repository has no snapshots)');
      return all[all.length - 1];
    }
    if (/^[0-9a-f]{64}$/.test(ref))
      return { ...(await loadJson<Snapshot>(this.backend, this.key, 'snapshots', ref)), id: ref };
    const matches: string[] = [];
    for await (const o of this.backend.list('snapshots')) if (o.name.startsWith(ref)) matches.push(o.name);
    if (matches.length === 0) throw new NotFoundError(`snapshot ${ref}`);
    if (matches.length > 1)
      throw new TidemarkError('AMBIGUOUS', `snapshot prefix ${ref} is ambiguous (${matches.length} matches)`);
    return this.loadSnapshot(matches[0]);
  }

  /** The dismissals of mass-change alarms (holds.ts). */
  listDismissals(): Promise<AlarmDismissal[]> {
    return listDismissals(this);
  }

  async removeSnapshot(id: ID): Promise<void> {
    await this.backend.remove('snapshots', id);
  }

  // ---- locks ------------------------------------------------------------------------------

  /** Takes a repository lock, waiting up to `waitMs` for a conflicting one to go away. */
  lock(exclusive: boolean, purpose: string, leaseMs?: number, waitMs?: number): Promise<RepoLock> {
    return acquireLock(this.backend, this.key, { exclusive, purpose, leaseMs, waitMs });
  }

  async close(): Promise<void> {
    // a pack still filling (a run that stopped without flushing) leaves no file behind
    for (const b of this.builders.values()) if (b instanceof PackStream) await b.abort();
    await Promise.allSettled(this.uploads);
    await this.backend.close();
  }
}

export async function mapLimit<T>(
  items: T[],
  limit: number,
  fn: (item: T, i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const run = async () => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, run));
}

export const initRepository = Repository.init;
export const openRepository = Repository.open;

/** Orders two strings by their UTF-16 code units (what `<` compares), not by a locale's collation. */
function codeUnitOrder(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function lockingStoreOf(backend: Backend) {
  const store = lockingStore(backend);
  if (!store) throw new TidemarkError('INTERNAL', 'object lock without a locking store');
  return store;
}
