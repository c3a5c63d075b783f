/**
 * The storage contract every backend implements (local folder, memory, S3, and wrappers around them).
 * Objects are immutable and addressed by (type, name). A backend never interprets their bytes.
 */
export type ObjectType =
  'config' | 'keys' | 'data' | 'index' | 'snapshots' | 'locks' | 'maintenance' | 'alarms';

export const OBJECT_TYPES: readonly ObjectType[] = [
  'config',
  'keys',
  'data',
  'index',
  'snapshots',
  'locks',
  'maintenance',
  'alarms',
];

export interface ObjectInfo {
  name: string;
  size: number;
  /** When the object was written (ms since the epoch), where the store knows it (listings). */
  modified?: number;
}

export interface SaveOptions {
  /** Fail with ObjectExistsError instead of replacing an existing object (conditional write). */
  ifNotExists?: boolean;
  /** The object need not survive a crash of this computer (a lock: it is stale after one anyway), so a
   *  local folder skips the fsyncs; it is still written atomically. */
  ephemeral?: boolean;
}

/** Options of a streamed write (Backend.openWriter). */
export interface WriterOptions extends SaveOptions {
  /** Sees every byte written, in order, in pieces of up to a stage (about 1 MiB) before they go to the
   *  store: a pack hashes itself as it is written, in few large calls. Called once more by `flush`. */
  observe?: (bytes: Buffer) => void;
  /** Bytes this store's streamed writes may hold at once (stages filling or being written), across all
   *  of its writers: the backup's memory mode sets it (pool/memory.ts). */
  inFlightBytes?: number;
}

/**
 * An object written as it is made, whose name is known only once it is whole (a data pack is named by
 * the hash of its bytes). Nothing is visible under a name until `commit`; a failed or abandoned writer
 * leaves nothing a listing shows (a crash's leftovers are removed by prune).
 */
export interface ObjectWriter {
  /** Bytes appended so far. */
  readonly size: number;
  /** Appends `data`. It is copied at once when nothing is returned, else by the time the returned
   *  promise settles (the caller keeps it valid until then); writes are kept in call order. Rejects once
   *  a write failed: the writer has then removed what it wrote. */
  write(data: Uint8Array): Promise<void> | undefined;
  /** Hands what is left to the store (`observe` sees the last bytes now, synchronously or on return). */
  flush(): Promise<void>;
  /** After `flush`: makes the object durable and visible under `name` atomically. */
  commit(name: string): Promise<void>;
  /** Gives up (after a failure, or a run that stops): removes what was written. Idempotent. */
  abort(): Promise<void>;
}

export interface Backend {
  /** Human-readable location for messages, e.g. "/mnt/usb/tidemark" or "s3:https://host/bucket/prefix". */
  readonly location: string;
  /** How many packs a backup writes at once (default 2: an object store's latency wants overlap). */
  readonly writeConcurrency?: number;
  /** Stores an object atomically: readers see either nothing or the whole object. */
  save(type: ObjectType, name: string, data: Uint8Array, options?: SaveOptions): Promise<void>;
  /** Optional: stores an object given as consecutive parts (a pack as its blobs) without copying them
   *  into one buffer first. Callers fall back to `save` of the concatenation where it is absent. */
  saveParts?(
    type: ObjectType,
    name: string,
    parts: readonly Uint8Array[],
    options?: SaveOptions,
  ): Promise<void>;
  /** Optional: writes an object as it is made, holding a few small stages instead of the whole object
   *  (a folder repository's data packs). Callers fall back to `saveParts`/`save` where it is absent. */
  openWriter?(type: ObjectType, options?: WriterOptions): ObjectWriter;
  /** Optional: the file an object is, where another thread of this process may read it itself (a
   *  folder repository's; not through a wrapper that counts, limits or alters reads). A restore's decode
   *  workers read pack ranges from it. */
  localFile?(type: ObjectType, name: string): string | undefined;
  /** Reads a whole object, or `length` bytes from `offset`. Throws NotFoundError when missing. */
  load(type: ObjectType, name: string, offset?: number, length?: number): Promise<Buffer>;
  /** Size of an object. Throws NotFoundError when missing. */
  stat(type: ObjectType, name: string): Promise<ObjectInfo>;
  /** Removes an object; removing a missing object is not an error. */
  remove(type: ObjectType, name: string): Promise<void>;
  /** Lists all objects of a type (order unspecified). */
  list(type: ObjectType): AsyncIterable<ObjectInfo>;
  /** True when the repository location holds a config object. */
  exists(): Promise<boolean>;
  /** Creates whatever the location needs (folders, bucket prefix check). Idempotent. */
  init(): Promise<void>;
  close(): Promise<void>;
  /**
   * The store's own clock: its current time in ms since the epoch, as best known (an object store:
   * our clock corrected by the Date header of its latest answer). Lock leases and prune's grace period
   * are judged on this clock, so PCs whose clocks are wrong still agree. Wrappers forward it; a
   * backend without one (local folder, memory) is judged by the local clock (offset 0).
   */
  storeNow?(): Promise<number>;
}
