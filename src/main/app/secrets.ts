/**
 * Repository passwords in the OS keychain where Electron has one (safeStorage: DPAPI on Windows,
 * Keychain on macOS, libsecret/kwallet on Linux): values are encrypted with it and kept in a 0600 file.
 * Keys it does not hold are read from the CLI's 0600 key file, so jobs added with `tidemark job add`
 * still run in the app. Without a keychain it is the key file alone.
 */
import fs from 'node:fs';
import path from 'node:path';
import { safeStorage } from 'electron';
import { KeyFileSecretStore, type SecretStore } from '../engine/catalog/secrets.js';

export class SafeStorageSecretStore implements SecretStore {
  private readonly file: string;
  private readonly fallback: KeyFileSecretStore;

  constructor(dataDir: string) {
    this.file = path.join(dataDir, 'secrets.keychain.json');
    this.fallback = new KeyFileSecretStore(dataDir);
  }

  static create(dataDir: string): SecretStore {
    return safeStorage.isEncryptionAvailable()
      ? new SafeStorageSecretStore(dataDir)
      : new KeyFileSecretStore(dataDir);
  }

  private read(): Record<string, string> {
    try {
      return JSON.parse(fs.readFileSync(this.file, 'utf8')) as Record<string, string>;
    } catch {
      return {};
    }
  }

  private write(all: Record<string, string>): void {
    const tmp = `${this.file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(all), { mode: 0o600 });
    fs.renameSync(tmp, this.file);
  }

  async get(key: string): Promise<string | undefined> {
    const v = this.read()[key];
    if (v !== undefined) return safeStorage.decryptString(Buffer.from(v, 'base64'));
    return this.fallback.get(key);
  }

  async set(key: string, value: string): Promise<void> {
    const all = this.read();
    all[key] = safeStorage.encryptString(value).toString('base64');
    this.write(all);
    await this.fallback.delete(key); // never keep a second, weaker copy
  }

  async delete(key: string): Promise<void> {
    const all = this.read();
    delete all[key];
    this.write(all);
    await this.fallback.delete(key);
  }
}
