/**
 * "Test speed" for a destination (the job wizard's destination step, and so a job's settings): options
 * (patterns, test file, block size presets, duration, threads, queue depth), a live recharts chart of
 * MiB/s while it runs, the results per pattern, the verdict (the job's next full backup and a full
 * restore at these rates, next to its last runs), and the destination's earlier tests from the catalog
 * with a trend chart (has the NAS got slower since last month?).
 */
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { CartesianGrid, Legend, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';
import {
  api,
  errorMessage,
  type ApiArgs,
  type SpeedTestEstimate,
  type SpeedTestPatternId,
  type SpeedTestPatternResult,
  type SpeedTestRecord,
  type SpeedTestSample,
  type SpeedTestSettings,
  type SpeedTestStatus,
} from '../api';
import { bytes, dateTime, duration, when } from '../format';
import { Icon } from './Icon';
import { ProgressBar } from './ui';

const DISK: { id: SpeedTestPatternId; label: string }[] = [
  { id: 'active-full', label: 'Active full (sequential writes)' },
  { id: 'synthetic-full', label: 'Synthetic full (50/50 random)' },
  { id: 'reverse-incremental', label: 'Reverse incremental (67% writes, random)' },
  { id: 'restore', label: 'Restore (sequential reads)' },
  { id: 'pack', label: "Tidemark's pack writes" },
  { id: 'small-file-restore', label: 'Small-file restore (random 16 KiB reads)' },
];
const S3: { id: SpeedTestPatternId; label: string }[] = [
  { id: 'pack-put', label: 'PUT pack-sized objects' },
  { id: 'pack-get', label: 'GET pack-sized objects' },
  { id: 'small-get', label: 'Small GETs (small-file restore)' },
];
const SHORT: Record<SpeedTestPatternId, string> = {
  'active-full': 'Active full',
  'synthetic-full': 'Synthetic full',
  'reverse-incremental': 'Reverse incr.',
  restore: 'Restore',
  pack: 'Packs',
  'small-file-restore': 'Small files',
  'pack-put': 'PUT packs',
  'pack-get': 'GET packs',
  'small-get': 'Small GETs',
};
const COLORS = [
  'var(--accent)',
  'var(--accent-2)',
  'var(--accent-3)',
  'var(--accent-4)',
  'var(--bad)',
  'var(--muted)',
];
const BLOCKS = [
  { kib: 256, label: 'WAN 256 KiB' },
  { kib: 512, label: 'LAN 512 KiB' },
  { kib: 4096, label: 'Local 4 MiB' },
];
const FILE_SIZES = [64, 256, 1024, 4096];
const PHASE: Record<SpeedTestStatus['phase'], string> = {
  checking: 'Checking the destination…',
  preparing: 'Laying out the test file…',
  testing: 'Testing',
  cleaning: 'Removing the test file…',
  done: 'Done',
};

/** A time a user waits: "about 3m 20s", or under a second. */
const about = (ms: number) => (ms < 1000 ? 'under a second' : `about ${duration(ms)}`);
const ms = (us: number | null) => (us === null ? '—' : (us / 1000).toFixed(us < 1000 ? 2 : 1));
const mib = (n: number) => (n >= 100 ? n.toFixed(0) : n.toFixed(1));
/** The name of a result in tables and charts (S3: with its in-flight count). */
const seriesName = (r: { pattern: SpeedTestPatternId; depth?: number }, s3: boolean) =>
  s3 && r.depth ? `${SHORT[r.pattern]} ×${r.depth}` : SHORT[r.pattern];

/** A pattern's colour, the same in every chart. */
const colorOf = (p: SpeedTestPatternId) => {
  const i = [...DISK, ...S3].findIndex((c) => c.id === p) % DISK.length;
  return COLORS[i];
};

function LiveChart({ samples, s3 }: { samples: SpeedTestSample[]; s3: boolean }) {
  const patterns = [...new Set(samples.map((x) => x.pattern))];
  // every row names every series (null: a gap), so a line ends where its pattern ended
  const none = Object.fromEntries(patterns.map((p) => [SHORT[p], null]));
  const data = samples.map((x) => ({ ...none, t: +(x.t / 1000).toFixed(2), [SHORT[x.pattern]]: x.mibps }));
  const axis = { stroke: 'var(--muted)', fontSize: 11, tickLine: false };
  return (
    <figure
      className="chart card"
      aria-label={`Speed test live chart, ${samples.length} samples`}
      data-samples={samples.length}
    >
      <figcaption>{s3 ? 'MiB/s per request pattern' : 'MiB/s per pattern'}, live</figcaption>
      <ResponsiveContainer width="100%" height={180}>
        <LineChart data={data} margin={{ top: 8, right: 12, left: 0, bottom: 0 }}>
          <CartesianGrid stroke="var(--grid)" vertical={false} />
          <XAxis
            dataKey="t"
            type="number"
            domain={[0, 'dataMax']}
            tickFormatter={(t: number) => `${Math.round(t)}s`}
            allowDecimals={false}
            {...axis}
          />
          <YAxis unit=" MiB/s" width={78} {...axis} />
          <Tooltip contentStyle={{ background: 'var(--surface)', border: '1px solid var(--border)' }} />
          <Legend wrapperStyle={{ fontSize: 12 }} />
          {patterns.map((p) => (
            <Line
              key={p}
              type="monotoneX"
              dataKey={SHORT[p]}
              name={SHORT[p]}
              stroke={colorOf(p)}
              strokeWidth={2}
              dot={false}
              connectNulls={false}
              isAnimationActive={false}
            />
          ))}
        </LineChart>
      </ResponsiveContainer>
    </figure>
  );
}

function ResultsTable({ results, s3 }: { results: SpeedTestPatternResult[]; s3: boolean }) {
  return (
    <div className="card table-card">
      <table className="table" aria-label="Speed test results">
        <thead>
          <tr>
            <th>Pattern</th>
            <th>Block</th>
            <th>{s3 ? 'In flight' : 'Threads × depth'}</th>
            <th>MiB/s</th>
            <th>IOPS</th>
            <th>p50 ms</th>
            <th>p95 ms</th>
            <th>p99 ms</th>
          </tr>
        </thead>
        <tbody>
          {results.map((r) => (
            <tr key={`${r.pattern}-${r.depth}`} data-pattern={r.pattern} title={r.label}>
              <td>
                {seriesName(r, s3)}
                {r.direct === false ? (
                  <span className="badge tone-warn" title={r.note}>
                    {' '}
                    cached
                  </span>
                ) : null}
              </td>
              <td>
                {r.blockSize >= 1024 * 1024
                  ? `${r.blockSize / 1024 / 1024} MiB`
                  : `${r.blockSize / 1024} KiB`}
              </td>
              <td>{s3 ? r.depth : `${r.threads} × ${r.depth}`}</td>
              <td className="num">{mib(r.mibps)}</td>
              <td className="num">{Math.round(r.iops).toLocaleString()}</td>
              <td className="num">{ms(r.latencyUs.p50)}</td>
              <td className="num">{ms(r.latencyUs.p95)}</td>
              <td className="num">{ms(r.latencyUs.p99)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function Verdict({ e, hasJob, s3 }: { e: SpeedTestEstimate; hasJob: boolean; s3: boolean }) {
  const basis = (b: NonNullable<SpeedTestEstimate['backup']>) =>
    `${mib(b.mibps)} MiB/s, ${seriesName({ pattern: b.basis, depth: b.inFlight }, s3).toLowerCase()}`;
  const size =
    e.sourceBytes === null
      ? null
      : `${e.sourceComplete ? '' : 'at least '}${bytes(e.sourceBytes)}${
          e.storedRatio !== null ? `, ${bytes(e.storedBytes)} stored as the last full backup did` : ''
        }`;
  return (
    <div className="card speed-verdict" aria-label="Speed test verdict">
      {size === null ? (
        <p className="muted">Add folders to back up for an estimate of how long a full backup would take.</p>
      ) : (
        <ul className="plain">
          <li data-estimate="backup">
            <strong>Next full backup</strong> ({size}):{' '}
            {e.backup ? `${about(e.backup.ms)} at ${basis(e.backup)}` : 'no write pattern was measured'}
          </li>
          <li data-estimate="restore">
            <strong>Full restore</strong> from here:{' '}
            {e.restore ? `${about(e.restore.ms)} at ${basis(e.restore)}` : 'no read pattern was measured'}
          </li>
        </ul>
      )}
      {hasJob ? (
        <ul className="plain small">
          <li data-last="full">
            Last full backup:{' '}
            {e.lastFull
              ? `${duration(e.lastFull.durationMs)} (${when(e.lastFull.endedAt)}): read ${mib(e.lastFull.readMibps)} MiB/s, stored ${mib(e.lastFull.storedMibps)} MiB/s`
              : 'none yet'}
          </li>
          <li data-last="run">
            Last backup:{' '}
            {e.lastRun
              ? `${duration(e.lastRun.durationMs)} (${when(e.lastRun.endedAt)}): read ${mib(e.lastRun.readMibps)} MiB/s, stored ${mib(e.lastRun.storedMibps)} MiB/s`
              : 'none yet'}
          </li>
        </ul>
      ) : null}
      <p className="hint">
        The destination&apos;s share of the time: reading the sources and compressing may take longer.
      </p>
    </div>
  );
}

function History({ records, s3 }: { records: SpeedTestRecord[]; s3: boolean }) {
  const done = records.filter((r) => r.status === 'completed');
  const names = [...new Set(done.flatMap((r) => r.results.map((x) => seriesName(x, s3))))];
  const trend = [...done].reverse().map((r) => ({
    at: dateTime(r.startedAt),
    ...Object.fromEntries(r.results.map((x) => [seriesName(x, s3), x.mibps])),
  }));
  const axis = { stroke: 'var(--muted)', fontSize: 11, tickLine: false };
  return (
    <section className="speed-history" aria-label="Speed test history">
      <h4>Earlier tests of this destination (MiB/s)</h4>
      {records.length === 0 ? (
        <p className="muted small">None yet.</p>
      ) : (
        <>
          {done.length >= 2 ? (
            <figure className="chart card" aria-label="Speed over time">
              <figcaption>MiB/s over time</figcaption>
              <ResponsiveContainer width="100%" height={150}>
                <LineChart data={trend} margin={{ top: 8, right: 12, left: 0, bottom: 0 }}>
                  <CartesianGrid stroke="var(--grid)" vertical={false} />
                  <XAxis dataKey="at" {...axis} />
                  <YAxis unit=" MiB/s" width={78} {...axis} />
                  <Tooltip
                    contentStyle={{ background: 'var(--surface)', border: '1px solid var(--border)' }}
                  />
                  {names.map((n, i) => (
                    <Line
                      key={n}
                      dataKey={n}
                      stroke={COLORS[i % COLORS.length]}
                      strokeWidth={2}
                      isAnimationActive={false}
                    />
                  ))}
                </LineChart>
              </ResponsiveContainer>
            </figure>
          ) : null}
          <div className="card table-card">
            <table className="table" aria-label="Earlier speed tests">
              <thead>
                <tr>
                  <th>When</th>
                  <th>Result</th>
                  {names.map((n) => (
                    <th key={n}>{n}</th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {records.map((r) => (
                  <tr key={r.id} data-speedtest={r.id}>
                    <td>{dateTime(r.startedAt)}</td>
                    <td>
                      {r.status === 'completed'
                        ? 'Completed'
                        : r.status === 'cancelled'
                          ? 'Cancelled'
                          : 'Failed'}
                      {r.error ? <span className="muted small"> — {r.error.message}</span> : null}
                    </td>
                    {names.map((n) => {
                      const x = r.results.find((y) => seriesName(y, s3) === n);
                      return (
                        <td key={n} className="num">
                          {x ? mib(x.mibps) : '—'}
                        </td>
                      );
                    })}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
    </section>
  );
}

export function SpeedTestPanel({
  destination,
  secretAccessKey,
  jobId,
  sources,
}: {
  destination: ApiArgs['speedtests.start']['destination'];
  secretAccessKey?: string;
  /** The job being edited (its sources, last runs and a stored S3 secret). */
  jobId?: string;
  /** A new job's folders, for the estimate. */
  sources: string[];
}) {
  const s3 = destination.kind === 's3';
  const choices = s3 ? S3 : DISK;
  const [patterns, setPatterns] = useState<SpeedTestPatternId[]>(choices.map((c) => c.id));
  const [fileSizeMiB, setFileSizeMiB] = useState(1024);
  const [blockSizeKiB, setBlockSizeKiB] = useState(512);
  const [durationSec, setDurationSec] = useState(10);
  const [threads, setThreads] = useState(1);
  const [queueDepth, setQueueDepth] = useState(2);
  const [status, setStatus] = useState<SpeedTestStatus | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [history, setHistory] = useState<SpeedTestRecord[]>([]);
  const running = status?.status === 'running';
  const idRef = useRef<string | null>(null);
  const destKey = JSON.stringify(destination);

  useEffect(() => setPatterns((s3 ? S3 : DISK).map((c) => c.id)), [s3]);

  const loadHistory = useCallback(() => {
    void api
      .call('speedtests.history', { destination, limit: 20 })
      .then(setHistory)
      .catch(() => setHistory([]));
    // destKey stands for the destination's value (a new object every render)
  }, [destKey]);
  useEffect(() => {
    // while a destination is being typed, ask once it rests
    const t = setTimeout(loadHistory, 300);
    return () => clearTimeout(t);
  }, [loadHistory]);

  useEffect(
    () =>
      api.on('speedtest.progress', (st) => {
        if (st.id !== idRef.current) return;
        setStatus(st);
        if (st.status !== 'running') loadHistory();
      }),
    [loadHistory],
  );

  const settings: SpeedTestSettings = s3
    ? { patterns, durationSec }
    : { patterns, fileSizeMiB, blockSizeKiB, durationSec, threads, queueDepth };
  const start = async () => {
    setError(null);
    try {
      const st = await api.call('speedtests.start', {
        destination,
        secretAccessKey,
        jobId,
        sources: jobId ? undefined : sources,
        settings,
      });
      idRef.current = st.id;
      setStatus(st);
    } catch (err) {
      setError(errorMessage(err));
    }
  };
  const cancel = () => {
    if (status)
      void api.call('speedtests.cancel', { id: status.id }).catch((err) => setError(errorMessage(err)));
  };
  const results = status?.results ?? [];
  const current = useMemo(
    () =>
      status?.pattern
        ? `${PHASE[status.phase]}: ${seriesName({ pattern: status.pattern, depth: status.inFlight }, s3)} (${
            status.patternIndex + 1
          } of ${status.patternCount})`
        : status
          ? PHASE[status.phase]
          : '',
    [status, s3],
  );

  return (
    <section className="speed-test" aria-label="Speed test">
      <div className="row">
        <strong>Speed test</strong>
        <span className="spacer" />
        {running ? (
          <button className="button" onClick={cancel}>
            <Icon name="stop" size={16} /> Cancel speed test
          </button>
        ) : (
          <button className="button" onClick={() => void start()} disabled={patterns.length === 0}>
            <Icon name="drive" size={16} /> Test speed
          </button>
        )}
      </div>
      <p className="hint">
        Simulates a backup&apos;s and a restore&apos;s I/O on this destination:{' '}
        {s3
          ? 'pack-sized uploads and downloads and small reads at 1, 4 and 8 requests in flight, with probe objects removed afterwards.'
          : 'a test file written and read past the caches in the patterns backup products use, removed afterwards.'}
      </p>
      <details className="speed-options">
        <summary>Options</summary>
        <div className="form-grid two">
          <fieldset className="field span">
            <legend>Patterns</legend>
            <div className="checks">
              {choices.map((c) => (
                <label key={c.id} className="check">
                  <input
                    type="checkbox"
                    checked={patterns.includes(c.id)}
                    disabled={running}
                    onChange={(e) =>
                      setPatterns((p) =>
                        e.target.checked
                          ? choices.map((x) => x.id).filter((x) => p.includes(x) || x === c.id)
                          : p.filter((x) => x !== c.id),
                      )
                    }
                  />
                  {c.label}
                </label>
              ))}
            </div>
          </fieldset>
          {!s3 ? (
            <>
              <div className="field">
                <label htmlFor="speed-file">Test file</label>
                <select
                  id="speed-file"
                  value={fileSizeMiB}
                  disabled={running}
                  onChange={(e) => setFileSizeMiB(Number(e.target.value))}
                >
                  {[...new Set([...FILE_SIZES, fileSizeMiB])]
                    .sort((a, b) => a - b)
                    .map((n) => (
                      <option key={n} value={n}>
                        {n >= 1024 ? `${n / 1024} GiB` : `${n} MiB`}
                      </option>
                    ))}
                </select>
              </div>
              <fieldset className="field">
                <legend>Block size</legend>
                <div className="segmented" role="radiogroup" aria-label="Block size">
                  {BLOCKS.map((b) => (
                    <label key={b.kib} className={`seg ${blockSizeKiB === b.kib ? 'on' : ''}`}>
                      <input
                        type="radio"
                        name="speed-block"
                        checked={blockSizeKiB === b.kib}
                        disabled={running}
                        onChange={() => setBlockSizeKiB(b.kib)}
                      />
                      {b.label}
                    </label>
                  ))}
                </div>
              </fieldset>
              <div className="field">
                <label htmlFor="speed-threads">Threads</label>
                <input
                  id="speed-threads"
                  type="number"
                  min={1}
                  max={64}
                  value={threads}
                  disabled={running}
                  onChange={(e) =>
                    setThreads(Math.max(1, Math.min(64, Math.round(Number(e.target.value) || 1))))
                  }
                />
              </div>
              <div className="field">
                <label htmlFor="speed-depth">Queue depth</label>
                <input
                  id="speed-depth"
                  type="number"
                  min={1}
                  max={256}
                  value={queueDepth}
                  disabled={running}
                  onChange={(e) =>
                    setQueueDepth(Math.max(1, Math.min(256, Math.round(Number(e.target.value) || 1))))
                  }
                />
              </div>
            </>
          ) : null}
          <div className="field">
            <label htmlFor="speed-duration">Seconds per pattern</label>
            <input
              id="speed-duration"
              type="number"
              min={0.5}
              max={3600}
              step={0.5}
              value={durationSec}
              disabled={running}
              onChange={(e) => setDurationSec(Math.max(0.5, Math.min(3600, Number(e.target.value) || 10)))}
            />
          </div>
        </div>
      </details>
      {error ? (
        <p className="error-text" role="alert">
          {error}
        </p>
      ) : null}
      {status ? (
        <div className="speed-live" data-status={status.status}>
          <div className="row">
            <span
              role="status"
              className={`badge tone-${status.status === 'completed' ? 'good' : status.status === 'running' ? 'info' : status.status === 'failed' ? 'bad' : 'neutral'}`}
            >
              {status.status === 'running'
                ? 'Running'
                : status.status === 'completed'
                  ? 'Speed test done'
                  : status.status === 'cancelled'
                    ? 'Cancelled'
                    : 'Speed test failed'}
            </span>
            {running ? <span className="muted small">{current}</span> : null}
          </div>
          {running ? <ProgressBar value={status.fraction} label="Speed test progress" /> : null}
          {status.error ? (
            <p className="error-text" role="alert">
              {status.error.message}
            </p>
          ) : null}
          {status.samples.length ? <LiveChart samples={status.samples} s3={s3} /> : null}
          {results.length ? <ResultsTable results={results} s3={s3} /> : null}
          {status.estimate ? <Verdict e={status.estimate} hasJob={!!jobId} s3={s3} /> : null}
          {status.notes.length ? (
            <ul className="plain small muted" aria-label="Speed test notes">
              {status.notes.map((n) => (
                <li key={n}>{n}</li>
              ))}
            </ul>
          ) : null}
        </div>
      ) : null}
      <History records={history} s3={s3} />
    </section>
  );
}
