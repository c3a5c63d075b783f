/**
 * The walk and the plan per entry (main thread): each entry found in a source is compared with the
 * previous snapshot's node of that name. Unchanged (same metadata) it is the very same node object, so a
 * folder whose entries are all unchanged keeps its tree; a changed or new file goes to the file saver; a
 * folder is walked (or, with a change journal, reused or descended without listing it: scan/ HintPlan);
 * a symlink is read. A few folders are walked at once, beyond that depth-first (bounded memory).
 * Guarantees: unreadable, vanished or special entries are skipped and listed, never fatal.
 */
import fs from 'node:fs/promises';
import type { Repository } from '../repo/repository.js';
import type { ID, TreeNode } from '../repo/types.js';
import { hasContent, nameBytes } from '../repo/tree.js';
import { AbortedError, throwIfAborted } from '../errors.js';
import { entryStat, metadataNode, unchangedFile, type EntryStat, type HintPlan } from '../scan/index.js';
import type { FileSaver } from './fileSaver.js';
import type { Lister } from './listing.js';
import { join, show, type BackupRun } from './run.js';
import { byName, sameMetadata, sameSummary, type SavedDir, type TreeSaver } from './treeSaver.js';

/** Folders walked at once besides the depth-first one (their small files keep both workers busy). */
const PARALLEL_DIRS = 6;

export class Walker {
  /** Tokens are only taken, never waited for, so a parent never blocks its own children. */
  private readonly dirTokens = { free: PARALLEL_DIRS };
  private readonly forceFull: boolean;

  constructor(
    private readonly run: BackupRun,
    private readonly repo: Repository,
    private readonly hint: HintPlan | undefined,
    private readonly lister: Lister,
    private readonly trees: TreeSaver,
    private readonly files: FileSaver,
  ) {
    this.forceFull = !!run.opts.forceFull;
  }

  async lstat(p: Buffer): Promise<EntryStat> {
    const { view } = this.run;
    this.run.counters.stat++;
    return view.recorded(entryStat(await fs.lstat(view.read(p), { bigint: true })));
  }

  /** Builds the node of one entry; folders recurse. Returns undefined when the entry is skipped. */
  async saveEntry(
    abs: Buffer,
    raw: Buffer,
    st: EntryStat,
    prev: TreeNode | undefined,
    mode: 'scan' | 'full',
  ): Promise<TreeNode | undefined> {
    const { run } = this;
    run.progress.filesScanned++;
    // An entry whose metadata equals the previous snapshot's is kept as the very same node object,
    // so a directory whose entries are all unchanged keeps its tree without re-encoding it.
    const same = !!prev && sameMetadata(prev, st);
    if (same && st.type === 'file' && !this.forceFull && hasContent(prev!)) {
      run.progress.bytesScanned += st.size;
      run.countUnchangedFile(st.size);
      return prev;
    }
    const node = metadataNode(raw, st);
    switch (node.type) {
      case 'dir': {
        const saved = await this.saveDir(abs, prev?.type === 'dir' ? prev : undefined, mode);
        if (saved === undefined) return undefined;
        run.stats.dirs++;
        if (same && saved.id === prev!.subtree && sameSummary(saved.summary, prev!.summary)) return prev;
        node.subtree = saved.id;
        node.summary = saved.summary;
        return node;
      }
      case 'file': {
        run.progress.bytesScanned += node.size ?? 0;
        if (!this.forceFull && unchangedFile(prev, node)) {
          node.content = prev!.content;
          node.blockIds = prev!.blockIds; // a block file's list goes with its block size
          node.blockSize = prev!.blockSize;
          node.blockBase = prev!.blockBase; // and with the parts it is stored in
          node.blockCount = prev!.blockCount;
          node.blockPatch = prev!.blockPatch;
          run.countUnchangedFile(node.size ?? 0);
          return node;
        }
        const saved = await this.files.save(abs, node, st.mtimeMs, prev);
        if (saved) {
          run.stats.files++;
          run.stats.totalBytes += saved.size ?? 0;
        }
        return saved;
      }
      case 'symlink': {
        try {
          const target = (await fs.readlink(run.view.read(abs), { encoding: 'buffer' })) as Buffer;
          const text = target.toString('utf8');
          node.linkTarget = text;
          if (!Buffer.from(text, 'utf8').equals(target)) node.linkTargetRaw = target.toString('base64');
          if (same && prev!.linkTarget === node.linkTarget && prev!.linkTargetRaw === node.linkTargetRaw)
            return prev;
          return node;
        } catch (err) {
          run.skip(show(abs), err);
          return undefined;
        }
      }
      default:
        run.skip(
          show(abs),
          undefined,
          `${node.type === 'fifo' ? 'a named pipe (FIFO)' : node.type === 'socket' ? 'a socket' : 'a device file'} is not backed up`,
        );
        return undefined;
    }
  }

  /** Saves a directory's tree; returns its ID, or undefined when it cannot be read at all. */
  private async saveDir(
    abs: Buffer,
    prevNode: TreeNode | undefined,
    mode: 'scan' | 'full',
  ): Promise<SavedDir | undefined> {
    const { run, hint } = this;
    if (run.signal?.aborted) throw new AbortedError();
    const prevTreeId = prevNode?.subtree;
    const absText = show(abs);
    const decision = mode === 'full' || !hint ? 'scan' : hint.decide(absText);
    const subMode: 'scan' | 'full' = mode === 'full' || decision === 'full' ? 'full' : 'scan';
    if ((decision === 'reuse' || decision === 'descend') && prevTreeId === undefined) {
      // the hint says "unchanged" but the previous snapshot has nothing to reuse: scan it
      return this.scanDir(abs, undefined, 'full');
    }
    if (decision === 'reuse' && prevNode?.summary) {
      run.countSummary(prevNode.summary);
      return { id: prevTreeId!, summary: prevNode.summary };
    }
    if (decision === 'reuse') return this.scanDir(abs, prevTreeId, 'full');
    if (decision === 'descend') {
      const prevTree = await this.repo.loadTree(prevTreeId!, { joinLists: false });
      const nodes: TreeNode[] = [];
      for (const n of prevTree.nodes) {
        const childAbs = join(abs, nameBytes(n));
        if (n.type === 'dir' && hint!.leadsToChange(show(childAbs))) {
          let st: EntryStat;
          try {
            st = await this.lstat(childAbs);
          } catch {
            // gone although the parent was not reported dirty: be safe and rescan the parent
            return this.scanDir(abs, prevTreeId, 'full');
          }
          const node = await this.saveEntry(childAbs, nameBytes(n), st, n, subMode);
          if (node) nodes.push(node);
        } else {
          nodes.push(n);
          run.countNode(n);
        }
      }
      return this.trees.save(nodes);
    }
    return this.scanDir(abs, prevTreeId, subMode);
  }

  /** Lists a folder and saves every entry in it. */
  private async scanDir(
    abs: Buffer,
    prevTreeId: ID | undefined,
    mode: 'scan' | 'full',
  ): Promise<SavedDir | undefined> {
    const { run, dirTokens } = this;
    const listing = await this.lister.take(abs);
    if (listing instanceof Error) {
      run.skip(
        show(abs),
        listing,
        (listing as NodeJS.ErrnoException).code === 'EACCES'
          ? 'permission denied (folder not readable)'
          : undefined,
      );
      return undefined;
    }
    const { names, stats } = listing;
    const kept = stats.map((st) => st !== undefined);
    this.lister.prefetchChildren(abs, listing, mode);
    // block lists in two parts stay unjoined: a night's patch needs only the previous patch
    const prevTree = prevTreeId ? await this.repo.loadTree(prevTreeId, { joinLists: false }) : undefined;
    const prevNodes = byName(prevTree);
    const pendingNodes: Promise<TreeNode | undefined>[] = [];
    let matched = 0; // previous entries still here (fewer: some were removed)
    for (let i = 0; i < names.length; i++) {
      throwIfAborted(run.signal);
      if (!kept[i]) continue;
      const childAbs = join(abs, names[i]);
      const st = stats[i]!;
      if (st instanceof Error) {
        const code = (st as NodeJS.ErrnoException).code;
        run.skip(show(childAbs), st, code === 'ENOENT' ? 'vanished during the scan' : undefined);
        continue;
      }
      const prev = prevNodes.get(names[i].toString('latin1'));
      if (prev) matched++;
      const p = this.saveEntry(childAbs, names[i], st, prev, mode);
      if (st.type === 'dir') {
        // A few folders are walked at once (so small files from several of them keep both workers
        // busy); beyond that the walk goes depth-first, which bounds memory. Tokens are only taken,
        // never waited for, so a parent never blocks its own children.
        if (dirTokens.free > 0) {
          dirTokens.free--;
          void p.finally(() => dirTokens.free++).catch(() => {});
        } else await p;
      }
      pendingNodes.push(p);
    }
    // the mass-change alarm pairs new files with removed ones (only folders that lost entries)
    if (run.watch && prevTree && matched < prevTree.nodes.length)
      run.watch.listed(show(abs), names.map(show), prevTree.nodes);
    const nodes = (await Promise.all(pendingNodes)).filter((n): n is TreeNode => !!n);
    return this.trees.saveOrKeep(nodes, prevTree, prevTreeId);
  }
}
