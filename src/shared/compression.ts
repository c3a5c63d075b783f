/**
 * The zstd level a new repository and a new backup job get. Level 2 stores a little more than level 3
 * (about 1% of `npm run bench`'s dataset, more of plain text) for a fifth less compression CPU, the
 * largest cost of a full backup on a two-core PC; level 1 would save a little more CPU but store
 * noticeably more, paid again for every version kept (`npm run bench:zstd`, docs/performance.md).
 * Existing repositories and jobs keep the level they were created with; the level in Settings
 * (defaults for new jobs) starts here.
 */
export const DEFAULT_COMPRESSION_LEVEL = 2;
