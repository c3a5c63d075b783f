/** Desktop notifications for failed and missed backups (when enabled in Settings). */
import { Notification } from 'electron';
import type { TidemarkApi } from '../api/api.js';
import type { RunSummary } from '../../shared/api.js';

export function notifyFailures(api: TidemarkApi, onClick: () => void): () => void {
  return api.on((event, payload) => {
    if (event !== 'run.finished') return;
    const run = payload as RunSummary;
    if (run.status !== 'failed' && run.status !== 'missed') return;
    void api.call('settings.get', {}).then((s) => {
      if (!s.notifications || !Notification.isSupported()) return;
      const n = new Notification({
        title: run.status === 'failed' ? `Backup failed: ${run.jobName}` : `Backup missed: ${run.jobName}`,
        body: run.error?.message ?? (run.status === 'missed' ? 'It will run when possible.' : ''),
      });
      n.on('click', onClick);
      n.show();
    });
  });
}
