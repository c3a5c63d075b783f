/**
 * Repair walks every blob of a repository on the calling thread (building maps of what the index says
 * and what the packs hold): in an app, that thread also answers the window. A breather tells a loop when
 * a few milliseconds of work have passed (`due`, a clock read: awaiting on every turn would cost a
 * microtask per blob), and `rest()` yields to the event loop.
 */
export interface Breather {
  readonly due: boolean;
  rest(): Promise<void>;
}

export function breather(everyMs = 8): Breather {
  let last = performance.now();
  return {
    get due() {
      return performance.now() - last >= everyMs;
    },
    rest: () =>
      new Promise<void>((r) =>
        setImmediate(() => {
          last = performance.now();
          r();
        }),
      ),
  };
}
