/**
 * Secrets (repository passwords, S3 secret keys) never go into the catalog database. They go through a
 * SecretStore: the Electron app provides one backed by the OS keychain (safeStorage, in src/main/app);
 * everywhere else (CLI, headless, tests) the key file below is used: a JSON file readable only by the
 * user (mode 0600), written atomically.
 */
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';

export interface SecretStore {
  get(key: string): Promise<string | undefined>;
  set(key: string, value: string): Promise<void>;
  delete(key: string): Promise<void>;
}

/** Key names used by the catalog and the job runner. */
export const secretKeys = {
  repositoryPassword: (repositoryId: number) => `repository/${repositoryId}/password`,
  repositoryOption: (repositoryId: number, option: string) => `repository/${repositoryId}/option/${option}`,
};

export const SECRETS_FILE = 'secrets.json';

/** A 0600 JSON key file in the data folder. */
export class KeyFileSecretStore implements SecretStore {
  readonly file: string;

  constructor(dataDir: string) {
    this.file = path.join(dataDir, SECRETS_FILE);
  }

  private read(): Record<string, string> {
    let text: string;
    try {
      text = fs.readFileSync(this.file, 'utf8');
    } catch (err: any) {
      if (err.code === 'ENOENT') return {};
      throw err;
    }
    if (process.platform !== 'win32') {
      const mode = fs.statSync(this.file).mode & 0o777;
      if (mode & 0o077) fs.chmodSync(this.file, 0o600); // tighten a file someone loosened
    }
    return JSON.parse(text) as Record<string, string>;
  }

  private write(data: Record<string, string>): void {
    fs.mkdirSync(path.dirname(this.file), { recursive: true });
    const tmp = `${this.file}.${crypto.randomBytes(4).toString('hex')}.tmp`;
    const fd = fs.openSync(tmp, 'wx', 0o600);
    try {
      fs.writeSync(fd, JSON.stringify(data, null, 1));
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, this.file);
  }

  async get(key: string): Promise<string | undefined> {
    return this.read()[key];
  }

  async set(key: string, value: string): Promise<void> {
    const data = this.read();
    data[key] = value;
    this.write(data);
  }

  async delete(key: string): Promise<void> {
    const data = this.read();
    if (!(key in data)) return;
    delete data[key];
    this.write(data);
  }
}

/** In-memory store (tests). */
export class MemorySecretStore implements SecretStore {
  readonly data = new Map<string, string>();
  async get(key: string) {
    return this.data.get(key);
  }
  async set(key: string, value: string) {
    this.data.set(key, value);
  }
  async delete(key: string) {
    this.data.delete(key);
  }
}
