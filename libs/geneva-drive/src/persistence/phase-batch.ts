import type { EntityManager } from 'typeorm';
import type { Signal } from '../entities/signal.entity.js';
import type { StepExecution } from '../entities/step-execution.entity.js';
import type { WorkflowRecord } from '../entities/workflow.entity.js';
import { jobTraceContext } from '../instrumentation/job-context.js';
import type { QueuePort, StepJob, StepJobHints } from '../interfaces/queue.port.js';
import type { StepJobOptions } from '../workflow/step-options.interface.js';
import type { AfterCommitSubscriber } from './after-commit.js';
import type { ExpectedStates, GuardedWrite, HotPathSql, SlotChange, TrailingRead, WriteBatch } from './sql/hot-path-sql.js';

/** What a step job needs of its workflow (StepJob.hints). */
export type JobWorkflow = Pick<WorkflowRecord, 'id' | 'type' | 'heroType' | 'heroId'>;

/** What a job of the workflow's step `stepName` tells the executor (StepJob.hints). */
export function jobHints(workflow: JobWorkflow, stepName: string): StepJobHints {
  return { workflowId: workflow.id, workflowType: workflow.type, stepName, heroType: workflow.heroType, heroId: workflow.heroId };
}

/** A job scheduled by a batched phase, not sent yet. */
export interface PendingJob {
  workflow: JobWorkflow;
  execution: StepExecution;
  jobOptions: StepJobOptions;
  jobId?: string;
}

/** A phase run by {@link PhaseBatch.writeIfUnchanged} tried to read: it must run under the row locks. */
class NeedsLocks extends Error {}

/**
 * {@link PhaseBatch.writeIfUnchanged}'s write committed, and sending its jobs or waking the waiters of
 * the slot it freed failed after (`cause`): what it recorded stands; only those are still to go.
 */
export class SentAfterWriteError extends Error {
  constructor(readonly cause: unknown) {
    super(`written, but what goes after the write failed: ${String(cause)}`);
  }
}

/** What {@link PhaseBatch.writeIfUnchanged} wrote: the rows of the read that went with it, when it went. */
export interface Written {
  then?: Array<Record<string, unknown>>;
  /** The due job kept back for the statement that started its execution (a {@link DueStart}'s): the caller sends it when that left it scheduled. */
  withheld?: PendingJob;
}

/**
 * For {@link PhaseBatch.writeIfUnchanged}: the statement that runs the phase 1 of the job `work`
 * scheduled due now (null: none) after the write, in its message; undefined for the write alone
 * (its jobs sent as usual), null to send nothing.
 */
export type DueStart = (due: StepExecution | null) => TrailingRead | null | undefined;

/** A guarded write kept for its transaction's COMMIT (PhaseBatch.endOnCommit). */
export interface Ending {
  batch: WriteBatch;
  expected: ExpectedStates;
  jobs: PendingJob[];
}

function emptyBatch(): WriteBatch {
  return { updates: [], inserts: [], consumptions: [] };
}

function isEmpty(batch: WriteBatch): boolean {
  return batch.updates.length === 0 && batch.inserts.length === 0 && batch.consumptions.length === 0;
}

/**
 * A phase's pending writes and the jobs it scheduled, flushed together: the writes in as few
 * statements as the dialect allows when the phase ends (or before its next read), the jobs once
 * those writes are in (after the outermost commit, or at once when configured so). Outside a phase
 * a write goes out at once and a job is sent at once. The phase is keyed by its transaction's
 * `EntityManager`.
 */
export class PhaseBatch {
  private readonly writes = new WeakMap<EntityManager, WriteBatch>();
  /** The jobs a phase scheduled, sent when it ends unless the executor runs one inline (see takeDueJob). */
  private readonly jobs = new WeakMap<EntityManager, PendingJob[]>();
  /** The managers of phases deciding without the row locks (see writeIfUnchanged): they may not read. */
  private readonly unlocked = new WeakSet<EntityManager>();
  /** Transactions whose phase's last writes may go with their COMMIT (see writeOnCommit), and those writes. */
  private readonly writesOnCommit = new WeakSet<EntityManager>();
  private readonly lastWrites = new WeakMap<EntityManager, WriteBatch>();
  /** Transactions whose guarded write goes with their COMMIT (see endOnCommit), and that write once made. */
  private readonly endsOnCommit = new WeakSet<EntityManager>();
  private readonly endings = new WeakMap<EntityManager, Ending>();
  /** The slot of a concurrency key a phase deciding without the row locks takes or frees with its writes (see changeSlot). */
  private readonly slots = new WeakMap<EntityManager, SlotChange>();

  constructor(
    private readonly sql: (manager: EntityManager) => HotPathSql,
    private readonly queue: QueuePort,
    private readonly afterCommit: AfterCommitSubscriber,
    private readonly enqueueAfterCommit: boolean,
    private readonly now: () => Date,
  ) {}

  /**
   * Runs `work` with its writes collected, and writes them together when it returns (nothing when it
   * throws: its transaction rolls back), then sends its jobs.
   */
  async run<T>(manager: EntityManager, work: () => Promise<T>): Promise<T> {
    if (this.writes.has(manager)) return work();
    this.writes.set(manager, emptyBatch());
    this.jobs.set(manager, []);
    try {
      const result = await work();
      const batch = this.writes.get(manager)!;
      // Kept for the COMMIT when no job waits for the ids it would give: the jobs can go (after commit) first.
      if (this.writesOnCommit.has(manager) && batch.inserts.length === 0 && (batch.updates.length > 0 || batch.consumptions.length > 0)) {
        this.assertMayRead(manager);
        this.lastWrites.set(manager, batch);
      } else {
        await this.flush(manager);
      }
      for (const job of this.jobs.get(manager)!) await this.send(manager, job);
      return result;
    } finally {
      this.writes.delete(manager);
      this.jobs.delete(manager);
    }
  }

  /**
   * Runs `work` unlocked and writes its batch with HotPathSql.writeIfUnchanged (see
   * WorkflowStore.writeIfUnchanged); its jobs are sent once that has committed (their failure then
   * throws SentAfterWriteError). False, with nothing written or sent, when the rows had moved on or
   * `work` needed a read. `then` goes with the write where the dialect can (HotPathSql.writeIfUnchanged);
   * a {@link DueStart} starts the due job's execution there instead of sending the job (Written.withheld).
   */
  async writeIfUnchanged(manager: EntityManager, expected: ExpectedStates, work: () => Promise<void>, then?: TrailingRead | DueStart): Promise<Written | false> {
    const sql = this.sql(manager);
    this.writes.set(manager, emptyBatch());
    this.jobs.set(manager, []);
    this.unlocked.add(manager);
    try {
      try {
        await work();
      } catch (error) {
        if (error instanceof NeedsLocks) return false;
        throw error;
      }
      if (this.endsOnCommit.has(manager)) {
        this.endings.set(manager, { batch: this.writes.get(manager)!, expected, jobs: this.jobs.get(manager)! });
        return {};
      }
      const slot = this.slots.get(manager);
      let withheld: PendingJob | undefined;
      let read: TrailingRead | undefined;
      if (typeof then !== 'function') read = then;
      else {
        const due = this.dueJob(manager);
        const start = then(due?.execution ?? null);
        if (start === null) return false;
        read = start;
        if (read && due) {
          withheld = due;
          this.jobs.set(manager, this.jobs.get(manager)!.filter((job) => job !== due));
        }
      }
      const written = await sql.writeIfUnchanged(manager, this.writes.get(manager)!, slot ? { ...expected, slot } : expected, read);
      if (!written) return false;
      try {
        for (const job of this.jobs.get(manager)!) await this.send(manager, job);
        if (slot?.take === false && slot.freed && written.freedSlot) await slot.freed(written.freedSlot);
      } catch (error) {
        throw new SentAfterWriteError(error);
      }
      return { ...(written.then ? { then: written.then } : {}), ...(withheld ? { withheld } : {}) };
    } finally {
      this.writes.delete(manager);
      this.jobs.delete(manager);
      this.unlocked.delete(manager);
      this.slots.delete(manager);
    }
  }

  /**
   * The first thing a phase ({@link run}) does in a transaction it begins: runs `work` unlocked, as
   * {@link writeIfUnchanged} does, and begins the transaction with the guarded write of its batch and
   * the read `then` makes for the due job it scheduled (if any) after it, in one round trip
   * (HotPathSql.beginWritingIfUnchanged). Written: the rows stay locked to the transaction's end and
   * the phase goes on with the jobs `work` scheduled (the due one may run inline: takeDueJob).
   * `'begun'`: the rows had moved on; `'unsent'`: `work` needed a read or the dialect cannot send it
   * so, and the transaction is not begun. Either way nothing of `work`'s is kept.
   */
  async beginWritingIfUnchanged(
    manager: EntityManager,
    expected: ExpectedStates,
    work: () => Promise<void>,
    then: (due: StepExecution | null) => TrailingRead | undefined,
  ): Promise<Written | 'begun' | 'unsent'> {
    const sql = this.sql(manager);
    const pending = this.writes.get(manager);
    if (!pending || !isEmpty(pending) || this.jobs.get(manager)!.length > 0) return 'unsent';
    this.unlocked.add(manager);
    let written: GuardedWrite | null | undefined;
    try {
      written = await work().then(
        () => {
          const slot = this.slots.get(manager);
          return sql.beginWritingIfUnchanged(manager, this.writes.get(manager)!, slot ? { ...expected, slot } : expected, then(this.dueJob(manager)?.execution ?? null));
        },
        (error) => {
          if (error instanceof NeedsLocks) return undefined;
          throw error;
        },
      );
    } finally {
      this.unlocked.delete(manager);
      this.slots.delete(manager);
    }
    if (!written) {
      this.writes.set(manager, emptyBatch());
      this.jobs.set(manager, []);
      return written === null ? 'begun' : 'unsent';
    }
    this.writes.set(manager, emptyBatch());
    return written.then ? { then: written.then } : {};
  }

  /**
   * Takes or frees a concurrency key's slot with the writes of a phase deciding without the row
   * locks, where the guarded write can (see SlotChange: a take goes out only while the key is
   * uncontended; a free always, its `freed` called once it has committed). False, with nothing
   * kept, anywhere else: the caller does it under the locks. Inside a transaction (a transactional
   * step's end where TypeORM commits) the guarded write commits later, with it: a free then goes out
   * only while nobody waits, since the waiters could not be woken before that commit.
   */
  changeSlot(manager: EntityManager, slot: SlotChange): boolean {
    if (!this.unlocked.has(manager) || this.endsOnCommit.has(manager) || this.slots.has(manager)) return false;
    this.slots.set(manager, !slot.take && manager.queryRunner?.isTransactionActive ? { key: slot.key, now: slot.now, take: false } : slot);
    return true;
  }

  /**
   * The guarded write of `manager`'s transaction goes with its COMMIT (a transactional step's end,
   * where the dialect can: HotPathSql.endAndCommit): {@link writeIfUnchanged} keeps it, with its
   * jobs, for {@link takeEnding}, and answers as if written.
   */
  endOnCommit(manager: EntityManager): void {
    this.endsOnCommit.add(manager);
  }

  /**
   * The writes the phase run in `manager`'s transaction has pending when it ends may go with its
   * COMMIT (HotPathSql.writeAndCommit): {@link run} keeps them for {@link takeLastWrites} instead of
   * writing them, when they insert nothing (its jobs need no id from them, and are registered before
   * the COMMIT as always). Whoever commits the transaction must take them.
   */
  writeOnCommit(manager: EntityManager): void {
    this.writesOnCommit.add(manager);
  }

  /** The writes {@link run} kept for the COMMIT of `manager`'s transaction, if any. */
  takeLastWrites(manager: EntityManager): WriteBatch | undefined {
    const batch = this.lastWrites.get(manager);
    this.lastWrites.delete(manager);
    this.writesOnCommit.delete(manager);
    return batch;
  }

  /** The write {@link writeIfUnchanged} kept for the COMMIT of `manager`'s transaction, if any. */
  takeEnding(manager: EntityManager): Ending | undefined {
    const ending = this.endings.get(manager);
    this.endings.delete(manager);
    this.endsOnCommit.delete(manager);
    return ending;
  }

  /** Sends an ending's jobs, once its write has given the new rows their ids (before its COMMIT's events). */
  async sendJobs(manager: EntityManager, jobs: PendingJob[]): Promise<void> {
    for (const job of jobs) await this.send(manager, job);
  }

  /** Gives up the unlocked phase `work` of {@link writeIfUnchanged} runs: it answers false, with nothing written. */
  requireLocks(): never {
    throw new NeedsLocks('The phase needs the row locks');
  }

  /** Throws what makes {@link writeIfUnchanged} give up when its phase tries to read. */
  assertMayRead(manager: EntityManager): void {
    if (this.unlocked.has(manager)) throw new NeedsLocks('A read needs the row locks');
  }

  /**
   * The one job the current phase scheduled, when it is due now and may run inline: it is taken out
   * (never sent). Its row may still be pending: the next read through the store writes it.
   */
  takeDueJob(manager: EntityManager): StepExecution | null {
    const job = this.dueJob(manager);
    if (!job) return null;
    this.jobs.get(manager)!.length = 0;
    return job.execution;
  }

  /** The one job the current phase scheduled, when it is due now and may run inline (see takeDueJob). */
  private dueJob(manager: EntityManager): PendingJob | undefined {
    const jobs = this.jobs.get(manager);
    if (!jobs || jobs.length !== 1) return undefined;
    const [job] = jobs;
    if (job.jobId !== undefined || job.jobOptions.chain === false || job.execution.scheduledFor.getTime() > this.now().getTime()) return undefined;
    return job;
  }

  /** Writes what the phase of `manager` has pending (a no-op outside a phase). */
  async flush(manager: EntityManager): Promise<void> {
    // Every read through the store (and every read beside it) writes what is pending first.
    this.assertMayRead(manager);
    const batch = this.writes.get(manager);
    if (!batch || isEmpty(batch)) return;
    this.writes.set(manager, emptyBatch());
    await this.sql(manager).write(manager, batch);
  }

  /** Writes what the phase has pending and then runs `read`, in one statement where the dialect allows; its rows. */
  async flushThenRead(manager: EntityManager, read: TrailingRead): Promise<Array<Record<string, unknown>>> {
    return this.sql(manager).write(manager, this.takePending(manager), read);
  }

  /** Writes what the phase has pending and inserts `signal` (HotPathSql.writeAndInsertSignal). */
  async flushThenInsertSignal(manager: EntityManager, signal: Signal, withWaiting: boolean): Promise<{ inserted: boolean; waiting: StepExecution[] }> {
    this.assertMayRead(manager);
    return this.sql(manager).writeAndInsertSignal(manager, this.takePending(manager), signal, withWaiting);
  }

  /** The phase's pending writes, handed over to be written by the caller (empty outside a phase). */
  private takePending(manager: EntityManager): WriteBatch {
    const pending = this.writes.get(manager);
    if (pending) this.writes.set(manager, emptyBatch());
    return pending ?? emptyBatch();
  }

  /** The phase's pending writes, or undefined outside a phase. */
  pending(manager: EntityManager): WriteBatch | undefined {
    return this.writes.get(manager);
  }

  /** Queues a write in the phase's batch, or writes it now outside one. */
  async write(manager: EntityManager, add: (batch: WriteBatch) => void): Promise<void> {
    const pending = this.writes.get(manager);
    if (pending) return add(pending);
    const batch = emptyBatch();
    add(batch);
    await this.sql(manager).write(manager, batch);
  }

  /** Holds the job until the phase ends, or sends it now outside one. */
  async enqueue(manager: EntityManager, job: PendingJob): Promise<void> {
    const pending = this.jobs.get(manager);
    if (pending) pending.push(job);
    else await this.send(manager, job);
  }

  private async send(manager: EntityManager, { workflow, execution, jobOptions, jobId }: PendingJob): Promise<void> {
    const job: StepJob = {
      executionId: execution.id,
      hints: { ...jobHints(workflow, execution.stepName), ...jobTraceContext() },
      runAt: execution.scheduledFor,
      jobOptions,
      ...(jobId === undefined ? {} : { jobId }),
    };
    if (!this.enqueueAfterCommit) {
      await this.queue.enqueue(job);
      return;
    }
    await this.afterCommit.register(
      manager,
      async () => {
        await this.queue.enqueue(job, { afterCommit: true });
      },
      workflow.id,
    );
  }
}
