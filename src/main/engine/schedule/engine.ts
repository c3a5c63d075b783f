/**
 * The real engine behind the JobRunner's JobEngine interface: opens a job's repository with the
 * password (and backend secrets) from a SecretStore, and calls backup, forget, prune and check.
 * This is the one place where the scheduler meets the engine modules.
 */
import { openBackend, type BackendOptions } from '../backend/open.js';
import { RequestLogCollector, type RequestRecord } from '../backend/requestlog/index.js';
import { storeClock } from '../repo/lock.js';
import { maintenanceDue, recordPrune } from '../repo/maintenance.js';
import { openRepository, type Repository } from '../repo/repository.js';
import { backup } from '../backup/index.js';
import { forget, prune } from '../repo/retention.js';
import { check } from '../check/index.js';
import { restoreTest } from '../restoretest/index.js';
import { closeIdlePools } from '../pool/index.js';
import { dropKeptAligned } from '../aligned.js';
import { UsageError } from '../errors.js';
import { lockDaysFor } from '../repo/immutability.js';
import type { JobEngine } from './runner.js';
import { secretKeys, type SecretStore } from '../catalog/secrets.js';
import type { RepositoryRecord } from '../catalog/types.js';

/** Backend option names whose values are secrets: kept in the SecretStore, never in the catalog. */
export const SECRET_OPTIONS = ['secretAccessKey', 'sessionToken', 'password'] as const;

/** Splits backend options into what may go into the catalog and what must go to the SecretStore. */
export function splitSecretOptions(options: Record<string, unknown>): {
  plain: Record<string, unknown>;
  secret: Record<string, string>;
} {
  const plain: Record<string, unknown> = {};
  const secret: Record<string, string> = {};
  for (const [k, v] of Object.entries(options)) {
    if ((SECRET_OPTIONS as readonly string[]).includes(k)) {
      if (v !== undefined && v !== null && v !== '') secret[k] = String(v);
    } else plain[k] = v;
  }
  return { plain, secret };
}

/** Stores a repository's password and secret backend options. */
export async function storeRepositorySecrets(
  secrets: SecretStore,
  repositoryId: number,
  s: { password?: string; options?: Record<string, string> },
): Promise<void> {
  if (s.password !== undefined) await secrets.set(secretKeys.repositoryPassword(repositoryId), s.password);
  for (const [k, v] of Object.entries(s.options ?? {}))
    await secrets.set(secretKeys.repositoryOption(repositoryId, k), v);
}

/** Removes every secret of a repository. */
export async function deleteRepositorySecrets(secrets: SecretStore, repositoryId: number): Promise<void> {
  await secrets.delete(secretKeys.repositoryPassword(repositoryId));
  for (const k of SECRET_OPTIONS) await secrets.delete(secretKeys.repositoryOption(repositoryId, k));
}

/** Opens a catalog repository with its stored secrets. */
export async function openCatalogRepository(
  secrets: SecretStore,
  repository: RepositoryRecord,
  extra: BackendOptions = {},
): Promise<Repository> {
  const password = await secrets.get(secretKeys.repositoryPassword(repository.id));
  if (password === undefined) {
    throw new UsageError(
      `no password is stored for repository "${repository.name}": add it again with its password (tidemark job add --password-file …)`,
    );
  }
  const options: BackendOptions = { ...repository.options, ...extra };
  for (const k of SECRET_OPTIONS) {
    const v = await secrets.get(secretKeys.repositoryOption(repository.id, k));
    if (v !== undefined) options[k] = v;
  }
  return openRepository(await openBackend(repository.location, options), password);
}

export function createJobEngine(opts: {
  secrets: SecretStore;
  backendOptions?: BackendOptions;
  /** Replaces the plain backup, e.g. with one planned from the change journal (tracking/service.ts). */
  backup?: JobEngine<Repository>['backup'];
  /** However short an owner's prune interval, wait this long before taking maintenance over (tests). */
  minTakeoverMs?: number;
}): JobEngine<Repository> {
  // every run's repository requests are counted and kept (capped) for its history
  const logs = new WeakMap<Repository, RequestLogCollector>();
  return {
    openRepo: async (job, repository) => {
      const collector = new RequestLogCollector();
      const outer = opts.backendOptions?.requestLog;
      const requestLog = (r: RequestRecord) => {
        collector.record(r);
        outer?.(r);
      };
      const repo = await openCatalogRepository(opts.secrets, repository, {
        ...opts.backendOptions,
        requestLog,
        // S3 object lock: what this job writes stays locked as long as its retention keeps it
        objectLockDays: lockDaysFor(job.retention),
      });
      logs.set(repo, collector);
      return repo;
    },
    requestLog: (repo) => logs.get(repo)?.summary(),
    storeClockOffsetMs: async (repo) => (await storeClock(repo.backend)).offsetMs,
    maintenance: (repo, o) =>
      maintenanceDue(repo.backend, repo.key, { ...o, minTakeoverMs: opts.minTakeoverMs }),
    recordPrune: (repo, o) => recordPrune(repo.backend, repo.key, o),
    backup: opts.backup ?? ((repo, o) => backup(repo, o)),
    forget: (repo, policy, o) => forget(repo, policy, { dryRun: o.dryRun, job: o.job }),
    prune: (repo, o) => prune(repo, { signal: o.signal }),
    check: (repo, o) => check(repo, { readData: o.readData, signal: o.signal }),
    restoreTest: (repo, o) => restoreTest(repo, o),
    releaseMemory: async () => {
      await closeIdlePools();
      dropKeptAligned();
    },
  };
}
