/** The job option "Use less memory" (wizard): the engine's low-memory mode for older PCs. */
import type { JobOptions } from '../api';

export const MEMORY_LOW_LABEL = 'Use less memory';

/** What the review step and the job's settings say about the option. */
export function describeMemory(low: boolean): string {
  return low ? 'Less memory (slower backups and restores)' : 'Normal';
}

/** The job's options for the checkbox: a low-memory job lets the engine pick its (fewer) workers. */
export function memoryOptions(
  low: boolean,
  workers: number | undefined,
): Pick<JobOptions, 'memory' | 'workers'> {
  return low ? { memory: 'low', workers: undefined } : { memory: undefined, workers };
}

export function MemoryField({ value, onChange }: { value: boolean; onChange: (low: boolean) => void }) {
  return (
    <label className="check">
      <input
        type="checkbox"
        data-testid="memory-low"
        checked={value}
        onChange={(e) => onChange(e.target.checked)}
      />{' '}
      {MEMORY_LOW_LABEL} <span className="muted small">— for older PCs: slower backups and restores</span>
    </label>
  );
}
