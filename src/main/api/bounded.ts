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
