import path from 'node:path';

/** True when `p` is `root` or inside it. */
export function isUnder(p: string, root: string): boolean {
  if (p === root) return true;
  const prefix = root.endsWith(path.sep) ? root : root + path.sep;
  return p.startsWith(prefix);
}

export class Listeners<T> {
  private readonly set = new Set<(v: T) => void>();
  add(fn: (v: T) => void): () => void {
    this.set.add(fn);
    return () => this.set.delete(fn);
  }
  emit(v: T): void {
    for (const fn of [...this.set]) {
      try {
        fn(v);
      } catch (err) {
        // A listener's bug must not stop the tracker or the other listeners.
        console.error('tidemark: change listener failed:', err);
      }
    }
  }
}
