import type { LoggerService } from '@nestjs/common';
import type { StepJob } from './queue.port.js';
import type { StepJobGate } from './step-job-gate.js';

/** Adds the job to Redis: how a job this process could not start in time leaves it. */
export type AddToQueue = (job: StepJob) => Promise<unknown>;

/**
 * Starts a Redis queue's job in the enqueuing process instead of going through Redis, for the Bull
 * and BullMQ adapters alike. A job due now, enqueued (after its commit) by a process that works the
 * queue, takes one of the process's slots (StepJobGate) at once, or waits for one up to the chain's
 * `maxDuration` — the time one workflow may keep a worker before the others get their turn — with
 * at most `concurrency` jobs waiting so; otherwise it goes to Redis, where any worker can take it.
 * No round trips to Redis, no wait for a worker to pick it up (a signal waking a parked step, a
 * workflow started by a worker). It is the job's only run: should the process die before the
 * execution starts, the row stays `scheduled` and overdue, and housekeeping's stuck-scheduled sweep
 * enqueues it again, as after any lost enqueue. A process that stops adds the jobs still waiting to
 * Redis. Housekeeping's own re-enqueues (`reportAdded`), steps with `jobOptions: { chain: false }`,
 * and processes that only enqueue (concurrency 0) go through Redis, as do all jobs when the module's
 * `chainSteps` is off.
 */
export class DueJobStarter {
  private readonly running = new Set<Promise<void>>();
  /** Jobs waiting for a slot, and how to send each to Redis instead. */
  private readonly held = new Map<StepJob, AddToQueue>();

  constructor(
    private readonly gate: StepJobGate,
    /** The module's `chainSteps` is on. */
    private readonly enabled: boolean,
    private readonly logger: LoggerService,
    /** How long a job waits here for a slot (the chain's maxDuration). */
    private readonly holdMs: number,
  ) {}

  /**
   * Starts `job` here, or holds it for a slot, when it may (see the class); true when it did, and the
   * queue is not to get it now. `add` is how a held job goes to Redis after all.
   */
  tryStart(job: StepJob, add: AddToQueue, options?: { reportAdded?: boolean }): boolean {
    if (!this.enabled || options?.reportAdded || this.gate.slots <= 0) return false;
    if (!this.gate.isAccepting || job.jobOptions.chain === false || job.runAt.getTime() > Date.now()) return false;
    if (this.gate.tryTake()) {
      this.start(job);
      return true;
    }
    if (this.held.size >= this.gate.slots) return false;
    this.held.set(job, add);
    this.track(
      this.gate.waitForSlot(this.holdMs).then((taken) => {
        if (!this.held.delete(job)) {
          if (taken) this.gate.release(); // sent to Redis by settle() meanwhile
          return;
        }
        if (taken) this.start(job);
        else this.addToQueue(job, add);
      }),
    );
    return true;
  }

  /** Adds the jobs still waiting to Redis, then waits for the jobs started here (the gate refuses new ones first). */
  async settle(): Promise<void> {
    for (const [job, add] of [...this.held]) {
      this.held.delete(job);
      this.addToQueue(job, add);
    }
    await Promise.allSettled([...this.running]);
  }

  private start(job: StepJob): void {
    const jobId = job.jobId ?? job.executionId;
    this.track(
      this.gate
        .run(job.executionId, jobId, job.hints, { slotTaken: true })
        .catch((error) => this.logger.warn(`Step job ${jobId} (started in this process) ended with ${String(error)}`)),
    );
  }

  private addToQueue(job: StepJob, add: AddToQueue): void {
    const jobId = job.jobId ?? job.executionId;
    this.track(
      add(job)
        .then(() => undefined)
        .catch((error) => this.logger.error(`Step job ${jobId} could not be added to the queue (${String(error)}); housekeeping's stuck-scheduled sweep enqueues it again`)),
    );
  }

  private track(work: Promise<void>): void {
    const tracked: Promise<void> = work.finally(() => this.running.delete(tracked));
    this.running.add(tracked);
  }
}
