/**
 * Names of the contract's calls and events, without schemas (the preload script bundles this file
 * and nothing heavier). api.ts checks at compile time that these lists match the contract.
 */
export const API_METHODS = [
  'app.info',
  'settings.get',
  'settings.update',
  'fs.listDirs',
  'fs.pickFolder',
  'jobs.list',
  'jobs.get',
  'jobs.create',
  'jobs.update',
  'jobs.remove',
  'jobs.runNow',
  'jobs.changePassword',
  'jobs.previewRetention',
  'jobs.check',
  'jobs.maintenance',
  'jobs.testRestore',
  'jobs.repair',
  'jobs.cleanUp',
  'restoreTests.list',
  'destinations.test',
  'runs.list',
  'runs.get',
  'runs.live',
  'runs.pause',
  'runs.resume',
  'runs.cancel',
  'snapshots.hosts',
  'snapshots.list',
  'snapshots.browse',
  'snapshots.search',
  'snapshots.versions',
  'restore.start',
  'restore.get',
  'restore.cancel',
  'alarms.list',
  'alarms.dismiss',
  'speedtests.start',
  'speedtests.get',
  'speedtests.cancel',
  'speedtests.history',
] as const;

export const API_EVENTS = [
  'run.progress',
  'run.finished',
  'jobs.changed',
  'restore.progress',
  'settings.changed',
  'restoreTest.finished',
  'repair.progress',
  'alarm.raised',
  'speedtest.progress',
] as const;

/** Electron IPC channels: one for calls (invoke/handle), one for events (main → window). */
export const IPC_CALL = 'tidemark:call';
export const IPC_EVENT = 'tidemark:event';
