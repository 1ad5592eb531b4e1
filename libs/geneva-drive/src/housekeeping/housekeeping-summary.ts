import type { Gauge, StepGauge } from '../persistence/gauges.js';

/** What one housekeeping run did, and the gauges it read. @publicApi */
export interface HousekeepingSummary {
  workflowsDeleted: number;
  stepExecutionsDeleted: number;
  signalsDeleted: number;
  stuckInProgressRecovered: number;
  /** Overdue `scheduled` executions whose job was missing from the queue (a lost enqueue) and was added again. */
  stuckScheduledRecovered: number;
  /**
   * Overdue `scheduled` executions whose job was still in the queue (a backlog, not a loss): the
   * re-enqueue added nothing, so they are not counted as recovered.
   */
  stuckScheduledStillQueued: number;
  /**
   * Parked executions whose `timeout` passed more than `stuckScheduledThreshold` ago with the workflow
   * runnable (their deadline job was lost), timed out by this run.
   */
  overdueDeadlinesRecovered: number;
  /** Waiters of a concurrency key with a free slot whose wake was sent again (a wake's job was lost). */
  flowWaitersWoken: number;
  /**
   * Workflows paused in this run because their step was found stuck `in_progress` once more after
   * `maxRecoveries` recoveries in a row (each also logged at error level).
   */
  pausedAtRecoveryLimit: string[];
  /**
   * Executions housekeeping could not recover (each is logged with its error): the recovery threw,
   * or its job could not be enqueued. They stay eligible and are retried by the next run.
   */
  unrecoverable: string[];
  /**
   * Scheduled or parked executions of ongoing workflows that no live process can run: no process
   * that runs step jobs and was seen in the last 90 seconds registers their workflow class, or
   * defines (or may skip) their step — a deploy that removed a class or step too early, or a rolling
   * deploy that has not reached any worker yet. By workflow type, then step name; logged as a
   * warning when not zero. Null without the process table (its migration, AddGenevaDriveProcesses1730000000005).
   */
  unrunnableExecutions: { total: number; byWorkflow: Record<string, Record<string, number>> } | null;
  gauges: {
    'geneva_drive.waiting_step_executions': Gauge;
    /** Absent when `waitingVisibilityThreshold` is null. */
    'geneva_drive.waiting_overdue'?: Gauge;
    /** Workflows paused by the recovery limit and not resumed, skipped or canceled since. */
    'geneva_drive.recovery_limit_paused': Gauge;
    /** Every paused workflow, whatever paused it (an operator, a step, a failure, the recovery limit). */
    'geneva_drive.paused_workflows': Gauge;
    /** Parked executions with a deadline (`timeout`). Absent without the wait-deadlines migration. */
    'geneva_drive.waiting_with_deadline'?: Gauge;
    /** Of those, deadlines overdue by more than `stuckScheduledThreshold` (a lost job; housekeeping times them out). */
    'geneva_drive.deadlines_overdue'?: Gauge;
    /** Executions of steps with a concurrency key waiting for a slot, by workflow type and step. Absent without the flow-control migration. */
    'geneva_drive.flow_key_waiting'?: StepGauge;
    /** Executions of steps with a concurrency key holding a slot (in progress), by workflow type and step. Absent without the flow-control migration. */
    'geneva_drive.flow_key_holding'?: StepGauge;
  } | null;
}

export function emptySummary(): HousekeepingSummary {
  return {
    workflowsDeleted: 0,
    stepExecutionsDeleted: 0,
    signalsDeleted: 0,
    stuckInProgressRecovered: 0,
    stuckScheduledRecovered: 0,
    stuckScheduledStillQueued: 0,
    overdueDeadlinesRecovered: 0,
    flowWaitersWoken: 0,
    pausedAtRecoveryLimit: [],
    unrecoverable: [],
    unrunnableExecutions: null,
    gauges: null,
  };
}
