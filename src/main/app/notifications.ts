/** Desktop notifications for failed and missed backups and failed restore tests (when enabled in
 *  Settings), and for mass-change alarms (possible ransomware: always, being what a user must not miss). */
import { Notification } from 'electron';
import type { TidemarkApi } from '../api/api.js';
import type { AlarmInfo, RestoreTestSummary, RunSummary } from '../../shared/api.js';

export function notifyFailures(api: Pick<TidemarkApi, 'on' | 'call'>, onClick: () => void): () => void {
  const notify = (title: string, body: string) =>
    void api.call('settings.get', {}).then((s) => {
      if (!s.notifications || !Notification.isSupported()) return;
      const n = new Notification({ title, body });
      n.on('click', onClick);
      n.show();
    });
  return api.on((event, payload) => {
    if (event === 'alarm.raised') {
      const a = payload as AlarmInfo;
      if (!Notification.isSupported()) return;
      const n = new Notification({
        title: `Possible ransomware: ${a.jobName}`,
        body: `${a.suspicious} files changed the way encryption changes files. Older backups are kept until you dismiss the alarm.`,
        urgency: 'critical',
      });
      n.on('click', onClick);
      n.show();
      return;
    }
    if (event === 'restoreTest.finished') {
      const t = payload as RestoreTestSummary;
      if (t.status === 'failed')
        notify(
          `Restore test failed: ${t.jobName}`,
          `${t.failures.length} problem(s), e.g. ${t.failures[0]?.path}: ${t.failures[0]?.message}. Open Tidemark to repair.`,
        );
      return;
    }
    if (event !== 'run.finished') return;
    const run = payload as RunSummary;
    if (run.status !== 'failed' && run.status !== 'missed') return;
    if (run.error?.code === 'RESTORE_TEST_FAILED') return; // notified as the restore test above
    notify(
      run.status === 'failed' ? `Backup failed: ${run.jobName}` : `Backup missed: ${run.jobName}`,
      run.error?.message ?? (run.status === 'missed' ? 'It will run when possible.' : ''),
    );
  });
}
