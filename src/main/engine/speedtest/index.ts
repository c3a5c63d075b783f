/**
 * speedtest/ — a destination speed test: before trusting a target with backups, simulate their I/O on it.
 *
 * On a folder, a test file (1 GiB by default, like DiskSpd's -c) is laid out and the patterns of
 * ./patterns.ts run on it for a set time each, past the caches where the filesystem allows (O_DIRECT,
 * F_NOCACHE, FILE_FLAG_NO_BUFFERING; the result says when it could not), with real sequential or random
 * aligned I/O and a queue depth per thread, issued by the native engine (native/iotest) on threads of its
 * own, so the event loop stays free. On S3, pack-sized PUTs and GETs and small ranged GETs run at 1, 4
 * and 8 requests in flight through the backup's own S3 backend. Each pattern reports MiB/s, IOPS and
 * p50/p95/p99 latency; ./estimate.ts turns them into the time of a job's next full backup and of a full
 * restore, next to its last real runs.
 *
 * Guarantees: it writes only its own test file or probe objects, which no repository object can be
 * mistaken for, and removes them at the end, on errors and at once on cancel; what an interrupted test
 * left is removed by the next one. It refuses a folder without room for the test file and a margin; a
 * disk filling up and a destination going away end it with DestinationFullError / DestinationGoneError.
 *
 * Not here: keeping results (the catalog's speed_tests table, catalog/speedTests.ts) or deciding
 * anything from them — it measures and estimates, a person judges.
 */
import { isS3Location } from '../backend/s3/location.js';
import type { BackendOptions } from '../backend/open.js';
import { runFolderSpeedTest } from './folder.js';
import type { SpeedTestOptions, SpeedTestResult } from './types.js';

export type * from './types.js';
export {
  DISK_PATTERNS,
  S3_PATTERNS,
  DISK_PATTERN_IDS,
  S3_PATTERN_IDS,
  PATTERN_IDS,
  BLOCK_PRESETS,
  DEFAULTS,
  resolveOptions,
  parseSize,
} from './patterns.js';
export { runFolderSpeedTest, spaceMargin } from './folder.js';
export {
  estimate,
  type SpeedEstimate,
  type RunFigures,
  type TimeEstimate,
  type RunRate,
} from './estimate.js';
export { measureSources, type SourceSize } from './sourceSize.js';

/** Runs the speed test on a destination: a folder path, or an S3 location with its backend options. */
export async function runSpeedTest(
  location: string,
  options: BackendOptions,
  opts: SpeedTestOptions = {},
): Promise<SpeedTestResult> {
  if (isS3Location(location) || (location === '' && options.bucket)) {
    // the AWS SDK loads only for S3 destinations
    const { runS3SpeedTest } = await import('./s3.js');
    return runS3SpeedTest(location, options, opts);
  }
  return runFolderSpeedTest(location.replace(/^local:/, ''), opts);
}
