import type { LoggerService } from '@nestjs/common';
import { StepNotDefinedError } from '../errors/step-not-defined.error.js';
import type { EnqueueOptions, StepJob } from '../interfaces/queue.port.js';
import { releaseDelayMs } from './released-job.js';
import type { RunLedger } from './run-ledger.js';
import type { StepJobGate } from './step-job-gate.js';

/**
 * Where a Redis adapter's `enqueue` after a commit (`afterCommit`) begins: on the event loop's next
 * turn. The call that committed (a `signal()` from a webhook, a `start()`) does not wait for that
 * enqueue, yet its synchronous part — the woken step's first statement when it starts here, or the
 * job's script written to Redis — would otherwise run before that call's caller gets its answer.
 * An enqueue awaited inside a transaction (`enqueueAfterCommit: false`) goes at once: it holds locks.
 */
export const handOffTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Adds the job to Redis: how a job this process could not start in time leaves it. */
export type AddToQueue = (job: StepJob) => Promise<unknown>;

/**
 * While the ledger finds no other process starting jobs itself on the queue, a job waits here for a
 * slot this long, and this many per slot may wait so: no other worker could take it from Redis
 * sooner, and a job through Redis costs about twenty Redis commands and a read of its rows, which
 * one started here does without (BENCHMARKS.md: three in four jobs of the bench's bursts went
 * through Redis; kept here, a fifth less CPU per workflow signal first).
 */
export const ALONE_HOLD_MS = 10_000;
export const ALONE_HELD_PER_SLOT = 200;

/** What the starter needs of its RunLedger. */
export type StarterLedger = Pick<RunLedger, 'begin' | 'end' | 'written' | 'start' | 'stop' | 'isAlone' | 'onShared'>;

/**
 * Starts a Redis queue's job in the enqueuing process instead of going through Redis, for the Bull
 * and BullMQ adapters alike. A job due now, enqueued (after its commit) by a process that works the
 * queue, takes one of the process's slots (StepJobGate) at once, or waits for one up to the chain's
 * `maxDuration` — the time one workflow may keep a worker before the others get their turn — with
 * at most `concurrency` jobs waiting so; otherwise it goes to Redis, where any worker can take it.
 * A process alone on the queue (RunLedger.isAlone) keeps its backlog instead: up to
 * {@link ALONE_HELD_PER_SLOT} jobs per slot wait up to {@link ALONE_HOLD_MS}; once another process
 * takes a lease, the jobs waiting beyond `concurrency` go to Redis, the newest first. Not where a
 * workflow or step has a job `priority`: jobs wait here in the order they came, and only the queue
 * orders its backlog by priority.
 * No Bull job, no wait for a worker to pick it up (a signal waking a parked step, a workflow started
 * by a worker). A process that stops adds the jobs still waiting to Redis. Housekeeping's own
 * re-enqueues (`reportAdded`), steps with `jobOptions: { chain: false }`, and processes that only
 * enqueue (concurrency 0) go through Redis, as do all jobs when the module's `chainSteps` is off.
 *
 * Such a job has no lock in Redis for Bull's stalled-job check to find expired should the process
 * die. Its backstop is the process's RunLedger: the job is recorded there (one HSET) from the moment
 * it is taken, waiting or running, until its run ends (one HDEL drops the runs that end close
 * together), under the process's lease; when the lease expires (a SIGKILL), another worker puts it
 * back on the queue as a takeover job within a lease and a half, which starts the execution if the
 * process died before phase 1, and recovers the step the run had in progress (a chained one
 * included) if it died after. Two commands per job at most rather than a backstop job in Redis (an
 * add and a removal, a dozen commands inside Bull's scripts), and nothing on the database's hot path.
 */
export class DueJobStarter {
  private readonly running = new Set<Promise<void>>();
  /** Jobs waiting for a slot, and how to send each to Redis instead. */
  private readonly held = new Map<StepJob, AddToQueue>();
  private hasPriorities: boolean | undefined;

  constructor(
    private readonly gate: StepJobGate,
    /** The module's `chainSteps` is on. */
    private readonly enabled: boolean,
    private readonly logger: LoggerService,
    /** How long a job waits here for a slot (the chain's maxDuration). */
    private readonly holdMs: number,
    /** Where the jobs taken here are recorded for another process to take over (none: no backstop). */
    private readonly ledger?: StarterLedger,
    /** Whether the application's workflows give jobs a queue priority (asked once the jobs start). */
    private readonly prioritized: () => boolean = () => false,
  ) {
    ledger?.onShared(() => this.shareBacklog());
  }

  /**
   * Starts `job` here, or holds it for a slot, when it may (see the class); true when it did, and the
   * queue is not to get it now. `add` is how a held job goes to Redis after all.
   */
  tryStart(job: StepJob, add: AddToQueue, options?: EnqueueOptions): boolean {
    if (!this.enabled || options?.reportAdded || this.gate.slots <= 0) return false;
    if (!this.gate.isAccepting || job.jobOptions.chain === false || job.runAt.getTime() > Date.now()) return false;
    if (this.gate.tryTake()) {
      this.ledger?.begin(job);
      this.runHere(job, add);
      return true;
    }
    const alone = this.ledger?.isAlone === true && !(this.hasPriorities ??= this.prioritized());
    if (this.held.size >= this.gate.slots * (alone ? ALONE_HELD_PER_SLOT : 1)) return false;
    this.ledger?.begin(job);
    this.held.set(job, add);
    this.track(
      this.gate.waitForSlot(alone ? Math.max(this.holdMs, ALONE_HOLD_MS) : this.holdMs).then((taken) => {
        if (!this.held.delete(job)) {
          if (taken) this.gate.release(); // sent to Redis by settle() meanwhile
          return;
        }
        if (taken) this.runHere(job, add);
        else this.addToQueue(job, add);
      }),
    );
    return true;
  }

  /**
   * Settles once the jobs taken here so far are recorded in the run ledger: an enqueue that started
   * its job here returns only then, so that the run that enqueued it ends (and its own record in
   * Redis goes) after its successor's is written, whichever Redis connection each goes by.
   */
  recorded(): Promise<void> {
    return this.ledger?.written() ?? Promise.resolve();
  }

  /** Takes the ledger's lease (when jobs may start here); `takeOver` adds a dead process's run to Redis. */
  async start(takeOver: AddToQueue): Promise<void> {
    if (this.enabled && this.gate.slots > 0) await this.ledger?.start(takeOver);
  }

  /**
   * Adds the jobs still waiting to Redis, then waits for the jobs started here (the gate refuses new
   * ones first), then releases the ledger's lease.
   */
  async settle(): Promise<void> {
    for (const [job, add] of [...this.held]) {
      this.held.delete(job);
      this.addToQueue(job, add);
    }
    await Promise.allSettled([...this.running]);
    await this.ledger?.stop();
  }

  /** Another process works the queue now: the jobs waiting beyond `concurrency` go to Redis, where it can take them. */
  private shareBacklog(): void {
    const excess = [...this.held].slice(this.gate.slots).reverse();
    for (const [job, add] of excess) {
      this.held.delete(job);
      this.addToQueue(job, add);
    }
  }

  /**
   * Runs the job in a slot. One of a class or step this process does not have (StepNotDefinedError:
   * nothing was decided) goes to Redis after all, delayed as a first hand-back (released-job.ts):
   * it never was in Redis, so it keeps its own id there.
   */
  private runHere(job: StepJob, add: AddToQueue): void {
    const jobId = job.jobId ?? job.executionId;
    this.track(
      this.gate
        .run(job.executionId, jobId, job.hints, { slotTaken: true })
        .catch((error) => {
          if (error instanceof StepNotDefinedError) return add({ ...job, runAt: new Date(Date.now() + releaseDelayMs(0)) }).then(() => undefined);
          this.logger.warn(`Step job ${jobId} (started in this process) ended with ${String(error)}`);
        })
        .catch((error) => this.logger.error(`Step job ${jobId} could not be handed back to the queue (${String(error)}); housekeeping's stuck-scheduled sweep enqueues it again`))
        .finally(() => this.ledger?.end(job)),
    );
  }

  private addToQueue(job: StepJob, add: AddToQueue): void {
    const jobId = job.jobId ?? job.executionId;
    this.track(
      add(job)
        .then(() => undefined)
        .catch((error) => this.logger.error(`Step job ${jobId} could not be added to the queue (${String(error)}); housekeeping's stuck-scheduled sweep enqueues it again`))
        .finally(() => this.ledger?.end(job)),
    );
  }

  private track(work: Promise<void>): void {
    const tracked: Promise<void> = work.finally(() => this.running.delete(tracked));
    this.running.add(tracked);
  }
}
