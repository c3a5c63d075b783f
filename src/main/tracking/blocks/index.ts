// Block-level change tracking (DESIGN.md §3, level 1), Linux only.
//
// What it does: an eBPF program (native/cbt) records every write reaching the block layer of the disks that
// hold a job's sources; at each backup the filesystems are synced, the generation is swapped atomically and
// recorded in a durable per-disk, per-job store (store.ts); each large file's extent map (FIEMAP) is compared
// with its map at the last backup and overlaid on the written blocks, giving the byte ranges that may have
// changed (ranges.ts). The engine reads only those ranges (ChangeHint.changedRanges).
//
// What it guarantees: a file is given ranges only when continuity is proven — same boot, same tracker
// session, no missing generation, no unplaceable write, same filesystem mount/UUID/device, same inode and
// generation, and an extent map with only plain, unwritten or merged extents on ext2/3/4 or xfs. Everything
// else is "read the whole file", with the reason logged. A slower incremental is acceptable; a wrong one is not.
//
// What it deliberately does not do: track files on btrfs, network or FUSE filesystems, DAX mounts, or across
// reboots and tracker restarts (the in-kernel bitmap does not survive them); write through the block device
// behind a loop-mounted image file is not seen by the loop device's bitmap.
export { BlockBitmap } from './bitmap.js';
export {
  BlockTracker,
  chooseBlockShift,
  type BlockDelta,
  type ChangedBlockSource,
  type TrackerStart,
} from './tracker.js';
export {
  BlockChangeSession,
  computeChangedRanges,
  type BeginOptions,
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
