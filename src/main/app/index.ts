/**
 * The Electron shell (the only code that imports electron, docs/architecture.md §1 rule 1): single instance,
 * the main window, IPC binding of the API, tray, notifications, start at login. It stays thin: all
 * behaviour lives behind the API.
 */
import { app, dialog, BrowserWindow } from 'electron';
import type { TidemarkApi } from '../api/api.js';
import type { Desktop } from '../api/services.js';
import { bindIpc } from './ipc.js';
import { createMainWindow, isTrustedUrl } from './window.js';
import { AppTray } from './tray.js';
import { notifyFailures } from './notifications.js';

export const desktop: Desktop = {
  async pickFolder(title) {
    const win = BrowserWindow.getFocusedWindow();
    const opts = {
      title: title ?? 'Choose a folder',
      properties: ['openDirectory', 'createDirectory'] as ('openDirectory' | 'createDirectory')[],
    };
    const r = win ? await dialog.showOpenDialog(win, opts) : await dialog.showOpenDialog(opts);
    return r.canceled || !r.filePaths[0] ? null : r.filePaths[0];
  },
  setStartAtLogin(enabled) {
    app.setLoginItemSettings({ openAtLogin: enabled, openAsHidden: true });
  },
};

/** Runs the desktop app around an API (the caller holds the single-instance lock). */
export async function runDesktopApp(
  api: TidemarkApi,
  outDir: string,
  onQuit: () => Promise<void>,
): Promise<void> {
  let win: BrowserWindow | null = null;
  const open = () => {
    if (!win || win.isDestroyed()) win = createMainWindow(outDir);
    if (win.isMinimized()) win.restore();
    win.show();
    win.focus();
  };
  app.on('second-instance', open);
  if (process.platform === 'win32') app.setAppUserModelId('app.tidemark.desktop'); // notifications need it
  await app.whenReady();
  bindIpc(
    api,
    () => BrowserWindow.getAllWindows(),
    (url) => isTrustedUrl(url, outDir),
  );
  let tray: AppTray | null = null;
  try {
    tray = new AppTray(api, open);
  } catch {
    // no system tray (some Linux desktops): the window alone still works
  }
  notifyFailures(api, open);
  open();
  // with a tray, closing the window keeps backups running; without one, closing quits
  app.on('window-all-closed', () => {
    if (!tray) app.quit();
  });
  app.on('activate', open);
  app.on('before-quit', () => void onQuit());
}
