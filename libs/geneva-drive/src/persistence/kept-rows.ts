import type { Signal } from '../entities/signal.entity.js';
import type { StepExecution } from '../entities/step-execution.entity.js';
import type { WorkflowRecord } from '../entities/workflow.entity.js';
import type { RowVersions } from './sql/hot-path-sql.js';

/**
 * A job's workflow, execution and pinned signal as the statement that scheduled it left them (start()'s
 * insert, a signal's one message), for its phase 1 should the job start in this process: it begins on
 * them instead of reading them (PreparePhase.prepareUnlocked), its start written only while neither
 * row has been written since (ExpectedStates.versions: the rows' versions as that statement answered), as if it had read them.
 */
export interface KnownRows {
  workflow: WorkflowRecord;
  execution: StepExecution;
  signal: Signal | null;
  versions: RowVersions;
}

/**
 * Rows kept in this process for a job that may start here, by job id: taken once, the oldest
 * dropped first past `capacity` (a job that ran in another process never comes for its own).
 */
export class KeptRows<T> {
  private readonly rows = new Map<string, T>();

  constructor(private readonly capacity: number) {}

  keep(jobId: string, rows: T): void {
    this.rows.delete(jobId);
    this.rows.set(jobId, rows);
    if (this.rows.size > this.capacity) this.rows.delete(this.rows.keys().next().value!);
  }

  take(jobId: string): T | undefined {
    const rows = this.rows.get(jobId);
    this.rows.delete(jobId);
    return rows;
  }
}
