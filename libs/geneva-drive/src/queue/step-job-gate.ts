import type { StepJobHandler, StepJobHints } from '../interfaces/queue.port.js';

/**
 * Recovers what a dead process's run of a job left behind (HousekeepingService registers it): the
 * execution the run had in progress, or one it scheduled whose job may have died with it.
 */
export type RunTakeover = (executionId: string, jobId: string, hints?: StepJobHints) => Promise<void>;

/** The jobs a run enqueues after its commits, followed until they are in the queue's hands (AfterCommitSubscriber). */
export interface RunHandOffs {
  /** Where the enqueues started from now on begin. */
  readonly mark: number;
  /** Settles once the enqueues of `workflowId`'s jobs started since `mark` have; undefined when none runs. */
  settledSince(mark: number, workflowId: string): Promise<void> | undefined;
}

/**
 * Hands jobs from a queue consumer Nest starts itself (a `@Processor` of @nestjs/bull, which
 * consumes from module init) to the engine, which is ready only once the application has
 * bootstrapped: a job taken earlier waits here for the handler. It also owns the process's
 * `concurrency` slots, shared by the jobs the queue delivers and those started in this process
 * (DueJobStarter): at most that many run at once, and a job waiting for a slot gets one in the order
 * it came.
 */
export class StepJobGate {
  private open!: (handler: StepJobHandler) => void;
  private readonly handler = new Promise<StepJobHandler>((resolve) => (this.open = resolve));
  private accepting = false;
  /** Slots taken: running jobs, and jobs a slot was handed to that have not started yet. */
  private taken = 0;
  private readonly waiting: Array<() => void> = [];
  private takeover: RunTakeover | undefined;
  private handOffs: RunHandOffs | undefined;

  /** The process's `concurrency`: at most this many jobs run at once. */
  constructor(readonly slots: number) {}

  /** Lets waiting and future jobs through to `handler`. */
  start(handler: StepJobHandler): void {
    this.accepting = true;
    this.open(handler);
  }

  /** Whether the engine takes jobs now (started, not stopping). */
  get isAccepting(): boolean {
    return this.accepting;
  }

  /** Refuses jobs the engine will never take (the application stops before it bootstrapped); housekeeping re-enqueues them. */
  refuse(): void {
    this.accepting = false;
    this.open(async (executionId) => {
      throw new Error(`Step job ${executionId} arrived while the application was stopping`);
    });
  }

  /** Takes a slot if one is free and no job waits for one. */
  tryTake(): boolean {
    if (this.taken >= this.slots || this.waiting.length > 0) return false;
    this.taken++;
    return true;
  }

  /**
   * Waits up to `ms` for a slot, in turn: true once it is taken (run the job with `{ slotTaken: true }`),
   * false when none came in time (nothing is taken).
   */
  waitForSlot(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const granted = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.waiting.splice(this.waiting.indexOf(granted), 1);
        resolve(false);
      }, ms);
      this.waiting.push(granted);
    });
  }

  /** How a takeover recovers the dead run's work (see run). */
  onTakeover(takeover: RunTakeover): void {
    this.takeover = takeover;
  }

  /** How a run follows the jobs it enqueues after its commits (see run). */
  onHandOffs(handOffs: RunHandOffs): void {
    this.handOffs = handOffs;
  }

  /**
   * Runs the job in a slot: the one `slotTaken` says it holds, or the next free one. A `takeover`
   * (the job of a run whose process died: a redelivery after Bull's stalled-job check, or a RunLedger
   * takeover job) first recovers what that run left in progress, then runs the job as usual, which
   * starts the execution if the run died before it could.
   *
   * Settles, once the slot is given back, only when the jobs of the job's workflow that the run
   * enqueued after its commits (its next step's, its deadline's) are in Redis or in the run ledger:
   * until then the job's own record — Bull's active job, the ledger's entry — is what a takeover
   * finds should the process die, and it finds them from the rows. Jobs of other workflows (a
   * child's first step, a parent's wake-up) are left to housekeeping, which a takeover of this run
   * would not find either; so is a job that names no workflow in its hints (none this version makes).
   */
  async run(executionId: string, jobId: string, hints?: StepJobHints, options?: { slotTaken?: boolean; takeover?: boolean }): Promise<void> {
    const mark = this.handOffs?.mark ?? 0;
    try {
      await this.runInSlot(executionId, jobId, hints, options);
    } finally {
      if (hints?.workflowId !== undefined) await this.handOffs?.settledSince(mark, hints.workflowId);
    }
  }

  private async runInSlot(executionId: string, jobId: string, hints?: StepJobHints, options?: { slotTaken?: boolean; takeover?: boolean }): Promise<void> {
    if (!options?.slotTaken && !this.tryTake()) await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      const handler = await this.handler;
      // Also while the process stops: a takeover it was handed is not handed to another worker again.
      if (options?.takeover) await this.takeover?.(executionId, jobId, hints);
      return await handler(executionId, jobId, hints);
    } finally {
      this.release();
    }
  }

  /** Gives back a slot: it passes to the next job waiting, if any, without being freed in between. */
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.taken--;
  }
}
