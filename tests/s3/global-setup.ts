/**
 * Vitest global setup for the S3 tests. Nothing starts up front (test files start radosgw on demand,
 * so runs that never touch S3 never pay for it). At the end, `radosgw.sh release` forgets this run and
 * stops the cluster when no other live test run uses it and a test run started it (a cluster someone
 * started by hand is left alone). The script does both under one lock.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { RADOSGW_DIR, RADOSGW_SCRIPT } from './servers.js';

export function setup(): void {
  process.env.TIDEMARK_VITEST_PID = String(process.pid);
}

export function teardown(): void {
  // Only runs that acquired the cluster have anything to release.
  if (!fs.existsSync(path.join(`${RADOSGW_DIR}.users`, String(process.pid)))) return;
  try {
    execFileSync('bash', [RADOSGW_SCRIPT, 'release', String(process.pid)], {
      stdio: 'ignore',
      timeout: 120_000,
    });
  } catch {
    // a cluster that will not stop is reported by the next start, not by this run
  }
}
