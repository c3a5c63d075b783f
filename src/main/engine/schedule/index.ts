/**
 * schedule/ — when jobs run and what a run does (retention included).
 *
 * - the grandfather-father-son policy (`applyRetentionPolicy`) is the repository's
 *   (../repo/retentionPolicy.ts, shared with forget): re-exported here.
 * - schedules.ts: user schedules (hourly, every N hours, daily, weekly, cron) evaluated by croner in
 *   the schedule's time zone (DST-safe).
 * - scheduler.ts: fires due jobs, records a missed run once and catches up once after sleep or
 *   shutdown, never overlaps runs of one job, one writer per repository, bounded concurrency, an
 *   injected clock.
 * - runner.ts: one run of a job — backup with per-second samples, skipped entries, retention, catalog
 *   indexing, prune on the repository's schedule, optional verify, a restore test when due — against an
 *   injected JobEngine.
 * - restoreTests.ts: when a job's restore test is due (every N days; every block file monthly), running
 *   and recording one.
 * - engine.ts: the real engine behind JobEngine (repository secrets from a SecretStore).
 * - events.ts: typed run events (started/progress/phase/finished/failed/missed/skipped) for the app.
 * - system.ts: createJobSystem() wires catalog, runner, scheduler and events in one call.
 *
 * Not here: the engine operations themselves, or any UI/notification code.
 */
export * from '../repo/retentionPolicy.js';
export * from './schedules.js';
export * from './scheduler.js';
export * from './runner.js';
export * from './events.js';
export * from './engine.js';
export * from './system.js';
export * from './restoreTests.js';
