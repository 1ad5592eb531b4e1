import { Column, Entity, PrimaryColumn } from 'typeorm';
import type { StepExecutionState, StepOutcome } from '../state/step-execution-state.js';
import { identifierTransformer, idTransformer } from './column-transformers.js';
import { jsonColumnTransformer } from './json-column.js';

/** Freeform audit data on an execution. @publicApi */
export interface StepExecutionMetadata {
  reattemptReason?: 'flow_control' | 'exception_policy' | 'precondition';
  exception?: { class: string; message: string; backtrace: string[] | null };
  [key: string]: unknown;
}

/**
 * One attempt to run one step: the idempotency key of its job and a line of the audit trail.
 * @publicApi
 */
// The migrations own the schema (partial indexes, generated columns): never synchronize it.
@Entity({ name: 'geneva_drive_step_executions', synchronize: false })
export class StepExecution {
  @PrimaryColumn({ type: 'bigint', generated: 'increment', transformer: idTransformer })
  id: string;

  @Column({ name: 'workflow_id', type: 'bigint', transformer: idTransformer })
  workflowId: string;

  @Column({ name: 'step_name', type: 'varchar', length: 255, transformer: identifierTransformer })
  stepName: string;

  @Column({ type: 'varchar', length: 32})
  state: StepExecutionState;

  @Column({ type: 'varchar', length: 32, nullable: true })
  outcome: StepOutcome | null;

  @Column({ name: 'scheduled_for', type: Date })
  scheduledFor: Date;

  @Column({ name: 'started_at', type: Date, nullable: true })
  startedAt: Date | null;

  @Column({ name: 'completed_at', type: Date, nullable: true })
  completedAt: Date | null;

  @Column({ name: 'failed_at', type: Date, nullable: true })
  failedAt: Date | null;

  @Column({ name: 'canceled_at', type: Date, nullable: true })
  canceledAt: Date | null;

  @Column({ name: 'skipped_at', type: Date, nullable: true })
  skippedAt: Date | null;

  @Column({ name: 'finished_at', type: Date, nullable: true })
  finishedAt: Date | null;

  @Column({ name: 'error_class_name', type: 'varchar', length: 255, nullable: true })
  errorClassName: string | null;

  @Column({ name: 'error_message', type: 'text', nullable: true })
  errorMessage: string | null;

  @Column({ name: 'error_backtrace', type: 'text', nullable: true })
  errorBacktrace: string | null;

  /**
   * The id of the queue job that started the execution, or that a signal's wake-up (or a resume)
   * queued for it: `<execution id>-wake-<signal id>` (`<execution id>-resume`). Null while an
   * execution waits for its first job, whose id is the execution id.
   */
  @Column({ name: 'job_id', type: 'varchar', length: 255, nullable: true })
  jobId: string | null;

  @Column({ type: 'text', nullable: true, transformer: jsonColumnTransformer })
  metadata: StepExecutionMetadata | null;

  /** The resumable step's cursor (encoded with the payload codec). */
  @Column({ type: 'text', nullable: true, transformer: jsonColumnTransformer })
  cursor: unknown;

  @Column({ name: 'continues_from_id', type: 'bigint', nullable: true, transformer: idTransformer })
  continuesFromId: string | null;

  /** The signal this execution is processing (the attachment pin). */
  @Column({ name: 'signal_id', type: 'bigint', nullable: true, transformer: idTransformer })
  signalId: string | null;

  /**
   * When the execution parked waiting for a signal. Kept once a signal wakes it: the wake makes it
   * due at once, so `scheduledFor - waitingSince` is how long the step waited.
   */
  @Column({ name: 'waiting_since', type: Date, nullable: true })
  waitingSince: Date | null;

  /**
   * When a parked `waitFor` step with a `timeout` gives up waiting (set when it parks). Kept once a
   * signal or the deadline ends the wait, as the record of the deadline it had.
   */
  @Column({ name: 'timeout_at', type: Date, nullable: true })
  timeoutAt: Date | null;

  /**
   * The concurrency key of the step (flow control) this execution holds a slot of, or waits for;
   * null for a step without one. Needs the flow-control migration.
   */
  @Column({ name: 'flow_key', type: 'varchar', length: 255, nullable: true, transformer: identifierTransformer })
  flowKey: string | null;

  @Column({ name: 'created_at', type: Date })
  createdAt: Date;

  @Column({ name: 'updated_at', type: Date })
  updatedAt: Date;
}
