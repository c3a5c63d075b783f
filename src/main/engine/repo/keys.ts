/**
 * Key files: each wraps the repository's master key with a key derived from one password (scrypt).
 * Several key files may wrap the same master key (several passwords); removing one never touches data.
 * A key file is plain JSON holding only KDF parameters and the sealed master key.
 */
import os from 'node:os';
import type { Backend } from '../backend/types.js';
import {
  decodeMasterKey,
  defaultKdfParams,
  deriveKey,
  encodeMasterKey,
  open,
  seal,
  storageId,
  type KdfParams,
  type MasterKey,
  DecryptError,
} from '../crypto/index.js';
import { CorruptObjectError, TidemarkError, WrongPasswordError } from '../errors.js';

interface KeyFile {
  version: 1;
  created: string;
  host: string;
  username: string;
  kdf: 'scrypt';
  params: KdfParams;
  /** base64 of seal(derivedKey, masterKey) */
  data: string;
}

export interface KeyInfo {
  id: string;
  created: string;
  host: string;
  username: string;
}

export async function writeKey(
  backend: Backend,
  master: MasterKey,
  password: string,
  kdf?: Partial<KdfParams>,
): Promise<string> {
  if (!password) throw new TidemarkError('EMPTY_PASSWORD', 'the password must not be empty');
  const params = { ...defaultKdfParams(), ...kdf };
  const derived = await deriveKey(password, params);
  const file: KeyFile = {
    version: 1,
    created: new Date().toISOString(),
    host: os.hostname(),
    username: safeUsername(),
    kdf: 'scrypt',
    params,
    data: seal(derived, encodeMasterKey(master)).toString('base64'),
  };
  const bytes = Buffer.from(JSON.stringify(file));
  const id = storageId(bytes);
  await backend.save('keys', id, bytes);
  return id;
}

function safeUsername(): string {
  try {
    return os.userInfo().username;
  } catch {
    return '';
  }
}

/** Tries every key file with the password; returns the master key and the ID of the key that opened it. */
export async function openKey(
  backend: Backend,
  password: string,
): Promise<{ master: MasterKey; keyId: string }> {
  const names: string[] = [];
  for await (const o of backend.list('keys')) names.push(o.name);
  if (names.length === 0) throw new CorruptObjectError('the repository has no key files');
  for (const name of names) {
    let file: KeyFile;
    try {
      file = JSON.parse((await backend.load('keys', name)).toString('utf8')) as KeyFile;
    } catch (err) {
      if (err instanceof SyntaxError) continue; // a damaged key file must not hide the others
      throw err;
    }
    const derived = await deriveKey(password, file.params);
    try {
      return { master: decodeMasterKey(open(derived, Buffer.from(file.data, 'base64'))), keyId: name };
    } catch (err) {
      if (err instanceof DecryptError) continue;
      throw err;
    }
  }
  throw new WrongPasswordError();
}

export async function listKeys(backend: Backend): Promise<KeyInfo[]> {
  const out: KeyInfo[] = [];
  for await (const o of backend.list('keys')) {
    try {
      const f = JSON.parse((await backend.load('keys', o.name)).toString('utf8')) as KeyFile;
      out.push({ id: o.name, created: f.created, host: f.host, username: f.username });
    } catch {
      out.push({ id: o.name, created: '', host: '?', username: '?' });
    }
  }
  return out.sort((a, b) => a.created.localeCompare(b.created));
}
