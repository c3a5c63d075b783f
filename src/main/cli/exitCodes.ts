/** Exit codes of the `tidemark` command (documented in README). */
import { TidemarkError } from '../engine/errors.js';

export const EXIT = {
  OK: 0,
  ERROR: 1,
  USAGE: 2,
  WARNINGS: 3, // completed with warnings (files skipped / some files not restored)
  DAMAGED: 4, // check found problems
  ALARM: 5, // the backup was saved, but its changes look like mass encryption (tidemark alarm list)
  WRONG_PASSWORD: 10,
  LOCKED: 11,
  NO_REPO: 12,
  DESTINATION: 13, // destination full, unwritable or gone
  TEST_FAILED: 14, // test-connection: the destination cannot hold backups (a check failed)
  CANCELLED: 130,
} as const;

export function exitCodeFor(err: unknown): number {
  const code = err instanceof TidemarkError ? err.code : (err as { code?: string })?.code;
  switch (code) {
    case 'WRONG_PASSWORD':
    case 'WRONG_MAINTENANCE_PASSWORD':
    case 'APPEND_ONLY': // the maintenance password is missing
      return EXIT.WRONG_PASSWORD;
    case 'REPO_LOCKED':
      return EXIT.LOCKED;
    case 'REPO_NOT_FOUND':
    case 'REPO_EXISTS':
      return EXIT.NO_REPO;
    case 'DESTINATION_FULL':
    case 'DESTINATION_UNWRITABLE':
    case 'DESTINATION_GONE':
      return EXIT.DESTINATION;
    case 'USAGE':
    case 'NOT_FOUND':
    case 'AMBIGUOUS':
    case 'EMPTY_PASSWORD':
    case 'commander.invalidArgument':
    case 'commander.missingArgument':
    case 'commander.unknownOption':
    case 'commander.unknownCommand':
    case 'commander.missingMandatoryOptionValue':
    case 'commander.optionMissingArgument':
    case 'commander.excessArguments':
      return EXIT.USAGE;
    case 'CORRUPT_OBJECT':
      return EXIT.DAMAGED;
    case 'ABORTED':
      return EXIT.CANCELLED;
    default:
      return EXIT.ERROR;
  }
}
