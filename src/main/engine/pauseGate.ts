/**
 * Pausing a running backup: the backup awaits `wait()` before each folder it lists and each file it
 * starts (BackupOptions.pauseGate), so work in flight finishes and nothing new starts while it is
 * closed. One gate for every caller (the app's runs, the scheduler's). Cancelling a paused run must
 * open the gate too, so the backup wakes up to see its signal.
 */
export class PauseGate {
  paused = false;
  private waiters: (() => void)[] = [];
  wait(): Promise<void> {
    if (!this.paused) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }
  set(paused: boolean): void {
    this.paused = paused;
    if (!paused) for (const w of this.waiters.splice(0)) w();
  }
}
