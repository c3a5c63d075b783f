// From "blocks written on the disk" to "bytes of this file that may differ from the last backup".
//
// A byte of a regular file is fully determined by (a) how its logical offset maps to the device (hole,
// unwritten extent, or data at a physical address) and (b) the content of that physical block. So a range
// can only have changed if its mapping changed (punch-hole, zero-range, reallocation, defrag) or its physical
// blocks were written. Both are checked; anything the map cannot express precisely makes the whole file be
// read. Pure functions: no I/O here.

export interface ByteRange {
  offset: number;
  length: number;
}

/** [logical, physical, length, flags] — the compact form kept in the store. */
export type ExtentTuple = [number, number, number, number];

export interface FileExtentMap {
  size: number;
  extents: ExtentTuple[];
}

export const FIEMAP_EXTENT_LAST = 0x1;
export const FIEMAP_EXTENT_UNWRITTEN = 0x800;
export const FIEMAP_EXTENT_MERGED = 0x1000;
/** Flags whose extents we can reason about; any other flag (unknown, delalloc, encoded, encrypted, inline,
 *  tail-packed, not-aligned, shared, or one added in a future kernel) makes the file be read whole. */
export const TRUSTED_EXTENT_FLAGS = FIEMAP_EXTENT_LAST | FIEMAP_EXTENT_UNWRITTEN | FIEMAP_EXTENT_MERGED;

const FLAG_NAMES: [number, string][] = [
  [0x2, 'unknown location'],
  [0x4, 'delayed allocation'],
  [0x8, 'encoded (compressed)'],
  [0x80, 'encrypted'],
  [0x100, 'not block-aligned'],
  [0x200, 'inline data'],
  [0x400, 'tail-packed'],
  [0x2000, 'shared (reflinked)'],
];

/** Why an extent map cannot be trusted, or null. */
export function untrustedExtentReason(extents: ExtentTuple[]): string | null {
  for (const [logical, , length, flags] of extents) {
    const bad = flags & ~TRUSTED_EXTENT_FLAGS;
    if (bad) {
      const names = FLAG_NAMES.filter(([f]) => bad & f).map(([, n]) => n);
      return `extent at ${logical} is ${names.length ? names.join(', ') : `flagged 0x${bad.toString(16)}`}`;
    }
    if (length <= 0 || logical < 0) return `extent at ${logical} has length ${length}`;
  }
  return null;
}

interface Segment {
  start: number;
  end: number; // exclusive
  unwritten: boolean;
  /** physical - logical */
  delta: number;
}

/** Extents → sorted, merged segments within [0, limit). Contiguous pieces with the same mapping merge, so a
 *  filesystem that splits an extent differently between two calls does not look like a change. */
function segments(extents: ExtentTuple[], limit: number): Segment[] {
  const sorted = [...extents].sort((a, b) => a[0] - b[0]);
  const out: Segment[] = [];
  for (const [logical, physical, length, flags] of sorted) {
    const start = logical;
    const end = Math.min(logical + length, limit);
    if (end <= start) continue;
    const seg: Segment = {
      start,
      end,
      unwritten: (flags & FIEMAP_EXTENT_UNWRITTEN) !== 0,
      delta: physical - logical,
    };
    const prev = out[out.length - 1];
    if (prev && prev.end > seg.start) throw new Error(`overlapping extents at ${seg.start}`);
    if (prev && prev.end === seg.start && prev.unwritten === seg.unwritten && prev.delta === seg.delta)
      prev.end = seg.end;
    else out.push(seg);
  }
  return out;
}

/** Logical ranges within [0, limit) where the two maps differ (hole vs extent, unwritten vs written, or a
 *  different physical location). */
export function mappingDifferences(
  oldExtents: ExtentTuple[],
  newExtents: ExtentTuple[],
  limit: number,
): ByteRange[] {
  const a = segments(oldExtents, limit);
  const b = segments(newExtents, limit);
  const cuts = new Set<number>([0, limit]);
  for (const s of [...a, ...b]) {
    cuts.add(s.start);
    cuts.add(s.end);
  }
  const points = [...cuts].filter((x) => x >= 0 && x <= limit).sort((x, y) => x - y);
  const out: ByteRange[] = [];
  let ia = 0;
  let ib = 0;
  for (let i = 0; i + 1 < points.length; i++) {
    const lo = points[i];
    const hi = points[i + 1];
    while (ia < a.length && a[ia].end <= lo) ia++;
    while (ib < b.length && b[ib].end <= lo) ib++;
    const sa = ia < a.length && a[ia].start <= lo ? a[ia] : undefined;
    const sb = ib < b.length && b[ib].start <= lo ? b[ib] : undefined;
    const same = (!sa && !sb) || (sa && sb && sa.unwritten === sb.unwritten && sa.delta === sb.delta);
    if (!same) pushRange(out, lo, hi - lo);
  }
  return out;
}

/** Something that can say which tracked disk blocks were written (block = diskByte >> shift bits). */
export interface ChangedBlocks {
  blockBytes: number;
  /** calls fn for each run of written blocks within [first, last] */
  forEachSetRun(first: number, last: number, fn: (first: number, last: number) => void): void;
}

/** Logical ranges within [0, size) whose physical blocks were written. */
export function writtenRanges(
  extents: ExtentTuple[],
  size: number,
  partStartBytes: number,
  changed: ChangedBlocks,
): ByteRange[] {
  const out: ByteRange[] = [];
  const B = changed.blockBytes;
  for (const s of segments(extents, size)) {
    const diskStart = partStartBytes + s.start + s.delta;
    const diskEnd = partStartBytes + s.end + s.delta; // exclusive
    changed.forEachSetRun(Math.floor(diskStart / B), Math.floor((diskEnd - 1) / B), (first, last) => {
      const lo = Math.max(s.start, first * B - partStartBytes - s.delta);
      const hi = Math.min(s.end, (last + 1) * B - partStartBytes - s.delta);
      if (hi > lo) out.push({ offset: lo, length: hi - lo });
    });
  }
  return out;
}

function pushRange(out: ByteRange[], offset: number, length: number): void {
  const prev = out[out.length - 1];
  if (prev && prev.offset + prev.length === offset) prev.length += length;
  else out.push({ offset, length });
}

/** Sorts, widens to `align` boundaries, clips to [0, size) and merges overlapping or touching ranges. */
export function normalizeRanges(ranges: ByteRange[], size: number, align: number): ByteRange[] {
  const items = ranges
    .map((r) => {
      const start = Math.max(0, Math.floor(r.offset / align) * align);
      const end = Math.min(size, Math.ceil((r.offset + r.length) / align) * align);
      return [start, end] as const;
    })
    .filter(([s, e]) => e > s)
    .sort((x, y) => x[0] - y[0]);
  const out: ByteRange[] = [];
  for (const [s, e] of items) {
    const prev = out[out.length - 1];
    if (prev && s <= prev.offset + prev.length) prev.length = Math.max(prev.length, e - prev.offset);
    else out.push({ offset: s, length: e - s });
  }
  return out;
}

export type RangesDecision = { ranges: ByteRange[] } | { whole: string };

/**
 * The changed byte ranges of a file between a baseline map (taken at the last backup, right after a swap)
 * and its current map, given every disk block written since that swap. `fsBlockSize` aligns the result.
 */
export function changedRangesBetween(
  baseline: FileExtentMap,
  current: FileExtentMap,
  partStartBytes: number,
  fsBlockSize: number,
  changed: ChangedBlocks,
): RangesDecision {
  const bad = untrustedExtentReason(current.extents) ?? untrustedExtentReason(baseline.extents);
  if (bad) return { whole: bad };
  if (!(fsBlockSize > 0) || fsBlockSize % 512 !== 0)
    return { whole: `odd filesystem block size ${fsBlockSize}` };
  const common = Math.min(baseline.size, current.size);
  let raw: ByteRange[];
  try {
    raw = [
      ...mappingDifferences(baseline.extents, current.extents, common),
      ...writtenRanges(current.extents, current.size, partStartBytes, changed),
    ];
  } catch (e) {
    return { whole: (e as Error).message };
  }
  if (current.size > baseline.size) {
    // grew: everything past the old end, from the start of the block holding it
    const from = Math.floor(baseline.size / fsBlockSize) * fsBlockSize;
    raw.push({ offset: from, length: current.size - from });
  } else if (current.size < baseline.size && current.size > 0) {
    // shrank: the block now holding the end, so the reader sees where the file stops
    const from = Math.floor((current.size - 1) / fsBlockSize) * fsBlockSize;
    raw.push({ offset: from, length: current.size - from });
  }
  return { ranges: normalizeRanges(raw, current.size, fsBlockSize) };
}
