/**
 * Append-only repositories (repo/immutability.ts, backend/appendonly): backups into one never delete or
 * rewrite a file of the repository folder (lock leases excepted, which they remove when done); forget,
 * prune and key changes are refused without the maintenance password, a wrong one is refused, and with
 * the right one they work. Through the CLI too: `init --append-only`, `prune` without and with
 * --maintenance-password-file.
 */
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import fs from 'node:fs/promises';
import fss from 'node:fs';
import path from 'node:path';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { loadPackHeader } from '../../src/main/engine/repo/pack.js';
import { BlobType } from '../../src/main/engine/repo/blobIndex.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { forget, prune } from '../../src/main/engine/repo/retention.js';
import { check } from '../../src/main/engine/check/index.js';
import { repair } from '../../src/main/engine/repair/index.js';
import { AppendOnlyError, WrongMaintenancePasswordError } from '../../src/main/engine/errors.js';
import { runCli } from '../../src/main/cli/program.js';
import { tempDir, writeTree, randomBytes } from '../helpers/fixtures.js';

const KDF = { kdf: { N: 1024 } };
const MAINT = 'maintenance pass 42';

/** Every file of the repository folder: its inode, size and modification time. */
async function files(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const walk = async (d: string) => {
    for (const e of await fs.readdir(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else {
        const st = await fs.stat(p, { bigint: true });
        out.set(path.relative(dir, p), `${st.ino}:${st.size}:${st.mtimeNs}`);
      }
    }
  };
  await walk(dir);
  return out;
}

describe('append-only repositories', () => {
  let work: string;
  let src: string;
  let repoDir: string;

  beforeAll(async () => {
    work = await tempDir('tm-append-');
    src = path.join(work, 'src');
    repoDir = path.join(work, 'repo');
    await writeTree(src, {
      'a.bin': randomBytes(600_000, 1),
      'b.txt': 'bee\n'.repeat(1000),
      sub: { dir: { 'c.txt': 'c' } },
    });
  });

  it('is chosen with a maintenance password of its own', async () => {
    const dir = path.join(work, 'bad');
    await expect(
      Repository.init(new LocalBackend(dir), 'pw-secret', {
        ...KDF,
        appendOnly: { maintenancePassword: 'pw-secret' },
      }),
    ).rejects.toThrow(/must differ/);
    await expect(
      Repository.init(new LocalBackend(dir), 'pw-secret', {
        ...KDF,
        appendOnly: { maintenancePassword: 'short' },
      }),
    ).rejects.toThrow(/at least 8/);
  });

  it('backs up without deleting or rewriting anything; deleting needs the maintenance password', async () => {
    let repo = await Repository.init(new LocalBackend(repoDir), 'pw', {
      ...KDF,
      appendOnly: { maintenancePassword: MAINT },
    });
    expect(repo.immutability?.appendOnly).toBeDefined();
    const first = await backup(repo, { paths: [src] });
    const before = await files(repoDir);
    await fs.writeFile(path.join(src, 'b.txt'), 'changed');
    await fs.rm(path.join(src, 'a.bin'));
    await fs.writeFile(path.join(src, 'd.bin'), randomBytes(300_000, 4));
    const second = await backup(repo, { paths: [src] });
    await backup(repo, { paths: [src], forceFull: true }); // reads all again, stores nothing twice: no rewrite
    const after = await files(repoDir);
    for (const [f, id] of before) if (!f.startsWith('locks/')) expect(after.get(f), f).toBe(id); // none gone or rewritten
    expect([...after.keys()].filter((f) => f.startsWith('locks/'))).toEqual([]); // leases removed when done
    expect(after.size).toBeGreaterThan(before.size);

    // forget, prune and key changes are refused, and change nothing
    await expect(forget(repo, { keepLast: 1 })).rejects.toBeInstanceOf(AppendOnlyError);
    await expect(prune(repo)).rejects.toBeInstanceOf(AppendOnlyError);
    await expect(repair(repo)).rejects.toBeInstanceOf(AppendOnlyError); // before it writes anything
    expect((await repair(repo, { dryRun: true })).clean).toBe(true); // a dry run only reads
    await expect(repo.changePassword('new pw')).rejects.toBeInstanceOf(AppendOnlyError);
    await expect(repo.backend.remove('snapshots', first.snapshotId)).rejects.toBeInstanceOf(AppendOnlyError);
    expect((await forget(repo, { keepLast: 1 }, { dryRun: true })).remove.map((s) => s.id).sort()).toEqual(
      [first.snapshotId, second.snapshotId].sort(),
    );
    expect((await repo.listKeys()).length).toBe(1);
    expect(await files(repoDir)).toEqual(after);
    await expect(repo.unlockMaintenance('wrong one!')).rejects.toBeInstanceOf(WrongMaintenancePasswordError);
    await repo.close();

    // with the maintenance password: retention and prune work; a repository opened again is locked again
    repo = await Repository.open(new LocalBackend(repoDir), 'pw');
    await repo.unlockMaintenance(MAINT);
    expect((await forget(repo, { keepLast: 1 })).remove.map((s) => s.id).sort()).toEqual(
      [first.snapshotId, second.snapshotId].sort(),
    );
    const pr = await prune(repo, { graceMs: 0 });
    expect(pr.packsRemoved).toBeGreaterThan(0);
    expect((await check(repo, { readData: true })).ok).toBe(true);
    // and repair may remove what is damaged (a flipped byte in a pack: its blobs are read again from src)
    // a pack of file data (one holding the snapshot's root folder would take the snapshot with it)
    let pack = '';
    for (const f of after.keys()) {
      if (!f.startsWith('data/') || !fss.existsSync(path.join(repoDir, f))) continue;
      const { blobs } = await loadPackHeader(repo.backend, repo.key, path.basename(f));
      if (blobs.every((b) => b.type === BlobType.Data)) {
        pack = f;
        break;
      }
    }
    expect(pack).not.toBe('');
    const bytes = await fs.readFile(path.join(repoDir, pack));
    bytes[bytes.length >> 1] ^= 1;
    await fs.writeFile(path.join(repoDir, pack), bytes);
    expect((await check(repo, { readData: true })).ok).toBe(false);
    const fixed = await repair(repo);
    expect(fixed.packs.damaged.map((d) => d.pack)).toEqual([path.basename(pack)]);
    expect(fss.existsSync(path.join(repoDir, pack))).toBe(false);
    expect((await check(repo, { readData: true })).ok).toBe(true);
    await repo.close();
    repo = await Repository.open(new LocalBackend(repoDir), 'pw');
    expect((await repo.listSnapshots()).length).toBe(1);
    await expect(prune(repo)).rejects.toBeInstanceOf(AppendOnlyError);
    await repo.close();
  });

  describe('through the CLI', () => {
    const saved: Record<string, string | undefined> = {};
    beforeAll(() => {
      for (const k of ['TIDEMARK_PASSWORD', 'TIDEMARK_TEST_KDF_N', 'TIDEMARK_MAINTENANCE_PASSWORD'])
        saved[k] = process.env[k];
      process.env.TIDEMARK_PASSWORD = 'cli append pw';
      process.env.TIDEMARK_TEST_KDF_N = '1024';
    });
    afterAll(() => {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    });
    const cli = async (...args: string[]) => {
      let out = '';
      let err = '';
      const code = await runCli(args, { out: (s) => (out += s), err: (s) => (err += s), isTTY: false });
      return { code, out, err };
    };

    it('init --append-only, then prune only with the maintenance password', async () => {
      const dir = path.join(work, 'cli-repo');
      process.env.TIDEMARK_MAINTENANCE_PASSWORD = MAINT;
      const init = await cli('-r', dir, 'init', '--append-only');
      expect(init.code).toBe(0);
      expect(init.out).toMatch(/Append-only: backups never delete or rewrite anything/);
      delete process.env.TIDEMARK_MAINTENANCE_PASSWORD;
      expect((await cli('-r', dir, 'backup', src)).code).toBe(0);
      expect((await cli('-r', dir, 'backup', src, '--force-full')).code).toBe(0);
      const refused = await cli('-r', dir, 'forget', '--keep-last', '1', '--prune');
      expect(refused.code).toBe(10);
      expect(refused.err).toMatch(/append-only: forget needs its maintenance password/);
      const file = path.join(work, 'maint.txt');
      fss.writeFileSync(file, 'wrong password\n');
      const wrong = await cli('-r', dir, '--maintenance-password-file', file, 'prune');
      expect(wrong.code).toBe(10);
      expect(wrong.err).toMatch(/wrong maintenance password/);
      fss.writeFileSync(file, `${MAINT}\n`);
      const ok = await cli(
        '-r',
        dir,
        '--maintenance-password-file',
        file,
        'forget',
        '--keep-last',
        '1',
        '--prune',
      );
      expect(ok.code).toBe(0);
      expect(ok.out).toMatch(/1 kept, 1 removed/);
    });
  });
});
