/**
 * Vitest global setup for the S3 tests. Nothing happens up front (test files start radosgw on demand,
 * so runs that never touch S3 never pay for it). Several test runs may share one radosgw (parallel
 * runs on one machine): each run that uses it leaves a file named by its main pid, and the last run
 * out stops it — but only if a test run started it (a cluster someone started by hand is left alone).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { RADOSGW_SCRIPT, RADOSGW_USERS, STARTED_BY_TESTS } from './servers.js';

export function setup(): void {
  process.env.TIDEMARK_VITEST_PID = String(process.pid);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function teardown(): void {
  const mine = path.join(RADOSGW_USERS, String(process.pid));
  if (!fs.existsSync(mine)) return;
  fs.rmSync(mine, { force: true });
  const others = fs.readdirSync(RADOSGW_USERS).filter((f) => alive(Number(f)));
  if (others.length > 0 || !fs.existsSync(STARTED_BY_TESTS)) return;
  try {
    execFileSync('bash', [RADOSGW_SCRIPT, 'stop'], { stdio: 'ignore', timeout: 60_000 });
  } finally {
    fs.rmSync(STARTED_BY_TESTS, { force: true });
  }
}
