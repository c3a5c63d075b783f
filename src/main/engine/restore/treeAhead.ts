/**
 * The restore walk's trees, fetched ahead (main thread): the selected child folders of each folder as
 * soon as it is read, up to 32 reads at once and 256 trees (AHEAD_BYTES of them, as stored) not yet
 * walked, so a cold walk no longer waits for one read at a time, and what is held ahead stays bounded
 * however large the folders are. A stack, so they arrive in the order the depth-first walk wants them.
 * Block lists in two parts (repo/tree.ts) stay unjoined (the planner joins them file by file: a damaged
 * base list fails that file, not its whole folder), and the trees are not cached (each is walked once;
 * see Repository.loadTree).
 */
import type { Repository } from '../repo/repository.js';
import type { Tree } from '../repo/types.js';

const READS = 32;
const AHEAD = 256;
/** The trees held ahead, in their stored (JSON) bytes: their objects take a few times that. At least one
 *  is fetched ahead whatever its size. */
const AHEAD_BYTES = 1024 * 1024;

export class TreeAhead {
  /** Trees fetched ahead, and their stored sizes. */
  private readonly ahead = new Map<string, { tree: Promise<Tree>; bytes: number }>();
  private aheadBytes = 0;
  private readonly stack: string[] = [];
  private fetching = 0;

  constructor(private readonly repo: Repository) {}

  private load(id: string): Promise<Tree> {
    return this.repo.loadTree(id, { joinLists: false, cache: false });
  }

  /** Asks for a tree the walk will want (the last asked for is fetched first). */
  want(id: string): void {
    this.stack.push(id);
  }

  /** Starts fetching what is wanted, while there is room. */
  readonly pump = (): void => {
    const { ahead, stack } = this;
    while (this.fetching < READS && ahead.size < AHEAD && stack.length) {
      const id = stack[stack.length - 1];
      if (ahead.has(id)) {
        stack.pop();
        continue;
      }
      const bytes = this.repo.index.get(id)?.rawLength ?? 0;
      if (ahead.size && this.aheadBytes + bytes > AHEAD_BYTES) break; // fetched once the walk took some
      stack.pop();
      this.fetching++;
      const p = this.load(id).finally(() => {
        this.fetching--;
        this.pump();
      });
      p.catch(() => {}); // reported where the walk awaits it
      ahead.set(id, { tree: p, bytes });
      this.aheadBytes += bytes;
    }
  };

  /** The tree: fetched ahead, or now. */
  treeOf(id: string): Promise<Tree> {
    const a = this.ahead.get(id);
    if (!a) return this.load(id);
    this.ahead.delete(id);
    this.aheadBytes -= a.bytes;
    this.pump();
    return a.tree;
  }

  /** Nothing more is fetched ahead (after an error or cancel too). */
  stop(): void {
    this.stack.length = 0;
  }
}
