/** Where the CLI keeps its data and looks for the repository, for the CLI and its launcher (early.ts). */
import os from 'node:os';
import path from 'node:path';

export function tidemarkHome(env: NodeJS.ProcessEnv = process.env): string {
  return env.TIDEMARK_HOME ?? path.join(os.homedir(), '.tidemark');
}

/** The repository when --repo names none: $TIDEMARK_REPOSITORY, else the home's `repository` folder. */
export function defaultRepoLocation(env: NodeJS.ProcessEnv = process.env): string {
  return env.TIDEMARK_REPOSITORY ?? path.join(tidemarkHome(env), 'repository');
}
