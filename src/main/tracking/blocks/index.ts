// Block-level change tracking (docs/architecture.md §3, level 1), Linux only.
//
// What it does: an eBPF program (native/cbt) records every data-changing request that reaches the block
// layer of the disks holding a job's sources, into a bitmap per whole disk (4 KiB blocks by default). At each
// backup the filesystems are synced, the generation is swapped atomically and recorded in a durable per-disk,
// per-job store (store.ts); each large file's extent map (FIEMAP) is compared with its map at the last
// backup and overlaid on the written blocks, giving the byte ranges that may have changed (ranges.ts). The
// engine then reads only those ranges (ChangeHint.changedRanges).
//
// How a caller uses it (the job runner):
//   const t = await BlockTracker.start(sources, { pin: 'tidemark' });   // once, at app start; or a reason
//   const s = await BlockChangeSession.begin(sources, { dir, consumer: jobId, tracker, mapper: native,
//                                                       parentSnapshot, log });
//   const changedRanges = await computeChangedRanges(largeFiles, s, { minSize, onWholeFile: (f, why) => log(…),
//                                   spread: { window: chunker.avg, maxFraction: 0.5 } });
//   … backup(repo, { changeHint: { …, changedRanges }, parent: parentSnapshot }) …
//   await s.commit(result.snapshotId, filesTheBackupRead);               // only after the snapshot is saved
//
// What it guarantees: a file is given ranges only when continuity is proven — same boot, same tracker
// session (a pinned tracker survives app restarts), no missing generation, no write the kernel could not
// place, same disk (diskseq), same mount instance, UUID and partition offset, same inode and generation, a
// baseline recorded by the very parent snapshot, and an extent map with only plain, unwritten or merged
// extents on ext2/3/4 or xfs. Everything else is "read the whole file", with the reason logged. A slower
// incremental is acceptable; a wrong one is not.
//
// What it deliberately does not do: track btrfs, network, FUSE or DAX filesystems; survive a reboot (the
// kernel state does not); see writes made to a loop image's backing file behind the loop device's back.
export { BlockBitmap } from './bitmap.js';
export {
  BlockTracker,
  chooseBlockShift,
  type BlockDelta,
  type ChangedBlockSource,
  type TrackerOptions,
  type TrackerStart,
} from './tracker.js';
export {
  BlockChangeSession,
  computeChangedRanges,
  windowsTouched,
  type BeginOptions,
  type ComputeOptions,
  type FileMapper,
  type StoreBody,
} from './store.js';
export { changedRangesBetween, type ByteRange, type ExtentTuple, type RangesDecision } from './ranges.js';
export {
  resolveFilesystem,
  filesystemUnsupportedReason,
  type FilesystemInfo,
  type DiskInfo,
} from './device.js';
export { loadCbtNative, type CbtNative } from './native.js';
