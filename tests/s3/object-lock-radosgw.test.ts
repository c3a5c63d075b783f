/**
 * S3 object lock against a real store (Ceph radosgw, scripts/radosgw.sh; s3rver has no object lock):
 * a repository made with object lock writes its config, keys, packs, index files and snapshots locked;
 * a stolen key cannot delete or overwrite a locked version (governance without the bypass permission,
 * and compliance at all); `recoverAsOf` brings the repository back as it was before the attack, and it
 * checks clean and restores byte for byte; prune removes what no snapshot needs from the repository's
 * view but keeps (and reports) the locked versions, extends the lock of what is current, and frees old
 * versions once their lock has run out. Skipped, with the reason, where Ceph is not installed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import crypto from 'node:crypto';
import {
  DeleteBucketCommand,
  DeleteObjectCommand,
  GetObjectRetentionCommand,
  ListObjectVersionsCommand,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { S3Backend, S3ObjectLockError } from '../../src/main/engine/backend/s3/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import { check } from '../../src/main/engine/check/index.js';
import { forget, prune } from '../../src/main/engine/repo/retention.js';
import { RepoNotFoundError } from '../../src/main/engine/errors.js';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { OBJECT_TYPES } from '../../src/main/engine/backend/types.js';
import { randomPrefix, s3Backend, useRadosgw, type S3Server } from './servers.js';
import { runCli } from '../../src/main/cli/program.js';
import { registerRecoverCommand } from '../../src/main/cli/commands/recover.js';
import { createApi } from '../../src/main/api/wiring.js';
import { MemorySecretStore } from '../../src/main/engine/catalog/secrets.js';
import {
  tempDir,
  writeTree,
  randomBytes,
  describeTree,
  expectSameTrees,
  until,
} from '../helpers/fixtures.js';

const rgw = await useRadosgw();
const DAY = 86_400_000;

/** Every version (and delete marker) in a bucket. */
async function versions(b: S3Backend) {
  const out: { Key: string; VersionId: string; marker: boolean; latest: boolean }[] = [];
  let KeyMarker: string | undefined;
  let VersionIdMarker: string | undefined;
  for (;;) {
    const r = await b.sdk.send(
      new ListObjectVersionsCommand({ Bucket: b.bucket, KeyMarker, VersionIdMarker }),
    );
    for (const v of r.Versions ?? [])
      out.push({ Key: v.Key!, VersionId: v.VersionId!, marker: false, latest: !!v.IsLatest });
    for (const m of r.DeleteMarkers ?? [])
      out.push({ Key: m.Key!, VersionId: m.VersionId!, marker: true, latest: !!m.IsLatest });
    if (!r.IsTruncated) return out;
    KeyMarker = r.NextKeyMarker;
    VersionIdMarker = r.NextVersionIdMarker;
  }
}

async function retention(b: S3Backend, key: string, versionId?: string) {
  try {
    const r = await b.sdk.send(
      new GetObjectRetentionCommand({ Bucket: b.bucket, Key: key, VersionId: versionId }),
    );
    return { mode: r.Retention?.Mode, until: r.Retention?.RetainUntilDate?.getTime() ?? 0 };
  } catch {
    return undefined;
  }
}

/** Deletes a test bucket whole: every version, governance locks bypassed (compliance ones must have run out). */
async function dropBucket(server: S3Server, bucket: string) {
  const b = s3Backend(server, bucket, { prefix: '', createBucket: false });
  try {
    for (const v of await versions(b))
      await b.sdk
        .send(
          new DeleteObjectCommand({
            Bucket: bucket,
            Key: v.Key,
            VersionId: v.VersionId,
            BypassGovernanceRetention: true,
          }),
        )
        .catch(() => {});
    await b.sdk.send(new DeleteBucketCommand({ Bucket: bucket })).catch(() => {});
  } finally {
    await b.close();
  }
}

if (typeof rgw === 'string') {
  describe.skip(`S3 object lock on radosgw skipped: ${rgw}`, () => {
    it('needs radosgw', () => {});
  });
} else {
  describe('S3 object lock on radosgw', () => {
    const buckets: string[] = [];
    let work: string;
    const newBucket = (tag: string) => {
      const name = `tm-lock-${tag}-${crypto.randomBytes(4).toString('hex')}`;
      buckets.push(name);
      return name;
    };
    beforeAll(async () => {
      work = await tempDir('tm-lock-');
    });
    afterAll(async () => {
      for (const b of buckets) await dropBucket(rgw, b);
    });

    it('refuses a bucket that exists without object lock, with a clear error', async () => {
      const bucket = newBucket('plain');
      const plain = s3Backend(rgw, bucket);
      await plain.init(); // made without object lock
      await plain.close();
      await expect(
        Repository.init(s3Backend(rgw, bucket), 'pw', {
          objectLock: { mode: 'governance', days: 1 },
          kdf: { N: 1024 },
        }),
      ).rejects.toBeInstanceOf(S3ObjectLockError);
    });

    it('locks history, survives a stolen key, recovers, and prunes around the locks', async () => {
      const bucket = newBucket('repo');
      const prefix = randomPrefix('lock');
      const opened = () => s3Backend(rgw, bucket, { prefix });
      const t0 = Date.now();
      const repo = await Repository.init(opened(), 'pw', {
        objectLock: { mode: 'governance', days: 1 },
        kdf: { N: 1024 },
      });
      expect(repo.immutability?.objectLock).toEqual({ mode: 'governance', days: 1 });
      const src = path.join(work, 'src');
      await writeTree(src, {
        'keep.bin': randomBytes(3 * 1024 * 1024, 1),
        'gone.bin': randomBytes(2 * 1024 * 1024, 2),
        docs: { dir: { 'a.txt': 'alpha '.repeat(5000), 'b.txt': 'beta' } },
      });
      const first = await backup(repo, { paths: [src], host: 'pc' });
      await fs.rm(path.join(src, 'gone.bin'));
      await fs.writeFile(path.join(src, 'docs', 'b.txt'), 'beta 2');
      const second = await backup(repo, { paths: [src], host: 'pc' });
      const before = await describeTree(src);
      await repo.close();

      // every history object is locked for a day (governance); lock leases are not
      const store = opened();
      const keyOf = (type: Parameters<S3Backend['key']>[0], name: string) => store.key(type, name);
      const objects: { type: Parameters<S3Backend['key']>[0]; name: string }[] = [];
      for (const type of ['config', 'keys', 'data', 'index', 'snapshots'] as const)
        for await (const o of store.list(type)) objects.push({ type, name: o.name });
      expect(objects.filter((o) => o.type === 'data').length).toBeGreaterThan(1);
      for (const o of objects) {
        const r = await retention(store, keyOf(o.type, o.name));
        expect(r?.mode, `${o.type}/${o.name}`).toBe('GOVERNANCE');
        expect(r!.until).toBeGreaterThan(t0 + DAY - 60_000);
      }
      const attackAt = Date.now();
      await new Promise((r) => setTimeout(r, 1100)); // the attack's writes carry later (whole-second) times

      // the stolen key: deletes every object, tries to delete every version, overwrites a snapshot
      const thief = opened();
      let refused = 0;
      for (const v of await versions(thief)) {
        if (!v.Key.startsWith(prefix)) continue;
        await thief.sdk
          .send(new DeleteObjectCommand({ Bucket: bucket, Key: v.Key, VersionId: v.VersionId }))
          .catch((err: { name?: string }) => {
            expect(err.name).toBe('AccessDenied');
            refused++;
          });
      }
      expect(refused).toBe(objects.length); // every locked version stayed
      await thief.sdk.send(
        new PutObjectCommand({
          Bucket: bucket,
          Key: keyOf('snapshots', second.snapshotId),
          Body: Buffer.from('ransom'),
        }),
      );
      for (const o of objects) if (o.type !== 'snapshots') await thief.remove(o.type, o.name);
      await thief.close();
      await expect(Repository.open(opened(), 'pw')).rejects.toBeInstanceOf(RepoNotFoundError);

      // recover the repository as it was before the attack
      const rescuer = opened();
      const dry = await rescuer.recoverAsOf(attackAt, true);
      // everything but the first snapshot, which the thief left as it was
      expect(dry.undeleted.length + dry.restored.length).toBe(objects.length - 1);
      const rec = await rescuer.recoverAsOf(attackAt);
      await rescuer.close();
      expect(rec.restored).toEqual([`snapshots/${second.snapshotId}`]);
      expect(rec.undeleted.length).toBe(objects.filter((o) => o.type !== 'snapshots').length);
      expect(rec.lost).toEqual([]);
      const back = await Repository.open(opened(), 'pw');
      expect((await back.listSnapshots()).map((s) => s.id).sort()).toEqual(
        [first.snapshotId, second.snapshotId].sort(),
      );
      expect((await check(back, { readData: true })).ok).toBe(true);
      const out = path.join(work, 'restored');
      await restore(back, { snapshot: second.snapshotId, target: out });
      expectSameTrees(before, await describeTree(path.join(out, src)));

      // prune: the first snapshot's own data goes from the repository's view, but stays locked in the store
      const locksBefore = await retention(store, keyOf('snapshots', second.snapshotId));
      await forget(back, { keepLast: 1 }, { host: 'pc' });
      const pr = await prune(back, { graceMs: 0 });
      expect(pr.packsRemoved).toBeGreaterThan(0);
      expect(pr.objectLock!.extended).toBeGreaterThan(0);
      expect(pr.objectLock!.locked).toBeGreaterThan(0); // the removed packs (and index files, snapshot)
      expect(Date.parse(pr.objectLock!.lockedUntil!)).toBeGreaterThan(Date.now() + DAY - 600_000);
      const locksAfter = await retention(store, keyOf('snapshots', second.snapshotId));
      expect(locksAfter!.until).toBeGreaterThan(locksBefore!.until); // the newest snapshot's lock moved on
      expect((await check(back, { readData: true })).ok).toBe(true);
      await back.close();

      // a copy of the repository in a folder (a sync tool's) opens and checks as any folder
      const copyDir = path.join(work, 'copy');
      const local = new LocalBackend(copyDir);
      await local.init();
      for (const type of OBJECT_TYPES)
        for await (const o of store.list(type))
          await local.save(type, o.name, await store.load(type, o.name));
      const copy = await Repository.open(local, 'pw');
      expect(copy.immutability?.objectLock).toEqual({ mode: 'governance', days: 1 });
      expect((await check(copy, { readData: true })).ok).toBe(true);
      await copy.close();
      await store.close();
    });

    it('compliance mode refuses even the bypass; old versions are freed once their lock ran out', async () => {
      const bucket = newBucket('comp');
      const MiB = 1024 * 1024;
      const b = s3Backend(rgw, bucket, { partSize: 5 * MiB, multipartThreshold: 5 * MiB });
      const key = (n: string) => b.key('data', n.repeat(32));
      b.enableObjectLock({ mode: 'compliance', days: 1 });
      await b.init();
      await b.verifyObjectLock();
      // C: compliance for two minutes: nobody may delete its version, bypass or not
      b.enableObjectLock({ mode: 'compliance', days: 120 / 86_400 });
      await b.save('data', 'cc'.repeat(32), randomBytes(500, 5));
      const [c] = (await versions(b)).filter((x) => x.Key === key('cc'));
      expect((await retention(b, c.Key))?.mode).toBe('COMPLIANCE');
      await expect(
        b.sdk.send(
          new DeleteObjectCommand({
            Bucket: bucket,
            Key: c.Key,
            VersionId: c.VersionId,
            BypassGovernanceRetention: true,
          }),
        ),
      ).rejects.toMatchObject({ name: 'AccessDenied' });
      // B: governance for a day, written as a multipart upload (Ceph drops the lock asked for at its start)
      b.enableObjectLock({ mode: 'governance', days: 1 });
      await b.save('data', 'bb'.repeat(32), randomBytes(6 * MiB, 4));
      expect((await retention(b, key('bb')))?.mode).toBe('GOVERNANCE');
      // A: compliance for two seconds
      b.enableObjectLock({ mode: 'compliance', days: 2 / 86_400 });
      await b.save('data', 'aa'.repeat(32), randomBytes(1000, 3));
      const [a] = (await versions(b)).filter((x) => x.Key === key('aa'));
      await b.remove('data', 'aa'.repeat(32)); // delete markers on top: the versions stay
      await b.remove('data', 'bb'.repeat(32));
      const early = await b.purgeExpiredVersions();
      expect(early.locked).toBeGreaterThanOrEqual(1); // B at least (A too, unless its two seconds are up)
      expect(early.bytesLocked).toBeGreaterThanOrEqual(6 * MiB);
      const aUntil = (await retention(b, a.Key, a.VersionId))?.until ?? 0;
      await until(async () => (await b.storeNow()) > aUntil + 1000, 'the short lock to run out', 30_000);
      const late = await b.purgeExpiredVersions();
      expect(late).toMatchObject({ locked: 1, bytesLocked: 6 * MiB }); // B stays
      expect(late.purged + early.purged).toBe(1); // A went, with its delete marker
      expect((await versions(b)).some((x) => x.Key === key('aa'))).toBe(false);
      await b.close();
    });

    it('through the CLI: init --object-lock, prune reports the locks, recover --as-of undoes deletes', async () => {
      const bucket = newBucket('cli');
      const location = `s3:${rgw.endpoint}/${bucket}/repo`;
      const env = {
        AWS_ACCESS_KEY_ID: rgw.accessKeyId,
        AWS_SECRET_ACCESS_KEY: rgw.secretAccessKey,
        TIDEMARK_PASSWORD: 'cli lock pw',
        TIDEMARK_TEST_KDF_N: '1024',
      };
      const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
      Object.assign(process.env, env);
      const cli = async (...args: string[]) => {
        let out = '';
        let err = '';
        const io = { out: (x: string) => (out += x), err: (x: string) => (err += x), isTTY: false };
        const code = await runCli(args, io, [registerRecoverCommand]);
        return { code, out, err };
      };
      try {
        const init = await cli('-r', location, 'init', '--object-lock', 'governance', '--lock-days', '2');
        expect(init.code).toBe(0);
        expect(init.out).toMatch(/Object lock \(governance\): every backup object stays locked for 2 days/);
        const src = path.join(work, 'cli-src');
        await writeTree(src, { 'x.txt': 'x'.repeat(10_000), 'y.bin': randomBytes(200_000, 9) });
        const snap = JSON.parse((await cli('-r', location, '--json', 'backup', src)).out).id as string;
        const pr = await cli('-r', location, 'prune');
        expect(pr.code).toBe(0);
        expect(pr.out).toMatch(/object lock: \d+ objects' locks extended/);
        const asOf = new Date().toISOString();
        await new Promise((r) => setTimeout(r, 1100));
        const thief = s3Backend(rgw, bucket, { prefix: 'repo' });
        await thief.remove('snapshots', snap);
        await thief.close();
        expect(JSON.parse((await cli('-r', location, '--json', 'snapshots')).out)).toEqual([]);
        const rec = await cli('-r', location, 'recover', '--as-of', asOf);
        expect(rec.code).toBe(0);
        expect(rec.out).toMatch(/brought back 1 deleted and 0 overwritten objects/);
        const back = JSON.parse((await cli('-r', location, '--json', 'snapshots')).out);
        expect(back.map((x: { id: string }) => x.id)).toEqual([snap]);
        expect((await cli('-r', location, 'check', '--read-data')).code).toBe(0);
      } finally {
        for (const [k, v] of Object.entries(saved)) {
          if (v === undefined) delete process.env[k];
          else process.env[k] = v;
        }
      }
    });

    it("through the app: a job's object lock lasts as long as its retention keeps snapshots", async () => {
      const bucket = newBucket('app');
      const src = path.join(work, 'app-src');
      await writeTree(src, { 'z.txt': 'zed' });
      const wired = createApi({
        mode: 'browser',
        dataDir: path.join(work, 'app-data'),
        secrets: new MemorySecretStore(),
      });
      const finished = new Set<string>();
      wired.api.on((event, payload) => {
        if (event === 'run.finished') finished.add((payload as { id: string }).id);
      });
      try {
        const job = await wired.api.call('jobs.create', {
          name: 'locked',
          sources: [src],
          destination: {
            kind: 's3',
            endpoint: rgw.endpoint,
            bucket,
            prefix: 'pc',
            pathStyle: true,
            accessKeyId: rgw.accessKeyId,
            objectLock: 'governance', // (compliance would stay in the shared test store for 41 days)
          },
          secretAccessKey: rgw.secretAccessKey,
          schedule: { kind: 'manual' },
          retention: { keepDaily: 40 },
          password: 'app lock password',
        });
        expect(job.destination).toMatchObject({ objectLock: 'governance' });
        const run = await wired.api.call('jobs.runNow', { id: job.id });
        await until(() => finished.has(run.id), 'the run to finish');
        const snaps = await wired.api.call('snapshots.list', { jobId: job.id });
        expect(snaps).toHaveLength(1);
        const b = s3Backend(rgw, bucket, { prefix: 'pc' });
        const r = await retention(b, b.key('snapshots', snaps[0].id));
        await b.close();
        expect(r?.mode).toBe('GOVERNANCE');
        // 40 daily snapshots + a day: 41 days (more than the repository's own 30)
        expect(r!.until).toBeGreaterThan(Date.now() + 40.9 * DAY);
        expect(r!.until).toBeLessThan(Date.now() + 41.1 * DAY);
      } finally {
        await wired.api.close();
        wired.close();
      }
    });
  });
}
