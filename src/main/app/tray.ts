/** Tray icon: status and progress of running backups, "Back up now", open the window. */
import { Menu, Tray, nativeImage } from 'electron';
import type { TidemarkApi } from '../api/api.js';
import type { LiveRun } from '../../shared/api.js';

// the app icon at 32×32 (rendered from src/renderer/public/favicon.svg), so the tray needs no files
const ICON =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAACAAAAAgCAYAAABzenr0AAADYElEQVR4nMSXWUhUURjH/+fOVK63scxosSyjlUxaJ6OdshXag4gKKyh8KLGHoJdeeiuclyQigoKgkpLIcgFTkDCDXApLi3HLNEcdRsfcndN3jo16TcHrMvN7GM583wf/757zP/eeY8RAriaYVAOLA+NmDkQysBCMAxzcxoBCcPahuYcnwBLncOeYe6DGJ+zljD2gwGxMIPRgNYzzC8134lL7GvCPt0QbGNLgSTjfJ5pguJ4YFNjVUcwYmwUPImeix7VSUbs7zo5W/O3lY0i5dBSjQS61gZ0xkjHM/U7Qx6aFczAmSFuhXzO8Bjcbwdh8eAvSVuBldDUQ5OeDCxsjEBzg+19uRoCfzJl8p0APuho4tXYZ7hzZjozYE1JwoHh67HGZO7lmGfSgq4Gnn0pQ1uBAeLBJCroRYxGzUi4pvwR60NVA45827L6bhPLGJinoRoxFLJpy9tZ26EG3CetbWknouZwJN+LJRUzk9DKqXVDnbMWexCR8qWlAfnUd9tJYxEYDU69Z+HBJhTHsXDwPi0Kmyf8/bHZkfq+k78j41AuMwyXCpql4eHof1oTO1MTzKmpx/kkqfjqcY6p3Y5gStefmwMDsqQE4HxWBx2f2IzQoEDaa2mcFJSiotmGuKRCL6eliKN/Z3QNro4P2vY+u+tbObk0DmiUQX7bN4XPluMfFcf99EW6l58LZ0Sljqs9k3IjeiItRq2BQtF+wkdbnWKtx4N6LoRt4Q5/XWao/MksrkZhTILfWUCyYPhWxW1Zj19IwEnbpqi+nWTh0P3noBgZD5wQsDw9FSHCvqWwNdhRbq+RpYjzqBcOaMDhIRczRaCyYozWVtaoWD19mwN7kHFN9X9ODZ8CkBmD9yiU4sG09JhkNaKaXS2FpmcxFLl0I1d9PGiolKw+5Rd9gNBh01bfQ23TYBq6ePYwlYb2nHBeZKvvjZ7zOzkP7P1P5kqkObtuAresioAwy4UjrSyt+wfKo3wOaJaAlhI1M8pXW7V1eEertWlO1tXfieVoOskhohzkSKxbNBycT6ql3Ub1GMzDe8puEtQvnIegNWafIG4uXENoKZ95rQGgrXd38Hu1TBzwNaQptpd0SV0F3whh4GNI8J7TlecB5+0qyuKuJ6xImGKlBWqT5SvzXbmYvXM//AgAA//8GVo3qAAAABklEQVQDALelxcDEnWN9AAAAAElFTkSuQmCC';

export class AppTray {
  private tray: Tray;
  private live = new Map<string, LiveRun>();

  constructor(
    private api: TidemarkApi,
    private openWindow: () => void,
  ) {
    this.tray = new Tray(nativeImage.createFromDataURL(ICON));
    this.tray.setToolTip('Tidemark');
    this.tray.on('click', () => this.openWindow());
    api.on((event, payload) => {
      if (event === 'run.progress') this.live.set((payload as LiveRun).run.id, payload as LiveRun);
      if (event === 'run.finished') this.live.delete((payload as { id: string }).id);
      if (event === 'run.progress' || event === 'run.finished' || event === 'jobs.changed')
        void this.refresh();
    });
    void this.refresh();
  }

  private async refresh(): Promise<void> {
    const jobs = await this.api.call('jobs.list', {}).catch(() => []);
    const running = [...this.live.values()];
    const status = running.length
      ? running
          .map(
            (l) => `${l.run.jobName}: ${l.fraction === null ? l.phase : `${Math.round(l.fraction * 100)}%`}`,
          )
          .join(', ')
      : jobs.some((j) => j.health === 'error' || j.missed)
        ? 'Some backups need attention'
        : 'All backups up to date';
    this.tray.setToolTip(`Tidemark — ${status}`);
    this.tray.setContextMenu(
      Menu.buildFromTemplate([
        { label: status, enabled: false },
        { type: 'separator' },
        {
          label: 'Back up now',
          enabled: jobs.length > 0,
          submenu: jobs.map((j) => ({
            label: j.name,
            enabled: !j.running,
            click: () => void this.api.call('jobs.runNow', { id: j.id }).catch(() => {}),
          })),
        },
        { label: 'Open Tidemark', click: () => this.openWindow() },
        { type: 'separator' },
        { role: 'quit', label: 'Quit Tidemark' },
      ]),
    );
  }
}
