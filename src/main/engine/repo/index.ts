/**
 * The repository layer: keys, config, packs, the blob index, trees, snapshots, locks (leases judged
 * on the store's clock) and the maintenance record naming the one host that prunes on schedule
 * (maintenance.ts) (docs/architecture.md §2). `Repository` is the one object the backup, restore, check and
 * prune stages use.
 *
 * Guarantees: objects are immutable and written before anything refers to them (packs → index →
 * snapshot), so a crash at any moment leaves every earlier snapshot restorable; at worst it leaves
 * unreferenced packs that `check` reports and `prune` removes.
 * Not here: reading source files, chunking, scheduling (see scan/, backup/, schedule/).
 */
export * from './repository.js';
export * from './types.js';
export { BlobIndex, BlobType, type BlobLocation } from './blobIndex.js';
