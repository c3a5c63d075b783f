// The LVM snapshot tests run for real where the machine itself has no device-mapper (this project's build
// machines): scripts/kvm-guest.sh boots Debian's kernel in a QEMU guest that shares this project folder,
// runs the tests there as root (vitest on lvm.test.ts, or the quick check below), and hands back the exit
// code, the output and vitest's JSON report. This test fails when a test in the guest fails, or when one
// is skipped without saying why. It skips with its reason only where no guest can be booted (QEMU, Debian's kernel or klibc missing:
// .ci/setup.d/36-kvm-guest.sh installs them), and inside the guest itself.
//
// Which tests (TIDEMARK_KVM_LVM, else by accelerator):
// - full (`npm run test:lvm`; the default where the guest runs on KVM): all of lvm.test.ts, udev in the
//   guest. On an emulated CPU this takes about half an hour.
// - provider: the provider's six tests on real volumes (thin, classic, overflow, XFS, dm-N, leftovers);
//   9-19 minutes on an emulated CPU on the loaded shared machine, much of it vitest starting up.
// - quick (the default where /dev/kvm cannot run Debian's kernel, as on these build machines: PVM, so the
//   guest's CPU is emulated, TCG, 10-20 times slower): fixtures/lvm-quick.ts, the provider's thin and
//   classic snapshots taken, read, checked and released, with node alone (no vitest to start), one vCPU,
//   no udev; 99-209 s of test time on the loaded shared machine (load 14-25).
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const script = path.join(root, 'scripts', 'kvm-guest.sh');
const PROVIDER_TESTS = 'the LVM provider on real volumes';

function probe(): { skip?: string; accel?: string } {
  if (process.env.TIDEMARK_KVM_GUEST) return { skip: 'already inside the test guest' };
  if (process.platform !== 'linux') return { skip: 'the test guest runs on Linux' };
  if (process.getuid?.() !== 0)
    return { skip: 'needs root (the guest shares /etc and /usr as root sees them)' };
  const r = spawnSync('bash', [script, '--check'], { encoding: 'utf8' });
  const said = `${r.stdout}${r.stderr}`.trim();
  return r.status === 0 ? { accel: said } : { skip: said || `kvm-guest.sh --check failed (${r.status})` };
}

const { skip, accel } = probe();
type Mode = 'full' | 'provider' | 'quick';
const asked = process.env.TIDEMARK_KVM_LVM;
if (asked && !['full', 'provider', 'quick'].includes(asked))
  throw new Error(`TIDEMARK_KVM_LVM=${asked}: full, provider or quick`);
const mode: Mode = (asked as Mode | undefined) ?? (accel === 'kvm' ? 'full' : 'quick');
// a limit for hangs, not a speed check: on an emulated CPU on a loaded 2-core machine the provider's
// tests took 9-19 minutes, the quick check 2-3.5
const limitS = { full: accel === 'kvm' ? 900 : 3600, provider: 1500, quick: 600 }[mode];
const WHAT = {
  full: 'every test of lvm.test.ts',
  provider: "lvm.test.ts's provider tests",
  quick: 'the quick check (thin and classic snapshots; TIDEMARK_KVM_LVM=full or npm run test:lvm: all)',
}[mode];

/** Runs COMMAND in the guest; its exit code and its console output (with kvm-guest.sh's own lines). */
async function inGuest(out: string, options: string[], command: string[]) {
  const args = [script, '--timeout', String(limitS), '--out', out, ...options, '--', ...command];
  let output = '';
  const code = await new Promise<number | null>((resolve, reject) => {
    const child = spawn('bash', args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.once('error', reject);
    child.once('close', resolve);
  });
  return { code, output, tail: output.split('\n').slice(-80).join('\n') };
}

interface JsonReport {
  testResults: {
    assertionResults: { fullName: string; status: string; failureMessages: string[] }[];
  }[];
}

describe.skipIf(!!skip)(
  `LVM snapshots in a guest with device-mapper${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    if (mode === 'quick')
      it(
        `the LVM provider's thin and classic snapshots work in the guest (${accel}; ${WHAT})`,
        async () => {
          const out = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-lvm-kvm-'));
          try {
            const r = await inGuest(
              out,
              ['--cpus', '1', '--no-udev'],
              ['node', '--import', 'tsx', 'tests/snapshot/fixtures/lvm-quick.ts'],
            );
            console.log(r.tail);
            expect(
              r.code,
              `the guest's check failed (exit code ${r.code}); its output ends:\n${r.tail}`,
            ).toBe(0);
            for (const kind of ['thin', 'classic'])
              for (const what of ['shows the volume as it was', 'released'])
                expect(r.output).toMatch(new RegExp(`^ok: ${kind}: .*${what}`, 'm'));
            expect(r.output).toMatch(/^lvm-quick: all passed/m);
          } finally {
            fs.rmSync(out, { recursive: true, force: true });
          }
        },
        (limitS + 60) * 1000,
      );
    else
      it(
        `lvm.test.ts passes in the guest (${accel}; ${WHAT})`,
        async () => {
          const full = mode === 'full';
          const out = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-lvm-kvm-'));
          try {
            const r = await inGuest(
              out,
              // udev triples the time of each LVM command on an emulated CPU; the full run keeps it
              full ? [] : ['--no-udev'],
              [
                'node_modules/.bin/vitest',
                'run',
                'tests/snapshot/lvm.test.ts',
                '--reporter=verbose',
                '--reporter=json',
                '--outputFile.json=/mnt/tidemark-out/report.json',
                ...(full ? [] : ['-t', PROVIDER_TESTS]),
              ],
            );
            console.log(r.tail);
            expect(
              r.code,
              `the guest's vitest failed (exit code ${r.code}); its output ends:\n${r.tail}`,
            ).toBe(0);
            const report = JSON.parse(fs.readFileSync(path.join(out, 'report.json'), 'utf8')) as JsonReport;
            const results = report.testResults.flatMap((f) => f.assertionResults);
            const selected = results.filter((x) => full || x.fullName.startsWith(PROVIDER_TESTS));
            // the provider's six, and the two backup suites' four each
            expect(selected.length, r.tail).toBe(full ? 14 : 6);
            const notPassed = selected.filter((x) => x.status !== 'passed');
            // a test may skip in the guest only with its reason in its name (xfsprogs missing, say)
            for (const x of notPassed)
              expect(x.status === 'skipped' && /\(skipped: /.test(x.fullName), x.fullName).toBe(true);
            expect(selected.filter((x) => x.status === 'passed').length).toBeGreaterThanOrEqual(
              selected.length - 1,
            );
          } finally {
            fs.rmSync(out, { recursive: true, force: true });
          }
        },
        (limitS + 60) * 1000,
      );
  },
);
