/** Throughput graphs of a run (read/written MB/s, files/s, dedup ratio), live or from history. */
import {
  Area,
  AreaChart,
  CartesianGrid,
  Line,
  LineChart,
  ResponsiveContainer,
  Tooltip,
  XAxis,
  YAxis,
} from 'recharts';
import type { RunSample } from '../api';

const MB = 1024 * 1024;

function secs(t: number) {
  return `${Math.round(t / 1000)}s`;
}

export function ThroughputCharts({ samples }: { samples: RunSample[] }) {
  const data = samples.map((s) => ({
    t: s.t,
    read: +(s.readBps / MB).toFixed(2),
    written: +(s.writeBps / MB).toFixed(2),
    files: +s.filesPerSec.toFixed(1),
    // 0 means "not known yet" (nothing stored so far): leave a gap rather than draw a drop
    dedup: s.dedupRatio > 0 ? +s.dedupRatio.toFixed(2) : null,
  }));
  const axis = { stroke: 'var(--muted)', fontSize: 11, tickLine: false };
  const knownCount = data.filter((d) => d.dedup !== null).length;
  const known = knownCount > 0;
  return (
    <div className="charts" data-samples={samples.length}>
      <figure className="chart card" aria-label={`Throughput in MB/s, ${samples.length} samples`}>
        <figcaption>
          Throughput <span className="legend read">read</span> <span className="legend written">written</span>
        </figcaption>
        <ResponsiveContainer width="100%" height={180}>
          <AreaChart data={data} margin={{ top: 8, right: 12, left: 0, bottom: 0 }}>
            <defs>
              <linearGradient id="gRead" x1="0" y1="0" x2="0" y2="1">
                <stop offset="0%" stopColor="var(--accent)" stopOpacity={0.45} />
                <stop offset="100%" stopColor="var(--accent)" stopOpacity={0} />
              </linearGradient>
              <linearGradient id="gWrite" x1="0" y1="0" x2="0" y2="1">
                <stop offset="0%" stopColor="var(--accent-2)" stopOpacity={0.4} />
                <stop offset="100%" stopColor="var(--accent-2)" stopOpacity={0} />
              </linearGradient>
            </defs>
            <CartesianGrid stroke="var(--grid)" vertical={false} />
            <XAxis dataKey="t" tickFormatter={secs} {...axis} />
            <YAxis unit=" MB/s" width={70} {...axis} />
            <Tooltip
              labelFormatter={(t) => secs(Number(t))}
              contentStyle={{ background: 'var(--surface)', border: '1px solid var(--border)' }}
            />
            <Area
              type="monotoneX"
              dataKey="read"
              name="Read MB/s"
              stroke="var(--accent)"
              fill="url(#gRead)"
              strokeWidth={2}
              isAnimationActive={false}
            />
            <Area
              type="monotoneX"
              dataKey="written"
              name="Written MB/s"
              stroke="var(--accent-2)"
              fill="url(#gWrite)"
              strokeWidth={2}
              isAnimationActive={false}
            />
          </AreaChart>
        </ResponsiveContainer>
      </figure>
      <figure className="chart card" aria-label="Files per second">
        <figcaption>Files per second</figcaption>
        <ResponsiveContainer width="100%" height={140}>
          <LineChart data={data} margin={{ top: 8, right: 12, left: 0, bottom: 0 }}>
            <CartesianGrid stroke="var(--grid)" vertical={false} />
            <XAxis dataKey="t" tickFormatter={secs} {...axis} />
            <YAxis width={70} {...axis} />
            <Tooltip
              labelFormatter={(t) => secs(Number(t))}
              contentStyle={{ background: 'var(--surface)', border: '1px solid var(--border)' }}
            />
            <Line
              type="monotoneX"
              dataKey="files"
              name="Files/s"
              stroke="var(--accent-3)"
              strokeWidth={2}
              dot={false}
              isAnimationActive={false}
            />
          </LineChart>
        </ResponsiveContainer>
      </figure>
      <figure className="chart card" aria-label="Deduplication ratio">
        <figcaption>Space saving (processed ÷ stored)</figcaption>
        {known ? (
          <ResponsiveContainer width="100%" height={140}>
            <LineChart data={data} margin={{ top: 8, right: 12, left: 0, bottom: 0 }}>
              <CartesianGrid stroke="var(--grid)" vertical={false} />
              <XAxis dataKey="t" tickFormatter={secs} {...axis} />
              <YAxis
                width={70}
                domain={[0, (max: number) => Math.max(2, Math.ceil(max))]}
                allowDecimals={false}
                {...axis}
              />
              <Tooltip
                labelFormatter={(t) => secs(Number(t))}
                contentStyle={{ background: 'var(--surface)', border: '1px solid var(--border)' }}
              />
              <Line
                type="stepAfter"
                dataKey="dedup"
                name="Saving ×"
                stroke="var(--accent-4)"
                strokeWidth={2}
                dot={knownCount < 3}
                isAnimationActive={false}
              />
            </LineChart>
          </ResponsiveContainer>
        ) : (
          <p className="chart-empty muted small">Known once data has been written to the repository.</p>
        )}
      </figure>
    </div>
  );
}
