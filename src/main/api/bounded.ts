/**
 * Caps for the API's per-operation state in the long-lived main process (the app may stay open for
 * weeks): finished restores and speed tests are kept only while the UI may still ask for them, and a
 * restore's error list only up to what a person reads.
 */

/** Finished restores / speed tests kept for restore.get / speedtests.get (the newest ones). */
export const KEPT_FINISHED = 20;
/** A restore's errors kept and sent (the count of all of them is `errorCount`). */
export const MAX_RESTORE_ERRORS = 1000;
/** A run's warnings sent with its detail (the catalog keeps all; `warnings` counts them). */
export const MAX_RUN_WARNINGS = 1000;

/** Lines of a run's log sent with its detail: its first and last halves (the catalog keeps all;
 *  the app's run ids are the catalog's, so `tidemark job runs --log ID` prints the whole log). */
export const MAX_RUN_LOG = 2000;

/** The log as sent: whole up to MAX_RUN_LOG lines, else its start and end with a line saying what is left out. */
export function boundLog(lines: string[], max = MAX_RUN_LOG): string[] {
  if (lines.length <= max) return lines;
  const half = Math.floor(max / 2);
  return [
    ...lines.slice(0, half),
    `… ${lines.length - 2 * half} lines left out (all of them: tidemark job runs --log RUN) …`,
    ...lines.slice(-half),
  ];
}

/**
 * Drops the oldest finished entries of `map` (insertion order) until at most `keep` finished ones
 * remain; entries still running are never dropped.
 */
export function dropOldFinished<K, V>(map: Map<K, V>, keep: number, finished: (v: V) => boolean): void {
  let done = 0;
  for (const v of map.values()) if (finished(v)) done++;
  for (const [k, v] of map) {
    if (done <= keep) break;
    if (finished(v)) {
      map.delete(k);
      done--;
    }
  }
}
