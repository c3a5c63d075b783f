/**
 * The key derivation the CLI's launcher starts before the CLI loads (src/main/cli/early.ts,
 * startEarlyKeyDerivation): it finds the repository and the password where the CLI will (--repo,
 * TIDEMARK_REPOSITORY, the default folder; --password-file, TIDEMARK_PASSWORD_FILE, TIDEMARK_PASSWORD),
 * derives the key of the first key file on libuv's pool, and opening the repository takes that key
 * instead of deriving it again — only for exactly the same password and parameters.
 */
import { afterEach, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import {
  deriveKey,
  deriveKeyAhead,
  derivationsAhead,
  dropDerivationsAhead,
} from '../../src/main/engine/crypto/kdf.js';
import { WrongPasswordError } from '../../src/main/engine/errors.js';
import { globalOptionValue, startEarlyKeyDerivation } from '../../src/main/cli/early.js';
import { tempDir } from '../helpers/fixtures.js';

const params = { N: 1024, r: 8, p: 1, salt: Buffer.alloc(32, 7).toString('base64') };

describe('key derivation started ahead', () => {
  // one left untaken would be taken by a later derivation with the same password and parameters
  afterEach(() => dropDerivationsAhead());

  it('is taken by a derivation of the same password and parameters only, once', async () => {
    deriveKeyAhead('secret', params);
    expect(derivationsAhead()).toBe(1);
    const other = deriveKey('other', params); // another password: derived anew, the one ahead stays
    expect(derivationsAhead()).toBe(1);
    const otherSalt = deriveKey('secret', { ...params, salt: Buffer.alloc(32, 8).toString('base64') });
    expect(derivationsAhead()).toBe(1);
    const taken = deriveKey('secret', { ...params });
    expect(derivationsAhead()).toBe(0);
    const again = await deriveKey('secret', params); // nothing ahead any more: derived anew, same key
    expect(await taken).toEqual(again);
    expect(await other).not.toEqual(again);
    expect(await otherSalt).not.toEqual(again);
  });

  it('finds the global options the CLI reads, before the command only', () => {
    expect(globalOptionValue(['-r', '/a', 'backup', '/x'], ['-r', '--repo'])).toBe('/a');
    expect(globalOptionValue(['--repo', '/b', '--json', 'restore'], ['-r', '--repo'])).toBe('/b');
    expect(globalOptionValue(['--repo=/c', 'backup'], ['-r', '--repo'])).toBe('/c');
    expect(globalOptionValue(['-p', 'pw.txt', '-r', '/d', 'backup'], ['-p', '--password-file'])).toBe(
      'pw.txt',
    );
    // a value that looks like a command is still the option's; options after the command are not global
    expect(globalOptionValue(['-r', 'backup', 'restore'], ['-r', '--repo'])).toBe('backup');
    expect(globalOptionValue(['backup', '-r', '/e'], ['-r', '--repo'])).toBeUndefined();
    expect(globalOptionValue(['--json', 'backup'], ['-r', '--repo'])).toBeUndefined();
  });

  it('derives the key of a local repository for a backup or restore, and opening it takes that key', async () => {
    const dir = await tempDir('tm-kdf-ahead-');
    const repoDir = path.join(dir, 'repo');
    await Repository.init(new LocalBackend(repoDir), 'pw one', { kdf: { N: 1024 } });
    const pwFile = path.join(dir, 'pw.txt');
    await fs.writeFile(pwFile, 'pw one\n');

    // the password from the environment; the repository named by -r
    expect(startEarlyKeyDerivation(['-r', repoDir, 'backup', '/x'], { TIDEMARK_PASSWORD: 'pw one' })).toBe(
      true,
    );
    expect(derivationsAhead()).toBe(1);
    await Repository.open(new LocalBackend(repoDir), 'pw one');
    expect(derivationsAhead()).toBe(0);

    // from a password file (its final line break dropped, as the CLI does), the repository from the environment
    expect(
      startEarlyKeyDerivation(['--password-file', pwFile, 'restore', 'latest'], {
        TIDEMARK_REPOSITORY: repoDir,
        TIDEMARK_PASSWORD: 'not this one',
      }),
    ).toBe(true);
    await Repository.open(new LocalBackend(repoDir), 'pw one');
    expect(derivationsAhead()).toBe(0);

    // a wrong password is derived ahead too, and still refused
    expect(
      startEarlyKeyDerivation(['-r', repoDir, 'restore', 'latest'], { TIDEMARK_PASSWORD: 'wrong' }),
    ).toBe(true);
    await expect(Repository.open(new LocalBackend(repoDir), 'wrong')).rejects.toBeInstanceOf(
      WrongPasswordError,
    );
    expect(derivationsAhead()).toBe(0);

    // nothing started: other commands, no password yet (a prompt), a password file that is a pipe (read
    // once, by the CLI), an object store, no repository there
    const env = { TIDEMARK_PASSWORD: 'pw one' };
    const fifo = path.join(dir, 'pw.fifo');
    if (spawnSync('mkfifo', [fifo]).status === 0)
      expect(startEarlyKeyDerivation(['-r', repoDir, '-p', fifo, 'backup', '/x'], env)).toBe(false);
    expect(startEarlyKeyDerivation(['-r', repoDir, 'snapshots'], env)).toBe(false);
    expect(startEarlyKeyDerivation(['-r', repoDir, 'backup', '/x'], {})).toBe(false);
    expect(startEarlyKeyDerivation(['-r', 's3:http://127.0.0.1:1/b', 'backup', '/x'], env)).toBe(false);
    expect(startEarlyKeyDerivation(['-r', path.join(dir, 'none'), 'backup', '/x'], env)).toBe(false);
    expect(derivationsAhead()).toBe(0);
  });
});
