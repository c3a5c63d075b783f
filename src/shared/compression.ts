/**
 * The zstd level a new repository and a new backup job get. Measured on `npm run bench`'s dataset
 * (`npm run bench:floor`, and CLI full backups alternating `--compression 2` with 3): level 2 stores 1.3%
 * more than level 3 (5% more of plain text; 1.006× restic's repository instead of 0.993×) and spends
 * ~19% less CPU compressing, which made a full backup 5–15% faster on this two-core machine, where
 * compression is the largest cost of a full backup. Level 1 would save another ~16% of that CPU but
 * stores 2.2% more than level 2 (3.5%, and 14% more of text, than level 3), paid again for every version
 * kept. Existing repositories and jobs keep the level they were created with; the level in Settings
 * (defaults for new jobs) starts here.
 */
export const DEFAULT_COMPRESSION_LEVEL = 2;
