/**
 * `tidemark test-connection [LOCATION]` (alias `repo-test`): the job wizard's "Test connection" for
 * scripts and servers. It really talks to the destination — for S3: reachable, keys, bucket, list,
 * write/read/delete of a probe object, clock, an existing repository; for a folder: exists, writable,
 * empty or a repository — and prints each check. Exit 0 when the destination can hold backups,
 * 14 when a check failed. S3 keys come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, as for every
 * other command; nothing needs the repository password.
 */
import type { Command } from 'commander';
import { diagnoseLocation } from '../../engine/backend/diagnose.js';
import type { BackendOptions } from '../../engine/backend/open.js';
import { defaultRepoLocation, type CliContext, type GlobalOptions } from '../program.js';
import { EXIT } from '../exitCodes.js';

const MARK = { passed: '✓', failed: '✗', warning: '!', skipped: '-' } as const;

export function registerTestCommand(program: Command, ctx: CliContext): void {
  program
    .command('test-connection')
    .alias('repo-test')
    .description('check that a destination (folder or s3:https://host/bucket/prefix) can hold backups')
    .argument(
      '[location]',
      'the destination (default: --repo, $TIDEMARK_REPOSITORY or ~/.tidemark/repository)',
    )
    .option(
      '--endpoint <url>',
      'S3 endpoint, e.g. https://s3.example.com (with --bucket instead of a location)',
    )
    .option('--bucket <name>', 'S3 bucket')
    .option('--prefix <path>', 'folder inside the bucket')
    .option('--region <region>', 'S3 region (default: from an AWS endpoint, else us-east-1)')
    .option('--path-style', 'path-style addressing (https://host/bucket/key; the default for non-AWS hosts)')
    .option('--virtual-hosted', 'virtual-hosted addressing (https://bucket.host/key; the default for AWS)')
    .option('--allow-insecure-http', 'allow plain http to a host that is not this computer')
    .action(async (loc: string | undefined, o) => {
      const g = program.opts<GlobalOptions>();
      const options: BackendOptions = {};
      if (o.endpoint) options.endpoint = o.endpoint;
      if (o.bucket) options.bucket = o.bucket;
      if (o.prefix !== undefined) options.prefix = o.prefix;
      if (o.region) options.region = o.region;
      if (o.pathStyle) options.pathStyle = true;
      if (o.virtualHosted) options.pathStyle = false;
      if (o.allowInsecureHttp) options.allowInsecureHttp = true;
      const location = loc ?? (o.bucket ? 's3:' : (g.repo ?? defaultRepoLocation()));
      const d = await diagnoseLocation(location, options);
      if (g.json) ctx.io.out(JSON.stringify(d, null, 2) + '\n');
      else {
        const lines = [`testing ${d.location}`];
        for (const c of d.checks)
          lines.push(
            `  ${MARK[c.status]} ${c.label}: ${c.message}${c.code && c.status === 'failed' ? ` [${c.code}]` : ''}`,
          );
        lines.push(d.ok ? `OK: ${d.summary}` : `FAILED: ${d.summary}`);
        ctx.io.out(lines.join('\n') + '\n');
      }
      if (!d.ok) ctx.setExitCode(EXIT.TEST_FAILED);
    });
}
