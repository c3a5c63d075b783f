// The Electron IPC transport without an Electron binary: electron's ipcMain/ipcRenderer/contextBridge are
// replaced by an in-process pair, so the real preload script and the real main-side binding talk to the
// real API implementation. Checks that the preload exposes exactly {call, on, platform}, refuses unknown
// methods and events before they cross, and that main refuses callers from untrusted pages.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

type Handler = (event: { senderFrame: { url: string } }, ...args: unknown[]) => unknown;
const wire = vi.hoisted(() => ({
  handlers: new Map<string, Handler>(),
  rendererListeners: new Map<string, ((e: unknown, ...args: unknown[]) => void)[]>(),
  exposed: new Map<string, unknown>(),
  pageUrl: 'file:///app/out/renderer/index.html',
}));

vi.mock('electron', () => ({
  ipcMain: {
    handle: (ch: string, fn: Handler) => wire.handlers.set(ch, fn),
    removeHandler: (ch: string) => wire.handlers.delete(ch),
  },
  ipcRenderer: {
    invoke: async (ch: string, ...args: unknown[]) =>
      wire.handlers.get(ch)!({ senderFrame: { url: wire.pageUrl } }, ...args),
    on: (ch: string, fn: (e: unknown, ...args: unknown[]) => void) => {
      wire.rendererListeners.set(ch, [...(wire.rendererListeners.get(ch) ?? []), fn]);
    },
  },
  contextBridge: { exposeInMainWorld: (key: string, value: unknown) => wire.exposed.set(key, value) },
}));

import { bindIpc } from '../../src/main/app/ipc.js';
import { memoryApi } from '../helpers/api.js';
import { FakeEngine } from '../../src/main/api/fake-engine.js';
import type { PreloadBridge } from '../../src/shared/api.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-ipc-'));
const api = memoryApi(new FakeEngine(), tmp, 'electron');
let unbind: () => void;
let bridge: PreloadBridge;

beforeAll(async () => {
  // events go to every window: here, the renderer side of the fake IPC
  const window = {
    isDestroyed: () => false,
    webContents: {
      send: (ch: string, ...args: unknown[]) => {
        for (const l of wire.rendererListeners.get(ch) ?? []) l({}, ...args);
      },
    },
  };
  unbind = bindIpc(
    api,
    () => [window as never],
    (url) => url.startsWith('file:///app/out/renderer/'),
  );
  await import('../../src/preload/index.js');
  bridge = wire.exposed.get('tidemark') as PreloadBridge;
});

afterAll(async () => {
  unbind?.();
  await api.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe('Electron IPC binding', () => {
  it('exposes exactly the typed bridge, frozen', () => {
    expect([...wire.exposed.keys()]).toEqual(['tidemark']);
    expect(Object.keys(bridge).sort()).toEqual(['call', 'on', 'platform']);
    expect(Object.isFrozen(bridge)).toBe(true);
  });

  it('round-trips calls, validation errors and events to the real API', async () => {
    expect(await bridge.call('app.info', {})).toMatchObject({ ok: true, result: { mode: 'electron' } });
    const bad = await bridge.call('settings.update', { theme: 'neon' });
    expect(bad).toMatchObject({ ok: false, error: { code: 'VALIDATION', issues: [{ path: 'theme' }] } });
    const seen: unknown[] = [];
    const off = bridge.on('settings.changed', (s) => seen.push(s));
    await bridge.call('settings.update', { theme: 'dark' });
    expect(seen).toEqual([expect.objectContaining({ theme: 'dark' })]);
    off();
    await bridge.call('settings.update', { theme: 'light' });
    expect(seen).toHaveLength(1);
  });

  it('refuses unknown methods and events in the preload, and untrusted pages in main', async () => {
    const before = wire.handlers.size;
    expect(await bridge.call('fs.rmrf', {})).toMatchObject({ ok: false, error: { code: 'UNKNOWN_METHOD' } });
    expect(wire.handlers.size).toBe(before);
    // a listener for a name outside the contract is never registered, so nothing reaches it
    const got: unknown[] = [];
    bridge.on('secret.event', (p) => got.push(p));
    for (const l of wire.rendererListeners.get('tidemark:event') ?? []) l({}, 'secret.event', { leak: true });
    expect(got).toEqual([]);
    wire.pageUrl = 'https://evil.example/';
    expect(await bridge.call('app.info', {})).toMatchObject({ ok: false, error: { code: 'FORBIDDEN' } });
    wire.pageUrl = 'file:///app/out/renderer/index.html';
  });
});
