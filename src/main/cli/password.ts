/** Where the CLI gets passwords: --password-file, TIDEMARK_PASSWORD(_FILE), or a hidden prompt on a terminal. */
import fs from 'node:fs/promises';
import { UsageError } from '../engine/errors.js';

export async function readPasswordFile(file: string): Promise<string> {
  const text = await fs.readFile(file, 'utf8').catch((err) => {
    throw new UsageError(`cannot read the password file ${file}: ${err.message}`);
  });
  return passwordOfFile(text);
}

/** A password file's password: its text without one final line break. */
export function passwordOfFile(text: string): string {
  return text.replace(/\r?\n$/, '');
}

export async function prompt(question: string): Promise<string> {
  const stdin = process.stdin;
  if (!stdin.isTTY)
    throw new UsageError(
      'no password given: use --password-file, TIDEMARK_PASSWORD or TIDEMARK_PASSWORD_FILE, or run on a terminal',
    );
  process.stderr.write(question);
  stdin.setRawMode(true);
  stdin.resume();
  let out = '';
  return new Promise((resolve, reject) => {
    const onData = (buf: Buffer) => {
      for (const ch of buf.toString('utf8')) {
        if (ch === '\r' || ch === '\n') {
          finish();
          resolve(out);
          return;
        }
        if (ch === '\u0003') {
          finish();
          reject(new UsageError('cancelled'));
          return;
        }
        if (ch === '\u007f') out = out.slice(0, -1);
        else out += ch;
      }
    };
    const finish = () => {
      stdin.setRawMode(false);
      stdin.pause();
      stdin.off('data', onData);
      process.stderr.write('\n');
    };
    stdin.on('data', onData);
  });
}

export async function getPassword(
  opts: { passwordFile?: string },
  what = 'repository password',
): Promise<string> {
  if (opts.passwordFile) return readPasswordFile(opts.passwordFile);
  if (process.env.TIDEMARK_PASSWORD_FILE) return readPasswordFile(process.env.TIDEMARK_PASSWORD_FILE);
  if (process.env.TIDEMARK_PASSWORD !== undefined) return process.env.TIDEMARK_PASSWORD;
  return prompt(`Enter ${what}: `);
}

export async function getNewPassword(opts: { newPasswordFile?: string }): Promise<string> {
  if (opts.newPasswordFile) return readPasswordFile(opts.newPasswordFile);
  if (process.env.TIDEMARK_NEW_PASSWORD !== undefined) return process.env.TIDEMARK_NEW_PASSWORD;
  const a = await prompt('Enter the new password: ');
  const b = await prompt('Enter it again: ');
  if (a !== b) throw new UsageError('the passwords do not match');
  return a;
}

/** The maintenance password of an append-only repository, when one was given (option or environment). */
export async function givenMaintenancePassword(opts: {
  maintenancePasswordFile?: string;
}): Promise<string | undefined> {
  if (opts.maintenancePasswordFile) return readPasswordFile(opts.maintenancePasswordFile);
  if (process.env.TIDEMARK_MAINTENANCE_PASSWORD_FILE)
    return readPasswordFile(process.env.TIDEMARK_MAINTENANCE_PASSWORD_FILE);
  return process.env.TIDEMARK_MAINTENANCE_PASSWORD;
}

/** The maintenance password: given, or asked on a terminal (twice for a new one). */
export async function getMaintenancePassword(
  opts: { maintenancePasswordFile?: string },
  isNew = false,
): Promise<string> {
  const given = await givenMaintenancePassword(opts);
  if (given !== undefined) return given;
  if (!process.stdin.isTTY)
    throw new UsageError(
      'no maintenance password given: use --maintenance-password-file, TIDEMARK_MAINTENANCE_PASSWORD or TIDEMARK_MAINTENANCE_PASSWORD_FILE, or run on a terminal',
    );
  const a = await prompt(
    isNew ? 'Enter a maintenance password (needed to prune): ' : 'Enter the maintenance password: ',
  );
  if (!isNew) return a;
  if ((await prompt('Enter it again: ')) !== a) throw new UsageError('the passwords do not match');
  return a;
}
