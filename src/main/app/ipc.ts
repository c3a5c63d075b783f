/** Electron IPC binding of the one API implementation: calls via ipcMain.handle, events to windows. */
import { ipcMain, type BrowserWindow } from 'electron';
import { IPC_CALL, IPC_EVENT } from '../../shared/channels.js';
import type { TidemarkApi } from '../api/api.js';

export function bindIpc(
  api: TidemarkApi,
  windows: () => BrowserWindow[],
  trustedUrl: (url: string) => boolean,
): () => void {
  ipcMain.handle(IPC_CALL, (event, method: unknown, args: unknown) => {
    // only our own page may call (not a navigated-away or injected frame)
    if (!trustedUrl(event.senderFrame?.url ?? '')) {
      return { ok: false, error: { name: 'UsageError', code: 'FORBIDDEN', message: 'untrusted sender' } };
    }
    return api.handle(String(method), args);
  });
  const off = api.on((event, payload) => {
    for (const w of windows()) if (!w.isDestroyed()) w.webContents.send(IPC_EVENT, event, payload);
  });
  return () => {
    off();
    ipcMain.removeHandler(IPC_CALL);
  };
}
