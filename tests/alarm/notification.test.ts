/** The Electron shell's alarm notification (electron's Notification replaced in-process): an
 *  `alarm.raised` event shows a critical notification naming the job, even with notifications turned
 *  off in Settings; clicking it opens the window. */
import { describe, expect, it, vi } from 'vitest';

const shown = vi.hoisted(() => [] as { opts: Record<string, unknown>; click?: () => void }[]);
vi.mock('electron', () => ({
  Notification: class {
    static isSupported = () => true;
    private entry: { opts: Record<string, unknown>; click?: () => void };
    constructor(opts: Record<string, unknown>) {
      this.entry = { opts };
    }
    on(_e: string, fn: () => void) {
      this.entry.click = fn;
    }
    show() {
      shown.push(this.entry);
    }
  },
}));

import { notifyFailures } from '../../src/main/app/notifications.js';
import type { AlarmInfo } from '../../src/shared/api.js';

describe('alarm notification', () => {
  it('shows a critical notification for a raised alarm', async () => {
    let listener: ((event: string, payload: unknown) => void) | undefined;
    const api = {
      on: (l: (event: string, payload: unknown) => void) => {
        listener = l;
        return () => {};
      },
      call: async () => ({ notifications: false }),
    };
    let opened = 0;
    notifyFailures(api as never, () => opened++);
    const alarm: AlarmInfo = {
      jobId: '1',
      jobName: 'My documents',
      snapshotId: 'ab'.repeat(32),
      time: new Date().toISOString(),
      host: 'pc',
      suspicious: 412,
      threshold: 10,
      reasons: ['412 files changed the way encryption changes files'],
      examples: [],
      held: 3,
    };
    listener!('alarm.raised', alarm);
    // a failed run is not notified with notifications turned off
    listener!('run.finished', { status: 'failed', jobName: 'My documents' });
    await new Promise((r) => setTimeout(r, 10));
    expect(shown).toHaveLength(1);
    expect(shown[0].opts).toMatchObject({ title: 'Possible ransomware: My documents', urgency: 'critical' });
    expect(String(shown[0].opts.body)).toMatch(/412 files changed the way encryption changes files/);
    shown[0].click!();
    expect(opened).toBe(1);
  });
});
