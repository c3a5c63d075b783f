/**
 * Preload (sandboxed, context-isolated): exposes exactly the typed API as `window.tidemark` — a call
 * function limited to the contract's method names and an event subscription limited to its events.
 * The renderer never sees ipcRenderer.
 */
import { contextBridge, ipcRenderer, type IpcRendererEvent } from 'electron';
import { API_EVENTS, API_METHODS, IPC_CALL, IPC_EVENT } from '../shared/channels';

const methods = new Set<string>(API_METHODS);
const events = new Set<string>(API_EVENTS);
const listeners = new Map<string, Set<(payload: unknown) => void>>();

ipcRenderer.on(IPC_EVENT, (_e: IpcRendererEvent, event: string, payload: unknown) => {
  for (const l of listeners.get(event) ?? []) l(payload);
});

const bridge = {
  platform: process.platform,
  call(method: string, args: unknown) {
    if (!methods.has(method))
      return Promise.resolve({
        ok: false,
        error: { name: 'UsageError', code: 'UNKNOWN_METHOD', message: `unknown API method ${method}` },
      });
    return ipcRenderer.invoke(IPC_CALL, method, args);
  },
  on(event: string, listener: (payload: unknown) => void): () => void {
    if (!events.has(event) || typeof listener !== 'function') return () => {};
    let set = listeners.get(event);
    if (!set) listeners.set(event, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  },
};

contextBridge.exposeInMainWorld('tidemark', Object.freeze(bridge));
