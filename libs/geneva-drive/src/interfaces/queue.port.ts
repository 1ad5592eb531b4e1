import type { StepJobOptions } from '../workflow/step-options.interface.js';

/** One step job: run execution `executionId` at `runAt`. The job id is the execution id unless `jobId` says otherwise. */
export interface StepJob {
  executionId: string;
  /**
   * What the job tells the executor besides its execution, so that it need not look them up: the
   * workflow (locked first), its hero (read with the lock), and the workflow's type and the step,
   * which tell phase 1 before any read whether the step runs application code before its body.
   * Adapters keep them with the job and hand them back; a job without them (queued by an older
   * version) still runs. The executor trusts none of them over the rows it reads.
   */
  hints?: StepJobHints;
  runAt: Date;
  jobOptions: StepJobOptions;
  /**
   * The job's identity in the queue, when it must not be the execution id: a signal's wake-up of a
   * parked execution, whose previous job (the one that parked it) may not have left the queue yet.
   */
  jobId?: string;
}

/** See StepJob.hints. */
export interface StepJobHints {
  workflowId?: string;
  workflowType?: string;
  stepName?: string;
  heroType?: string;
  heroId?: string;
  /** The W3C trace context of the call that created the job, when a tracing integration is installed (see JobContextPropagator). */
  traceparent?: string;
}

/**
 * Runs one execution; the queue calls it when a job is due, with the job's id in the queue (the
 * execution id, or StepJob.jobId), which is recorded on the execution as `jobId`, and the job's
 * hints.
 */
export type StepJobHandler = (executionId: string, jobId?: string, hints?: StepJobHints) => Promise<void>;

/** How the engine asks for a job (see QueuePort.enqueue). */
export interface EnqueueOptions {
  reportAdded?: boolean;
  afterCommit?: boolean;
}

/**
 * Where step jobs go. The database is the source of truth; the queue only wakes executions up, so
 * an adapter may deliver a job twice (the executor ignores the second) but must not invent one.
 */
export interface QueuePort {
  /**
   * Adds the job. With `reportAdded` (housekeeping asks, the hot path does not), resolves `false`
   * when the queue already held a job with that id that is still to run, so nothing was added (a
   * re-enqueue of a job still waiting); anything else (`true`, or nothing from an adapter that cannot tell) means a job was added.
   * With `afterCommit`, the job's writes have committed and no caller waits for this enqueue (the
   * engine tracks it until shutdown): an adapter may begin it on a later turn of the event loop.
   */
  enqueue(job: StepJob, options?: EnqueueOptions): Promise<boolean | void>;
  /** Starts consuming jobs in this process. */
  start(handler: StepJobHandler): Promise<void>;
  /**
   * Runs `task` every `everyMs` (housekeeping). With Bull, one process of the cluster runs it per
   * period; in-process adapters use a timer; the manual adapter never runs it.
   */
  repeat(name: string, everyMs: number, task: () => Promise<unknown>): Promise<void>;
  /** Stops taking jobs and waits for running ones. */
  stop(): Promise<void>;
  /** Resolves when the queue's backend answers (the health indicator calls it); in-process queues need none. */
  ping?(): Promise<void>;
}
