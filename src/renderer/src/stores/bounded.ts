/**
 * Caps for what the stores keep across a long session: the app may stay open for weeks, and every
 * finished run would otherwise add a history row, an end state and a detail (with its samples).
 */

/** How many runs the history list keeps (the same number it loads). */
export const HISTORY_LIMIT = 200;
/** How many runs' end states and details stay in memory (the Live and History pages show a few). */
export const KEPT_RUNS = 20;

/** The list with `item` first and no more than `max` entries (an older copy of the same id dropped). */
export function prependCapped<T extends { id: string }>(list: readonly T[], item: T, max: number): T[] {
  const out = [item];
  for (const r of list) {
    if (out.length >= max) break;
    if (r.id !== item.id) out.push(r);
  }
  return out;
}

/** The record with `key` set last and only the `max` most recently set keys kept (insertion order). */
export function setCapped<V>(
  rec: Readonly<Record<string, V>>,
  key: string,
  value: V,
  max: number,
): Record<string, V> {
  const keys = Object.keys(rec).filter((k) => k !== key);
  const out: Record<string, V> = {};
  for (const k of keys.slice(Math.max(0, keys.length - (max - 1)))) out[k] = rec[k];
  out[key] = value;
  return out;
}
