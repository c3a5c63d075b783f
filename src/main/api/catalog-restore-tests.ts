/**
 * Restore tests over the catalog (RestoreTestService): the JobRunner makes and records them, after a
 * job's backups (scheduled) and on demand (here), so the app, the CLI's `tidemark job restore-test`
 * and `tidemark scheduler` share one history of them.
 */
import type { Catalog } from '../engine/catalog/catalog.js';
import type { JobRunner } from '../engine/schedule/runner.js';
import type { EngineRepo } from '../engine/schedule/runner.js';
import type { Job, RestoreTestSummary } from '../../shared/api.js';
import type { RestoreTestService } from './services.js';
import { ApiUsageError } from './errors.js';
import { restoreTestSummary } from './protection.js';

export class CatalogRestoreTests implements RestoreTestService {
  constructor(
    private readonly catalog: Catalog,
    private readonly runner: JobRunner<EngineRepo>,
  ) {}

  private jobName(jobId: number | null): string {
    if (jobId === null) return '(removed job)';
    try {
      return this.catalog.getJob(jobId).name;
    } catch {
      return '(removed job)';
    }
  }

  async test(job: Job, opts: { allBlockFiles?: boolean }): Promise<RestoreTestSummary> {
    const n = Number(job.id);
    if (!Number.isInteger(n)) throw new ApiUsageError('NOT_FOUND', `no job with id ${job.id}`);
    const t = await this.runner.testRestore(this.catalog.getJob(n), { allBlockFiles: opts.allBlockFiles });
    return restoreTestSummary(t, job.name);
  }

  list(filter: { jobId?: string; limit?: number }): RestoreTestSummary[] {
    const jobId = filter.jobId !== undefined ? Number(filter.jobId) : undefined;
    if (jobId !== undefined && !Number.isInteger(jobId)) return [];
    return this.catalog.restoreTests
      .list({ jobId, limit: filter.limit })
      .map((t) => restoreTestSummary(t, this.jobName(t.jobId)));
  }
}
