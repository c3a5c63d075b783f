/**
 * Restore: a computer selector when the repository is shared by several PCs, a snapshot timeline, a virtualised folder view (fast on folders of 10,000+ entries), search
 * by name across snapshots, the versions of a file, and restoring the selection to its original place
 * or another folder with an overwrite policy.
 */
import { useEffect, useRef, useState } from 'react';
import { useVirtualizer } from '@tanstack/react-virtual';
import { useRestore } from '../stores/restore';
import { useJobs } from '../stores/jobs';
import { useApp } from '../stores/app';
import { Empty, Modal, ProgressBar } from '../components/ui';
import { FolderInput } from '../components/DirBrowser';
import { Icon } from '../components/Icon';
import { bytes, dateTime, dirname, when } from '../format';
import { api, type BrowseEntry, type OverwritePolicy } from '../api';

function Breadcrumbs({ path, onOpen }: { path: string; onOpen: (p: string) => void }) {
  const parts = path.split('/').filter(Boolean);
  return (
    <nav className="crumbs" aria-label="Folder path">
      <button className="crumb" onClick={() => onOpen('/')}>
        /
      </button>
      {parts.map((p, i) => {
        const full = '/' + parts.slice(0, i + 1).join('/');
        return (
          <span key={full}>
            <span className="crumb-sep" aria-hidden>
              ›
            </span>
            <button
              className="crumb"
              aria-current={i === parts.length - 1 ? 'location' : undefined}
              onClick={() => onOpen(full)}
            >
              {p}
            </button>
          </span>
        );
      })}
    </nav>
  );
}

function EntryList({ entries }: { entries: BrowseEntry[] }) {
  const { selected, toggle, open, showVersions } = useRestore();
  const parentRef = useRef<HTMLDivElement>(null);
  const virtualizer = useVirtualizer({
    count: entries.length,
    getScrollElement: () => parentRef.current,
    estimateSize: () => 40,
    overscan: 12,
  });
  return (
    <div
      className="tree-scroll"
      ref={parentRef}
      role="grid"
      aria-label="Folder contents"
      aria-rowcount={entries.length}
    >
      <div style={{ height: virtualizer.getTotalSize(), position: 'relative' }}>
        {virtualizer.getVirtualItems().map((v) => {
          const e = entries[v.index];
          const checked = selected.includes(e.path);
          return (
            <div
              key={e.path}
              role="row"
              aria-rowindex={v.index + 1}
              aria-selected={checked}
              className={`tree-row ${checked ? 'selected' : ''}`}
              style={{ transform: `translateY(${v.start}px)`, height: v.size }}
            >
              <span role="gridcell" className="cell-check">
                <input
                  type="checkbox"
                  checked={checked}
                  onChange={() => toggle(e.path)}
                  aria-label={`Select ${e.name}`}
                />
              </span>
              <span role="gridcell" className="cell-name">
                {e.type === 'dir' ? (
                  <button
                    className="link-button"
                    onClick={() => void open(e.path)}
                    aria-label={`Open folder ${e.name}`}
                  >
                    <Icon name="folder" size={16} /> {e.name}
                  </button>
                ) : (
                  <span className="file-name">
                    <Icon name={e.type === 'symlink' ? 'link' : 'file'} size={16} /> {e.name}
                  </span>
                )}
              </span>
              <span role="gridcell" className="cell-size muted">
                {e.type === 'dir' ? '' : bytes(e.size)}
              </span>
              <span role="gridcell" className="cell-time muted">
                {dateTime(e.mtime)}
              </span>
              <span role="gridcell" className="cell-act">
                {e.type !== 'dir' ? (
                  <button
                    className="icon-button"
                    onClick={() => void showVersions(e.path)}
                    aria-label={`Versions of ${e.name}`}
                    title="Versions"
                  >
                    <Icon name="versions" size={16} />
                  </button>
                ) : null}
              </span>
            </div>
          );
        })}
      </div>
    </div>
  );
}

/** Which computer's snapshots to show; only when another computer has snapshots in the repository. */
function ComputerSelect({ onChange }: { onChange: (host: string | null) => void }) {
  const hosts = useRestore((s) => s.hosts);
  const host = useRestore((s) => s.host);
  const others = hosts.filter((h) => !h.thisComputer);
  if (others.length === 0) return null;
  const me = hosts.find((h) => h.thisComputer);
  return (
    <>
      <label className="inline-label" htmlFor="restore-host">
        Computer
      </label>
      <select id="restore-host" value={host ?? ''} onChange={(e) => onChange(e.target.value || null)}>
        <option value="">{me ? `This computer (${me.host})` : 'This computer'}</option>
        {others.map((h) => (
          <option key={h.host} value={h.host}>
            {h.host} — {h.snapshots} snapshot{h.snapshots === 1 ? '' : 's'}
          </option>
        ))}
      </select>
    </>
  );
}

function RestoreDialog({ onClose }: { onClose: () => void }) {
  const { selected, status, start, snapshotId, snapshots, host } = useRestore();
  const [kind, setKind] = useState<'original' | 'folder'>('folder');
  const [folder, setFolder] = useState('');
  const [overwrite, setOverwrite] = useState<OverwritePolicy>('keep-both');
  const [started, setStarted] = useState(false);
  const snap = snapshots.find((s) => s.id === snapshotId);
  const mine = started ? status : null;
  const running = mine?.status === 'running';
  return (
    <Modal
      title="Restore"
      onClose={onClose}
      footer={
        mine && !running ? (
          <button className="button primary" onClick={onClose}>
            Done
          </button>
        ) : (
          <>
            {running ? (
              <button
                className="button danger"
                onClick={() => void api.call('restore.cancel', { id: mine!.id })}
              >
                Stop restoring
              </button>
            ) : null}
            <button className="button" onClick={onClose}>
              {running ? 'Hide' : 'Cancel'}
            </button>
            <button
              className="button primary"
              disabled={running || (kind === 'folder' && !folder.trim())}
              onClick={() => {
                setStarted(true);
                void start(
                  kind === 'original' ? { kind: 'original' } : { kind: 'folder', path: folder.trim() },
                  overwrite,
                );
              }}
            >
              Start restore
            </button>
          </>
        )
      }
    >
      <p>
        {selected.length} item(s) from the snapshot of <strong>{dateTime(snap?.time)}</strong>
        {host !== null ? (
          <>
            {' '}
            taken on <strong>{host}</strong>
          </>
        ) : null}
      </p>
      <ul className="restore-items mono small">
        {selected.slice(0, 6).map((p) => (
          <li key={p}>{p}</li>
        ))}
        {selected.length > 6 ? <li className="muted">…and {selected.length - 6} more</li> : null}
      </ul>
      <fieldset className="field" disabled={started}>
        <legend>Restore to</legend>
        <label className="check">
          <input
            type="radio"
            name="target"
            checked={kind === 'original'}
            onChange={() => setKind('original')}
          />{' '}
          The original location
        </label>
        <label className="check">
          <input type="radio" name="target" checked={kind === 'folder'} onChange={() => setKind('folder')} />{' '}
          Another folder
        </label>
        {kind === 'folder' ? (
          <FolderInput id="restore-target" label="Restore into folder" value={folder} onChange={setFolder} />
        ) : null}
      </fieldset>
      <fieldset className="field" disabled={started}>
        <legend>When a file already exists</legend>
        {(
          [
            ['keep-both', 'Keep both (restore under a new name)'],
            ['skip', 'Skip it'],
            ['overwrite', 'Overwrite it'],
          ] as const
        ).map(([k, label]) => (
          <label key={k} className="check">
            <input type="radio" name="overwrite" checked={overwrite === k} onChange={() => setOverwrite(k)} />{' '}
            {label}
          </label>
        ))}
      </fieldset>
      {mine ? (
        <div className="restore-progress" aria-live="polite">
          <ProgressBar
            value={mine.status !== 'running' ? 1 : mine.bytesTotal ? mine.bytesDone / mine.bytesTotal : null}
            label="Restore progress"
          />
          <p className="small" data-restore-status={mine.status}>
            {mine.status === 'running'
              ? `Restoring… ${mine.filesDone} of ${mine.filesTotal || '?'} files`
              : mine.status === 'completed'
                ? `Restored ${mine.filesDone} file(s) (${bytes(mine.bytesDone)})${mine.skipped ? `, skipped ${mine.skipped}` : ''} to ${mine.target}`
                : `${mine.status}: ${mine.error?.message ?? mine.errors.map((e) => `${e.path}: ${e.message}`).join('; ')}`}
          </p>
        </div>
      ) : null}
    </Modal>
  );
}

export function RestorePage({ jobId }: { jobId?: string }) {
  const jobs = useJobs((s) => s.jobs);
  const loadJobs = useJobs((s) => s.load);
  const navigate = useApp((s) => s.navigate);
  const r = useRestore();
  const [query, setQuery] = useState('');
  const [dialog, setDialog] = useState(false);
  useEffect(() => {
    void loadJobs();
  }, [loadJobs]);
  const effectiveJob = jobId ?? jobs[0]?.id;
  useEffect(() => {
    if (!effectiveJob) return;
    const state = useRestore.getState();
    // the page shown again for the same job: new snapshots (and computers) since it was last shown
    if (effectiveJob !== state.jobId) void state.selectJob(effectiveJob);
    else void state.refresh();
  }, [effectiveJob]);
  useEffect(() => {
    const t = setTimeout(() => {
      if (query.trim()) void useRestore.getState().search(query);
      else useRestore.getState().clearSearch();
    }, 250);
    return () => clearTimeout(t);
  }, [query]);

  if (jobs.length === 0)
    return (
      <section aria-labelledby="page-title">
        <header className="page-head">
          <h1 id="page-title">Restore</h1>
        </header>
        <Empty icon="restore" title="Nothing to restore yet">
          <p className="muted">Once a backup job has run, its snapshots appear here.</p>
        </Empty>
      </section>
    );

  const snap = r.snapshots.find((s) => s.id === r.snapshotId);
  /** A snapshot taken on another computer shows its host name. */
  const fromElsewhere = (host: string) =>
    r.host !== null || (r.hosts.length > 0 && !r.hosts.some((h) => h.thisComputer && h.host === host));
  return (
    <section aria-labelledby="page-title" className="restore">
      <header className="page-head">
        <div>
          <h1 id="page-title">Restore</h1>
          <p className="muted">Browse a snapshot, or search every snapshot by name.</p>
        </div>
        {/* job and (in a repository shared by several PCs) computer: labels beside their selects */}
        <div
          style={{
            display: 'grid',
            gridTemplateColumns: 'auto minmax(200px, 320px)',
            gap: 8,
            alignItems: 'center',
          }}
        >
          <label className="inline-label" htmlFor="restore-job">
            Job
          </label>
          <select
            id="restore-job"
            value={effectiveJob}
            onChange={(e) => navigate({ page: 'restore', jobId: e.target.value })}
          >
            {jobs.map((j) => (
              <option key={j.id} value={j.id}>
                {j.name}
              </option>
            ))}
          </select>
          <ComputerSelect
            onChange={(host) => {
              setQuery('');
              void r.selectHost(host);
            }}
          />
        </div>
      </header>
      <div className="search-bar">
        <Icon name="search" />
        <input
          type="search"
          aria-label="Search files in all snapshots"
          placeholder="Search files in all snapshots…"
          value={query}
          onChange={(e) => setQuery(e.target.value)}
        />
        {r.searching ? <span className="muted small">Searching…</span> : null}
      </div>
      <div className="restore-layout">
        <aside className="card timeline" aria-label="Snapshots" data-computers={r.hosts.length}>
          <h2 className="section-title">Snapshots</h2>
          {r.snapshots.length === 0 ? <p className="muted small">{r.error ?? 'No snapshots yet.'}</p> : null}
          <ol>
            {r.snapshots.map((s) => (
              <li key={s.id}>
                <button
                  className={`snap ${s.id === r.snapshotId ? 'current' : ''}`}
                  aria-current={s.id === r.snapshotId ? 'true' : undefined}
                  onClick={() => void r.selectSnapshot(s.id)}
                >
                  <span className="snap-dot" aria-hidden />
                  <span className="snap-time">{dateTime(s.time)}</span>
                  <span className="snap-meta muted small">
                    {s.files.toLocaleString()} files · {bytes(s.totalBytes)} · +{bytes(s.newBytes)}
                  </span>
                  {s.suspect ? (
                    <span
                      className="snap-host badge tone-bad"
                      style={{ justifySelf: 'start' }}
                      title="This backup's changes looked like files being encrypted: restore from one before it"
                    >
                      mass-change alarm
                    </span>
                  ) : null}
                  {fromElsewhere(s.host) ? (
                    <span
                      className="snap-host badge tone-neutral"
                      style={{ justifySelf: 'start' }}
                      title="Taken on another computer"
                    >
                      {s.host}
                    </span>
                  ) : null}
                </button>
              </li>
            ))}
          </ol>
        </aside>

        <div className="card browser">
          {r.hits ? (
            <>
              <div className="browser-head">
                <h2 className="section-title">
                  {r.hits.length} result{r.hits.length === 1 ? '' : 's'} for “{r.query}”
                </h2>
                <button className="button ghost" onClick={() => setQuery('')}>
                  Clear search
                </button>
              </div>
              <ul className="hits" aria-label="Search results">
                {r.hits.map((h) => (
                  <li key={`${h.snapshotId}:${h.path}`} className="hit">
                    <Icon name={h.type === 'dir' ? 'folder' : 'file'} size={16} />
                    <div className="hit-main">
                      <span className="mono">{h.path}</span>
                      <span className="muted small">
                        {dateTime(h.snapshotTime)} · {h.type === 'dir' ? 'folder' : bytes(h.size)}
                      </span>
                    </div>
                    <button
                      className="button small"
                      onClick={async () => {
                        setQuery('');
                        await r.selectSnapshot(h.snapshotId, dirname(h.path));
                        r.setSelected([h.path]);
                      }}
                    >
                      Show
                    </button>
                    {h.type !== 'dir' ? (
                      <button className="button small" onClick={() => void r.showVersions(h.path)}>
                        Versions
                      </button>
                    ) : null}
                    <button
                      className="button small primary"
                      onClick={async () => {
                        await r.selectSnapshot(h.snapshotId, dirname(h.path));
                        r.setSelected([h.path]);
                        setDialog(true);
                      }}
                    >
                      Restore…
                    </button>
                  </li>
                ))}
              </ul>
            </>
          ) : (
            <>
              <div className="browser-head">
                <Breadcrumbs path={r.path} onOpen={(p) => void r.open(p)} />
                <span className="muted small">
                  {snap ? `${when(snap.time)} · ${r.entries.length.toLocaleString()} items` : ''}
                </span>
              </div>
              {r.error ? (
                <p className="error-banner" role="alert">
                  {r.error}
                </p>
              ) : null}
              <div className="tree-header" aria-hidden>
                <span className="cell-check">
                  <input
                    type="checkbox"
                    tabIndex={-1}
                    checked={r.entries.length > 0 && r.entries.every((e) => r.selected.includes(e.path))}
                    onChange={(e) => r.setSelected(e.target.checked ? r.entries.map((x) => x.path) : [])}
                  />
                </span>
                <span className="cell-name">Name</span>
                <span className="cell-size">Size</span>
                <span className="cell-time">Modified</span>
                <span className="cell-act" />
              </div>
              <EntryList entries={r.entries} />
            </>
          )}
          <div className="restore-bar">
            <span>
              {r.selected.length ? `${r.selected.length} selected` : 'Select files or folders to restore'}
            </span>
            <span className="spacer" />
            {r.selected.length ? (
              <button className="button ghost" onClick={() => r.setSelected([])}>
                Clear
              </button>
            ) : null}
            <button className="button primary" disabled={!r.selected.length} onClick={() => setDialog(true)}>
              <Icon name="restore" size={16} /> Restore…
            </button>
          </div>
        </div>

        {r.versionsOf ? (
          <aside className="card versions" aria-label="Versions">
            <div className="browser-head">
              <h2 className="section-title">Versions</h2>
              <button
                className="icon-button"
                aria-label="Close versions"
                onClick={() => void r.showVersions(null)}
              >
                <Icon name="x" size={16} />
              </button>
            </div>
            <p className="mono small versions-path">{r.versionsOf}</p>
            <ol className="version-list">
              {r.versions.map((v) => (
                <li key={v.snapshotId}>
                  <div>
                    <span>{dateTime(v.snapshotTime)}</span>
                    <span className="muted small">
                      {bytes(v.size)} · modified {dateTime(v.mtime)}{' '}
                      {v.changed ? <span className="badge tone-info">changed</span> : null}
                    </span>
                  </div>
                  <button
                    className="button small"
                    onClick={async () => {
                      await r.selectSnapshot(v.snapshotId, dirname(r.versionsOf!));
                      r.setSelected([r.versionsOf!]);
                      setDialog(true);
                    }}
                  >
                    Restore
                  </button>
                </li>
              ))}
            </ol>
          </aside>
        ) : null}
      </div>
      {dialog ? <RestoreDialog onClose={() => setDialog(false)} /> : null}
    </section>
  );
}
