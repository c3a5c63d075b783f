/**
 * The restore walk's trees, fetched ahead (main thread): the selected child folders of each folder as
 * soon as it is read, up to 32 reads at once and 256 trees not yet walked, so a cold walk no longer
 * waits for one read at a time. A stack, so they arrive in the order the depth-first walk wants them.
 * Block lists in two parts (repo/tree.ts) stay unjoined (the planner joins them file by file: a damaged
 * base list fails that file, not its whole folder), and the trees are not cached (each is walked once;
 * see Repository.loadTree).
 */
import type { Repository } from '../repo/repository.js';
import type { Tree } from '../repo/types.js';

const READS = 32;
const AHEAD = 256;

export class TreeAhead {
  private readonly ahead = new Map<string, Promise<Tree>>();
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
      const id = stack.pop()!;
      if (ahead.has(id)) continue;
      this.fetching++;
      const p = this.load(id).finally(() => {
        this.fetching--;
        this.pump();
      });
      p.catch(() => {}); // reported where the walk awaits it
      ahead.set(id, p);
    }
  };

  /** The tree: fetched ahead, or now. */
  treeOf(id: string): Promise<Tree> {
    const p = this.ahead.get(id);
    this.ahead.delete(id);
    return p ?? this.load(id);
  }

  /** Nothing more is fetched ahead (after an error or cancel too). */
  stop(): void {
    this.stack.length = 0;
  }
}
