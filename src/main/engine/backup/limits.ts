/** The backup's two kinds of backpressure: bytes in flight under a ceiling, and a number of slots. */

/** Bytes in flight with a ceiling: `wait` resolves once the total is back under it. */
export class ByteBudget {
  private used = 0;
  private waiters: (() => void)[] = [];
  constructor(private readonly max: number) {}
  add(n: number): void {
    this.used += n;
  }
  release(n: number): void {
    this.used -= n;
    while (this.used < this.max && this.waiters.length) this.waiters.shift()!();
  }
  async wait(): Promise<void> {
    if (this.used < this.max) return;
    await new Promise<void>((r) => this.waiters.push(r));
  }
  /** Bytes in flight now. */
  get bytes(): number {
    return this.used;
  }
}

export class Semaphore {
  private waiters: (() => void)[] = [];
  constructor(private free: number) {}
  async take(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((r) => this.waiters.push(r));
  }
  give(): void {
    const w = this.waiters.shift();
    if (w) w();
    else this.free++;
  }
}
