/**
 * Who still refers to a buffer a worker sealed blobs into, so that it goes back to the workers (to be
 * sealed into again: SpareBuffers.keepSealed) exactly when nothing does. A backup holds a sealed segment's
 * buffer while it adds its blobs to the repository (`hold` … `release`); the repository's pack writer
 * takes one more hold for each pack part that stays a view of it (`retain`: repo's BufferLender) and
 * releases it once that pack is written. Handed back early, a worker would overwrite blobs of a pack
 * still being written. A buffer never held is never handed back; after `close` (the run ended, perhaps
 * failed) nothing more is, and what was still held is simply collected.
 */
export class BufferLedger {
  private holds = new Map<ArrayBufferLike, number>();
  private closed = false;

  constructor(private readonly give: (ab: ArrayBuffer) => void) {}

  /** One hold on `ab` (its first makes it lent). */
  hold(ab: ArrayBufferLike): void {
    if (!this.closed) this.holds.set(ab, (this.holds.get(ab) ?? 0) + 1);
  }

  /** One more hold on a buffer that is held; false (and nothing held) for one that is not. */
  retain(ab: ArrayBufferLike): boolean {
    const n = this.holds.get(ab);
    if (n === undefined) return false;
    this.holds.set(ab, n + 1);
    return true;
  }

  /** Lets go of one hold; the last one hands the buffer back. */
  release(ab: ArrayBufferLike): void {
    const n = this.holds.get(ab);
    if (n === undefined) return;
    if (n > 1) this.holds.set(ab, n - 1);
    else {
      this.holds.delete(ab);
      if (ab instanceof ArrayBuffer) this.give(ab);
    }
  }

  /** Buffers held now, and their bytes. */
  get held(): { buffers: number; bytes: number } {
    let bytes = 0;
    for (const ab of this.holds.keys()) bytes += ab.byteLength;
    return { buffers: this.holds.size, bytes };
  }

  /** Ends the ledger: nothing is handed back any more. */
  close(): void {
    this.closed = true;
    this.holds = new Map();
  }
}
