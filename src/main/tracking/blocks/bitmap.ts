// Changed-block bitmaps: one bit per tracked block of a whole disk (bit k of byte j = block 8j + k, the same
// layout as the kernel's little-endian u64 words), with a compact run-length encoding for the store.

export class BlockBitmap {
  readonly bytes: Uint8Array;

  constructor(
    readonly blocks: number,
    bytes?: Uint8Array,
  ) {
    const need = Math.ceil(blocks / 8);
    if (bytes) {
      if (bytes.length < need)
        throw new RangeError(`bitmap of ${bytes.length} bytes is too short for ${blocks} blocks`);
      this.bytes = bytes;
    } else {
      this.bytes = new Uint8Array(need);
    }
  }

  get(block: number): boolean {
    return (this.bytes[block >>> 3] & (1 << (block & 7))) !== 0;
  }

  set(block: number): void {
    this.bytes[block >>> 3] |= 1 << (block & 7);
  }

  /** Sets blocks [first, last] (inclusive). */
  setRange(first: number, last: number): void {
    for (let b = first; b <= last; b++) {
      if ((b & 7) === 0 && b + 7 <= last) {
        this.bytes[b >>> 3] = 0xff;
        b += 7;
      } else this.set(b);
    }
  }

  or(other: BlockBitmap): void {
    if (other.blocks !== this.blocks)
      throw new RangeError(`bitmap sizes differ (${this.blocks} vs ${other.blocks} blocks)`);
    const a = this.bytes;
    const b = other.bytes;
    for (let i = 0; i < a.length; i++) a[i] |= b[i];
  }

  count(): number {
    let n = 0;
    for (let i = 0; i < this.bytes.length; i++) {
      let v = this.bytes[i];
      while (v) {
        v &= v - 1;
        n++;
      }
    }
    return n;
  }

  isEmpty(): boolean {
    for (let i = 0; i < this.bytes.length; i++) if (this.bytes[i]) return false;
    return true;
  }

  /** Calls fn(first, last) for each maximal run of set blocks within [from, to] (inclusive). */
  forEachSetRun(from: number, to: number, fn: (first: number, last: number) => void): void {
    const last = Math.min(to, this.blocks - 1);
    let b = Math.max(0, from);
    let runStart = -1;
    while (b <= last) {
      // skip whole zero bytes quickly when not inside a run
      if (runStart < 0 && (b & 7) === 0 && this.bytes[b >>> 3] === 0) {
        b += 8;
        continue;
      }
      const on = this.get(b);
      if (on && runStart < 0) runStart = b;
      else if (!on && runStart >= 0) {
        fn(runStart, b - 1);
        runStart = -1;
      }
      b++;
    }
    if (runStart >= 0) fn(runStart, last);
  }

  /** Run-length encoding: alternating run lengths of clear and set bits (starting with clear), as LEB128. */
  encode(): Uint8Array {
    const out: number[] = [];
    const push = (n: number) => {
      while (n >= 0x80) {
        out.push((n % 0x80) | 0x80);
        n = Math.floor(n / 0x80);
      }
      out.push(n);
    };
    let state = false;
    let run = 0;
    const n = this.blocks;
    let b = 0;
    while (b < n) {
      const byte = this.bytes[b >>> 3];
      if ((b & 7) === 0 && b + 8 <= n && (byte === 0 || byte === 0xff)) {
        const on = byte === 0xff;
        if (on !== state) {
          push(run);
          state = on;
          run = 0;
        }
        run += 8;
        b += 8;
        continue;
      }
      const on = (byte & (1 << (b & 7))) !== 0;
      if (on !== state) {
        push(run);
        state = on;
        run = 0;
      }
      run++;
      b++;
    }
    push(run);
    return Uint8Array.from(out);
  }

  static decode(blocks: number, data: Uint8Array): BlockBitmap {
    const bm = new BlockBitmap(blocks);
    let pos = 0;
    let at = 0;
    let state = false;
    while (pos < data.length) {
      let n = 0;
      let mul = 1;
      for (;;) {
        if (pos >= data.length) throw new Error('truncated run-length bitmap');
        const c = data[pos++];
        n += (c & 0x7f) * mul;
        mul *= 0x80;
        if (!(c & 0x80)) break;
      }
      if (at + n > blocks) throw new Error(`run-length bitmap overruns ${blocks} blocks`);
      if (state && n > 0) bm.setRange(at, at + n - 1);
      at += n;
      state = !state;
    }
    if (at !== blocks) throw new Error(`run-length bitmap covers ${at} of ${blocks} blocks`);
    return bm;
  }
}
