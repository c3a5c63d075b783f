// The environment every launcher gives the process hosting the engine (bin/malloc-env.mjs): a launcher
// re-executes itself once with it, and the re-executed process really runs with glibc's settings, libuv's
// pool size and V8's heap limit (which keeps V8 from growing the heap to 4x what is live).
import { afterAll, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { withMallocEnv } from '../../bin/malloc-env.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-launcher-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A launcher like bin/tidemark.mjs that reports what the process doing the work runs with. */
const probe = path.join(dir, 'probe.mjs');
fs.writeFileSync(
  probe,
  `import v8 from 'node:v8';
import { reexecWithMallocEnv } from ${JSON.stringify(path.join(root, 'bin/malloc-env.mjs'))};
import fs from 'node:fs';
if (!reexecWithMallocEnv()) {
  const e = process.env;
  // a mapped 32 MiB buffer, written whole: in huge pages when glibc marks it (and the kernel allows THP)
  Buffer.allocUnsafeSlow(32 << 20).fill(1);
  const huge = /AnonHugePages:\\s+(\\d+)/.exec(fs.readFileSync('/proc/self/smaps_rollup', 'utf8'));
  console.log(JSON.stringify({
    limitMiB: v8.getHeapStatistics().heap_size_limit / 1048576,
    mmap: e.MALLOC_MMAP_THRESHOLD_, pool: e.UV_THREADPOOL_SIZE, nodeOptions: e.NODE_OPTIONS,
    tunables: e.GLIBC_TUNABLES, hugeKiB: Number(huge?.[1] ?? 0),
  }));
}
`,
);

const run = (env: NodeJS.ProcessEnv, args: string[] = []) => {
  const r = spawnSync(process.execPath, [probe, ...args], { env, encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
};

const clean = () => {
  const env = { ...process.env };
  for (const k of [
    'MALLOC_MMAP_THRESHOLD_',
    'GLIBC_TUNABLES',
    'UV_THREADPOOL_SIZE',
    'NODE_OPTIONS',
    'TIDEMARK_MALLOC_ENV',
  ])
    delete env[k];
  delete env.TIDEMARK_NO_REEXEC;
  return env;
};

// (launchers re-execute themselves on Linux only: glibc's settings are what they are for)
it.runIf(process.platform === 'linux')(
  'a launcher re-executes itself once with the malloc settings and a 2,000 MB heap limit',
  () => {
    const r = run(clean());
    expect(r.mmap).toBe('131072');
    expect(r.tunables).toBe('glibc.malloc.hugetlb=1');
    // where the kernel gives huge pages on request, the buffer got them (and none without the tunable)
    const thp = fs.readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8');
    if (/\[(madvise|always)\]/.test(thp)) expect(r.hugeKiB).toBeGreaterThanOrEqual(16 * 1024);
    if (/\[madvise\]/.test(thp))
      expect(run({ ...clean(), GLIBC_TUNABLES: 'glibc.malloc.check=0' }).hugeKiB).toBe(0);
    expect(r.pool).toBe('16');
    expect(r.nodeOptions).toBe('--max-old-space-size=2000 --max-semi-space-size=2');
    // V8 adds the young generation to the old generation's limit
    expect(r.limitMiB).toBeGreaterThanOrEqual(2000);
    expect(r.limitMiB).toBeLessThan(2200);
    // other NODE_OPTIONS are kept and the flag added; a user's own heap limit wins
    const other = run({ ...clean(), NODE_OPTIONS: '--no-deprecation' });
    expect(other.nodeOptions).toBe('--no-deprecation --max-old-space-size=2000 --max-semi-space-size=2');
    const own = run({ ...clean(), NODE_OPTIONS: '--max-old-space-size=3000' });
    expect(own.nodeOptions).toBe('--max-old-space-size=3000 --max-semi-space-size=2');
    expect(own.limitMiB).toBeGreaterThanOrEqual(3000);
  },
);

it.runIf(process.platform === 'linux')(
  "a command run with --memory low gets no huge pages and 1 MiB semi-spaces (a user's own settings win)",
  () => {
    for (const args of [
      ['backup', '--memory', 'low', 'x'],
      ['restore', '--memory=low'],
    ]) {
      const r = run(clean(), args);
      expect(r.mmap).toBe('131072');
      expect(r.tunables).toBeUndefined();
      const thp = fs.readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8');
      if (/\[madvise\]/.test(thp)) expect(r.hugeKiB).toBe(0);
      expect(r.nodeOptions).toBe('--max-old-space-size=2000 --max-semi-space-size=1');
    }
    expect(run(clean(), ['backup', '--memory', 'normal']).nodeOptions).toBe(
      '--max-old-space-size=2000 --max-semi-space-size=2',
    );
    const own = run({ ...clean(), GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1' }, ['--memory', 'low']);
    expect(own.tunables).toBe('glibc.malloc.hugetlb=1');
  },
);

it('withMallocEnv keeps what the caller set and adds the heap flag once', () => {
  expect(withMallocEnv({ UV_THREADPOOL_SIZE: '4' })).toMatchObject({
    UV_THREADPOOL_SIZE: '4',
    MALLOC_MMAP_THRESHOLD_: '131072',
    GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1',
    NODE_OPTIONS: '--max-old-space-size=2000 --max-semi-space-size=2',
    TIDEMARK_MALLOC_ENV: '1',
  });
  const twice = withMallocEnv(withMallocEnv({}));
  expect(twice.NODE_OPTIONS).toBe('--max-old-space-size=2000 --max-semi-space-size=2');
});
