import type { LoggerService } from '@nestjs/common';
import type { StepJob } from './queue.port.js';
import type { StepJobGate } from './step-job-gate.js';

/**
 * Starts a Redis queue's job in the enqueuing process instead of going through Redis, for the Bull
 * and BullMQ adapters alike. A job due now, enqueued (after its commit) by a process that works the
 * queue and has a free slot, starts here at once: no round trips to Redis, no wait for a worker to
 * pick it up (a signal waking a parked step, a workflow started by a worker). It is the job's only
 * run: should the process die before the execution starts, the row stays `scheduled` and overdue,
 * and housekeeping's stuck-scheduled sweep enqueues it again, as after any lost enqueue.
 * Housekeeping's own re-enqueues (`reportAdded`), steps with `jobOptions: { chain: false }`, and
 * processes that only enqueue (concurrency 0) go through Redis, as do all jobs when the module's
 * `chainSteps` is off.
 */
export class DueJobStarter {
  private readonly running = new Set<Promise<void>>();

  constructor(
    private readonly gate: StepJobGate,
    private readonly concurrency: number,
    /** The module's `chainSteps` is on. */
    private readonly enabled: boolean,
    private readonly logger: LoggerService,
  ) {}

  /** Starts `job` here when it may (see the class); true when it did, and the queue is not to get it. */
  tryStart(job: StepJob, options?: { reportAdded?: boolean }): boolean {
    if (!this.enabled || options?.reportAdded || this.concurrency <= 0) return false;
    if (!this.gate.isAccepting || this.gate.inFlight >= this.concurrency) return false;
    if (job.jobOptions.chain === false || job.runAt.getTime() > Date.now()) return false;
    const jobId = job.jobId ?? job.executionId;
    const run: Promise<void> = this.gate
      .run(job.executionId, jobId, job.hints)
      .catch((error) => this.logger.warn(`Step job ${jobId} (started in this process) ended with ${String(error)}`))
      .finally(() => this.running.delete(run));
    this.running.add(run);
    return true;
  }

  /** Waits for the jobs started here (the gate refuses new ones first). */
  async settle(): Promise<void> {
    await Promise.allSettled([...this.running]);
  }
}
