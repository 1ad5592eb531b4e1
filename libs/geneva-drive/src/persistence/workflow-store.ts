import type { EntityManager, QueryRunner } from 'typeorm';
import type { Signal } from '../entities/signal.entity.js';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { WorkflowNotFoundError } from '../errors/workflow-not-found.error.js';
import type { StepJobOptions } from '../workflow/step-options.interface.js';
import type { QueuePort } from '../interfaces/queue.port.js';
import { startsWithoutDecisions, type StepDefinition, type WorkflowDefinition } from '../registry/workflow-definition.js';
import {
  assertExecutionTransition,
  TERMINAL_TIMESTAMP,
  type StepExecutionState,
  type StepOutcome,
} from '../state/step-execution-state.js';
import { assertWorkflowTransition, STOPPED_WORKFLOW_STATES, type WorkflowState } from '../state/workflow-state.js';
import type { AfterCommitSubscriber } from './after-commit.js';
import { lockRow } from './row-lock.js';
import { committedOutside, ownsTransactionEvents } from './transaction-runner.js';
import { PhaseBatch, type DueStart, type JobWorkflow, type Written } from './phase-batch.js';
import { hotPathSqlFor, type HotPathSql, type HotPathSqlOptions } from './sql/index.js';
import type { ChainedStart, ChainedStartAnswer, ExpectedStates, HeroRow, SlotChange, TrailingRead } from './sql/hot-path-sql.js';
import { loadHero } from './hero.js';
import { newExecution, newWorkflow, type NewExecution } from './new-rows.js';
import { openStepTransaction, type StepTransaction } from './step-transaction.js';
import { activeExecution, cancelPreserved, latestExecutedOf } from './step-history.js';
import { KeptRows, type KnownRows } from './kept-rows.js';
import type { SchemaCapabilities } from './schema-capabilities.js';

export { jobHints, type JobWorkflow } from './phase-batch.js';

/**
 * How many jobs' rows are kept for them (the oldest go first: a job that ran elsewhere never takes
 * them). A wake-up's rows hold its signal's payload: at most this many of them, whatever their size.
 */
const KEPT_JOBS = 256;
export type { NewExecution } from './new-rows.js';

/**
 * The scheduling primitives and every write to workflows, executions and signal counters. Each
 * method takes the manager of a transaction that already holds the workflow row lock; the
 * in-memory records are kept in step with what is written.
 *
 * Writes go out at once, or, inside {@link batched}, together when the phase ends (or before its
 * next read through this store): one statement on PostgreSQL, as few as the dialect allows elsewhere.
 * The phase's pending writes and jobs are its {@link PhaseBatch}.
 */
export class WorkflowStore {
  private sqlOf: HotPathSql | undefined;
  private readonly phase: PhaseBatch;
  /** Per transaction, the attachable signals read with a hero (readHero), for the gate that follows (takeReadSignals). */
  private readonly signalsRead = new WeakMap<EntityManager, { workflowId: string; name: string | null; signals: Signal[] }>();
  /** Rows known from the statement that scheduled a job, for its phase 1 in this process (see keepRows). */
  private readonly known = new KeptRows<KnownRows>(KEPT_JOBS);
  /** Per transaction, the parent lockStep locked before a child's step rows (see takeLockedParent). */
  private readonly lockedParents = new WeakMap<EntityManager, { workflow: WorkflowRecord; waiting?: StepExecution[] }>();
  /** Told of the transitions of an execution with a concurrency key (execution/concurrency-slots.ts). */
  private slotTransition: ((manager: EntityManager, execution: StepExecution, from: StepExecutionState, to: StepExecutionState) => Promise<void>) | undefined;
  /** Told of the end of a child or of a parent, in the transaction of that end (execution/child-end.ts). */
  private workflowEnded: ((manager: EntityManager, workflow: WorkflowRecord) => Promise<void>) | undefined;

  constructor(
    queue: QueuePort,
    afterCommit: AfterCommitSubscriber,
    /** Jobs go once their writes have committed (the module's `enqueueAfterCommit`). */
    readonly enqueueAfterCommit: boolean,
    private readonly schema: SchemaCapabilities,
    private readonly sqlOptions: Omit<HotPathSqlOptions, 'sessionTimeouts'>,
    private readonly clock: () => Date = () => new Date(),
  ) {
    this.phase = new PhaseBatch((manager) => this.sql(manager), queue, afterCommit, enqueueAfterCommit, () => this.now());
  }

  now(): Date {
    return this.clock();
  }

  /**
   * A workflow id given by a caller, in canonical form; `WorkflowNotFoundError` when no workflow can
   * have it (`'abc'` for bigint keys), so a malformed id is "not found" on every database.
   */
  workflowId(id: unknown): string {
    const canonical = this.schema.canonicalId(id);
    if (canonical === null) throw new WorkflowNotFoundError(String(id));
    return canonical;
  }

  /** The hot path's SQL, built on first use: after boot detected the schema (key type, signal columns). */
  sql(manager: EntityManager): HotPathSql {
    return (this.sqlOf ??= hotPathSqlFor(manager.connection, { ...this.sqlOptions, sessionTimeouts: this.schema.hasSessionTimeouts }));
  }

  /**
   * Runs `work` with its writes through this store collected, and writes them together when it
   * returns (nothing when it throws: its transaction rolls back). Reads through this store write
   * what is pending first, so the phase always reads its own writes.
   */
  batched<T>(manager: EntityManager, work: () => Promise<T>): Promise<T> {
    return this.phase.run(manager, work);
  }

  /**
   * Runs `work` — decisions made on records read earlier, that write through this store and read
   * nothing — with no transaction, then writes its batch in one statement that takes the workflow
   * and execution row locks and writes only while both rows are still in the `expected` states
   * (PostgreSQL: HotPathSql.writeIfUnchanged); the jobs it scheduled are sent once that has
   * committed. False, with nothing written or sent, when the rows had moved on, when `work` needed a
   * read, or when the dialect cannot write a batch in one statement: the caller then runs the phase
   * under the locks. `manager` must be one of no transaction, or of a transaction whose phase this is
   * (a transactional step's end), used by nothing else meanwhile. `then`, a read that needs the row
   * locks taken first, goes with the write where the dialect can (Written.then); otherwise the caller
   * reads it after.
   */
  async writeIfUnchanged(manager: EntityManager, expected: ExpectedStates, work: () => Promise<void>, then?: TrailingRead | DueStart): Promise<Written | false> {
    if (!this.sql(manager).writesIfUnchanged) return false;
    return this.phase.writeIfUnchanged(manager, expected, work, then);
  }

  /** Whether {@link beginWritingIfUnchanged} may send its message on this runner's transaction. */
  beginsWritingIfUnchanged(runner: QueryRunner): boolean {
    return this.sql(runner.manager).beginsWritingIfUnchanged && ownsTransactionEvents(runner.connection);
  }

  /**
   * Begins the transaction of `manager`, a {@link batched} phase's, with the guarded write of `work`'s
   * batch and the read `then` makes for the due job it scheduled, in one round trip (see
   * PhaseBatch.beginWritingIfUnchanged): where the dialect can, and the engine may begin it itself
   * (ownsTransactionEvents). `'unsent'`: nothing sent, the caller begins it; `'begun'`: begun, the
   * rows had moved on; either way nothing of `work`'s is kept.
   */
  async beginWritingIfUnchanged(
    manager: EntityManager,
    expected: ExpectedStates,
    work: () => Promise<void>,
    then: (due: StepExecution | null) => TrailingRead | undefined,
  ): Promise<Written | 'begun' | 'unsent'> {
    const runner = manager.queryRunner;
    if (!runner || !this.beginsWritingIfUnchanged(runner)) return 'unsent';
    return this.phase.beginWritingIfUnchanged(manager, expected, work, then);
  }

  /**
   * Before a statement of a phase's own that its batch need not precede (a concurrency key's row):
   * in a phase deciding without the row locks, gives it up (see {@link requireLocks}).
   */
  assertLocked(manager: EntityManager): void {
    this.phase.assertMayRead(manager);
  }

  /** Inside the `work` of {@link writeIfUnchanged}: gives it up (it answers false, with nothing written), for the phase to run under the locks. */
  requireLocks(): never {
    return this.phase.requireLocks();
  }

  /** See PhaseBatch.changeSlot: a concurrency key's slot taken or freed with an unlocked phase's guarded write. */
  changeSlot(manager: EntityManager, slot: SlotChange): boolean {
    return this.phase.changeSlot(manager, slot);
  }

  /**
   * The one job the current batched phase scheduled, when it is due now and may run inline: it is
   * taken out (never sent), for the executor to run in this transaction and worker. Its row may
   * still be pending: the next read through this store writes it (and gives it its id).
   */
  takeDueJob(manager: EntityManager): StepExecution | null {
    return this.phase.takeDueJob(manager);
  }

  /** Writes what the phase of `manager` has pending (a no-op outside {@link batched}). */
  flush(manager: EntityManager): Promise<void> {
    return this.phase.flush(manager);
  }

  /**
   * A row update, merged with one already pending for the same row (each row is written once per
   * statement). Every update stamps `updated_at` (now, unless the changes set it).
   */
  async updateRow<T extends { id: string }>(manager: EntityManager, table: 'workflows' | 'executions' | 'signals', id: string, changes: Partial<T>): Promise<void> {
    const codec = this.sql(manager)[table];
    const stamped = { updatedAt: this.now(), ...changes };
    await this.phase.write(manager, (batch) => {
      const pending = batch.updates.find((update) => update.codec === codec && update.id === id);
      if (pending) Object.assign(pending.changes, stamped);
      else batch.updates.push({ codec, id, changes: stamped });
    });
  }

  /** Records a consumption of the signal by an execution of `stepName` (see SignalRendezvous.settle). */
  async consumeSignal(manager: EntityManager, signalId: string, stepName: string): Promise<void> {
    // The consumption reads the signal's row as the statement starts: a change to it still pending goes first.
    if (this.phase.pending(manager)?.updates.some((update) => update.codec === this.sql(manager).signals && update.id === signalId)) await this.flush(manager);
    await this.phase.write(manager, (batch) => batch.consumptions.push({ signalId, stepName, now: this.now() }));
  }

  /**
   * The writes of the phase run in `manager`'s transaction that ends it may go with its COMMIT, where
   * the dialect can send them so: the transaction's `commit` must then be {@link commitWithLastWrites}.
   */
  writeOnCommit(manager: EntityManager): void {
    if (this.sql(manager).commitsWithWrites) this.phase.writeOnCommit(manager);
  }

  /**
   * Commits `runner`'s transaction (TransactionOptions.commit) with the writes its phase kept for the
   * COMMIT ({@link writeOnCommit}): in one round trip where the dialect can, when the engine may
   * commit it itself (ownsTransactionEvents). Otherwise they are written first and `commit` commits
   * (always with `alone` false: its COMMIT carries more, a transactional step's BEGIN).
   */
  async commitWithLastWrites(runner: QueryRunner, commit: (runner: QueryRunner) => Promise<void>, alone = true): Promise<void> {
    const batch = this.phase.takeLastWrites(runner.manager);
    if (!batch) return commit(runner);
    const sql = this.sql(runner.manager);
    if (!alone || !ownsTransactionEvents(runner.connection)) {
      await sql.write(runner.manager, batch);
      return commit(runner);
    }
    await runner.broadcaster.broadcast('BeforeTransactionCommit');
    if (!(await sql.writeAndCommit(runner.manager, batch))) {
      await sql.write(runner.manager, batch);
      await runner.query('COMMIT');
    }
    await committedOutside(runner);
  }

  /**
   * Begins the transaction of `runner` (TransactionOptions.begin) whose work starts with
   * {@link lockStep} for these arguments: where the dialect can, the BEGIN and lockStep's locking read
   * go as one message, and lockStep answers from it. Otherwise, or when TypeORM must begin it
   * (ownsTransactionEvents), TypeORM begins it as any.
   */
  async beginLockingStep(runner: QueryRunner, workflowId: string, executionId: string, parentId?: string): Promise<void> {
    const sql = this.sql(runner.manager);
    const parent = parentId === undefined ? undefined : this.workflowId(parentId);
    if ((parent === undefined || sql.locksParentWithStep) && ownsTransactionEvents(runner.connection) && (await sql.beginLockingStep(runner.manager, this.workflowId(workflowId), executionId, parent))) return;
    Object.assign(runner, { isTransactionActive: false, transactionDepth: 0 });
    await runner.startTransaction();
  }

  /**
   * The workflow and its execution under their row locks, read in one statement (the start of every
   * executor transaction). The execution is null when it is gone or not the workflow's.
   */
  async lockStep(manager: EntityManager, workflowId: string, executionId: string, parentId?: string): Promise<{ workflow: WorkflowRecord; execution: StepExecution | null; signal: Signal | null }> {
    await this.flush(manager);
    this.lockedParents.delete(manager);
    const sql = this.sql(manager);
    const parent = parentId === undefined ? undefined : this.workflowId(parentId);
    // A parent is locked before its child's rows, in the order a parent's cancel locks them: with
    // them where the dialect can, else by a statement of its own first (which lockForSignal would have been).
    if (parent !== undefined && !sql.locksParentWithStep) {
      const locked = await sql.lockForSignal(manager, parent);
      if (locked) this.lockedParents.set(manager, locked);
    }
    const rows = await sql.lockStep(manager, this.workflowId(workflowId), executionId, true, parent);
    if (rows?.parent) this.lockedParents.set(manager, { workflow: rows.parent });
    if (rows) return rows;
    return { workflow: await this.lockWorkflow(manager, workflowId), execution: await this.lockExecution(manager, executionId), signal: null };
  }

  /**
   * The parent `lockStep` locked in this transaction (given `parentId`), as lockForSignal answers,
   * taken once; undefined otherwise. No statement of the transaction writes a parent row while a
   * child's end runs, so it is as the lock found it.
   */
  takeLockedParent(manager: EntityManager, id: string): { workflow: WorkflowRecord; waiting?: StepExecution[] } | undefined {
    const parent = this.lockedParents.get(manager);
    this.lockedParents.delete(manager);
    return parent?.workflow.id === id ? parent : undefined;
  }

  /**
   * The workflow, its execution and the signal it is pinned to as they are now, read without locks in
   * one statement, for a phase that writes with {@link writeIfUnchanged}. Null, with nothing read, for
   * a hero that fixed SQL cannot read (see HotPathSql.heroCodec: such a phase reads it through
   * TypeORM, under the locks); null when a row is gone (the locked read sorts that out).
   */
  async readStep(manager: EntityManager, workflowId: string, executionId: string, heroType: string): Promise<{ workflow: WorkflowRecord; execution: StepExecution; signal: Signal | null } | null> {
    const sql = this.sql(manager);
    if (!sql.heroCodec(heroType)) return null;
    return sql.lockStep(manager, this.workflowId(workflowId), executionId, false);
  }

  /**
   * Keeps copies of a job's rows as a committed statement left them (KnownRows), for its phase 1
   * should it start in this process ({@link takeRows}): only for a step that phase may start without
   * a transaction (no decision before its body; a `waitFor` step once woken with its signal), and
   * whose rows' versions that statement answered (HotPathSql.rowVersion).
   */
  keepRows(manager: EntityManager, jobId: string, rows: Omit<KnownRows, 'versions'>, definition: WorkflowDefinition, step: StepDefinition): void {
    if (!startsWithoutDecisions(definition, step) || (step.waitFor && rows.execution.signalId == null)) return;
    const sql = this.sql(manager);
    const workflow = sql.rowVersion(rows.workflow);
    const execution = sql.rowVersion(rows.execution);
    if (workflow === undefined || execution === undefined) return;
    const signal = rows.signal && Object.assign(sql.signals.asRead(rows.signal), { payload: structuredClone(rows.signal.payload) });
    this.known.keep(jobId, { workflow: sql.workflows.asRead(rows.workflow), execution: sql.executions.asRead(rows.execution), signal, versions: { workflow, execution } });
  }

  /** The rows {@link keepRows} kept for this job, taken once; undefined for any other job, or one pushed out by later ones. */
  takeRows(jobId: string | undefined): KnownRows | undefined {
    return jobId === undefined ? undefined : this.known.take(jobId);
  }

  /** Whether the dialect writes a phase in one statement that checks the rows (see writeIfUnchanged). */
  writesIfUnchanged(manager: EntityManager): boolean {
    return this.sql(manager).writesIfUnchanged;
  }

  /** Whether the dialect starts a chained step in its predecessor's outcome message (HotPathSql.startsChainedSteps). */
  startsChainedSteps(manager: EntityManager): boolean {
    return this.sql(manager).startsChainedSteps;
  }

  /** A chained step's start as one statement (HotPathSql.chainedStart); undefined where the dialect or the schema (a gate without the signals migration) cannot. */
  chainedStart(manager: EntityManager, start: ChainedStart): TrailingRead | undefined {
    if (start.gate && !this.schema.hasSignals) return undefined;
    return this.sql(manager).chainedStart(start);
  }

  /** What {@link chainedStart}'s statement answered. */
  chainedStartFrom(manager: EntityManager, start: ChainedStart, rows: Array<Record<string, unknown>>): ChainedStartAnswer {
    return this.sql(manager).chainedStartFrom(start, rows);
  }

  /**
   * The read of the workflow's hero by fixed SQL, to go with a guarded write ({@link writeIfUnchanged}'s
   * `then`), and the hero its rows hold; undefined for an entity that fixed SQL cannot read.
   */
  heroRead(
    manager: EntityManager,
    heroType: string,
    heroId: string,
    signals?: { workflowId: string; name: string | null },
  ): { read: TrailingRead; hero(rows: Array<Record<string, unknown>>): object | null } | undefined {
    const sql = this.sql(manager);
    const codec = sql.heroCodec(heroType);
    if (!codec) return undefined;
    if (!signals || !this.schema.hasSignals) return { read: sql.heroRead(codec, heroId), hero: (rows) => sql.heroFrom(codec, rows) };
    // With a gate's attachable signals, kept for takeReadSignals: a statement run under the workflow's lock.
    return {
      read: sql.heroAndSignalsRead(codec, heroId, signals.workflowId, signals.name),
      hero: (rows) => {
        const read = sql.heroAndSignalsFrom(codec, rows);
        this.signalsRead.set(manager, { ...signals, signals: read.signals });
        return read.hero;
      },
    };
  }

  /**
   * The workflow's hero, or null when its row is gone. Read by fixed SQL with the phase's pending
   * writes (one statement on PostgreSQL), or through TypeORM for an entity that needs it.
   */
  async readHero(manager: EntityManager, heroType: string, heroId: string, signals?: { workflowId: string; name: string | null }): Promise<object | null> {
    this.phase.assertMayRead(manager);
    const sql = this.sql(manager);
    const codec = sql.heroCodec(heroType);
    if (!codec) {
      await this.flush(manager);
      return loadHero(manager, heroType, heroId);
    }
    this.signalsRead.delete(manager);
    // The read sees the rows as they were before the writes it trails: not when those write signals (a consumption).
    const pending = this.phase.pending(manager);
    const writesSignals = pending !== undefined && (pending.consumptions.length > 0 || [...pending.updates, ...pending.inserts].some((write) => write.codec === sql.signals));
    if (signals && sql.readsSignalsWithHero && this.schema.hasSignals && !writesSignals) {
      const read = sql.heroAndSignalsFrom(codec, await this.phase.flushThenRead(manager, sql.heroAndSignalsRead(codec, heroId, signals.workflowId, signals.name)));
      this.signalsRead.set(manager, { ...signals, signals: read.signals });
      return read.hero;
    }
    const rows = await this.phase.flushThenRead(manager, sql.heroRead(codec, heroId));
    return sql.heroFrom(codec, rows);
  }

  /**
   * The attachable signals {@link readHero} read with the hero in this transaction (`signals`), taken
   * once; undefined for another workflow or name, or when none were read. Signals are written only
   * under the workflow's lock, which the transaction holds: they are still as read.
   */
  takeReadSignals(manager: EntityManager, workflowId: string, name: string | null): Signal[] | undefined {
    const read = this.signalsRead.get(manager);
    this.signalsRead.delete(manager);
    return read && read.workflowId === workflowId && read.name === name ? read.signals : undefined;
  }

  /** Drops the signals {@link readHero} read for a gate the phase did not reach (a pinned or timed-out step). */
  forgetReadSignals(manager: EntityManager): void {
    this.signalsRead.delete(manager);
  }

  /** How a transactional step's transaction begins and commits, and how its body gets the hero (step-transaction.ts). */
  stepTransaction(manager: EntityManager, timeoutMs: number, hero?: { type: string; id: string }): StepTransaction {
    return openStepTransaction(this.sql(manager), this.phase, (inTransaction, type, id) => this.readHero(inTransaction, type, id), timeoutMs, hero);
  }

  /** `signal()`'s lock: the workflow, and its parked executions where the dialect reads them with it (see HotPathSql.lockForSignal). */
  async lockForSignal(manager: EntityManager, id: string): Promise<{ workflow: WorkflowRecord; waiting?: StepExecution[] }> {
    await this.flush(manager);
    const locked = await this.sql(manager).lockForSignal(manager, this.workflowId(id));
    if (!locked) throw new WorkflowNotFoundError(id);
    return locked;
  }

  /**
   * Inserts a signal as HotPathSql.insertSignal does, with the phase's pending writes (in one
   * statement on PostgreSQL); those must not touch the signal's workflow: its parked executions are
   * read as they were before them.
   */
  insertSignal(manager: EntityManager, signal: Signal, withWaiting: boolean): Promise<{ inserted: boolean; waiting: StepExecution[] }> {
    return this.phase.flushThenInsertSignal(manager, signal, withWaiting);
  }

  async lockWorkflow(manager: EntityManager, id: string): Promise<WorkflowRecord> {
    await this.flush(manager);
    const workflow = await this.sql(manager).lockWorkflow(manager, this.workflowId(id));
    if (!workflow) throw new WorkflowNotFoundError(id);
    return workflow;
  }

  async lockExecution(manager: EntityManager, id: string): Promise<StepExecution | null> {
    await this.flush(manager);
    return lockRow(manager, StepExecution, id);
  }

  async insertWorkflow(manager: EntityManager, values: Pick<WorkflowRecord, 'type' | 'heroType' | 'heroId' | 'allowMultiple'>): Promise<WorkflowRecord> {
    const workflow = newWorkflow(manager, this.schema, this.now(), values, null);
    await manager.insert(WorkflowRecord, workflow);
    workflow.id = String(workflow.id);
    return workflow;
  }

  /** Moves the workflow through its state machine, stamping the lifecycle timestamps, plus `patch`. */
  async transitionWorkflow(manager: EntityManager, workflow: WorkflowRecord, to: WorkflowState, patch: Partial<WorkflowRecord> = {}): Promise<void> {
    await this.updateWorkflow(manager, workflow, this.transitionChanges(workflow, to, patch));
  }

  /** The column changes of a workflow transition (validated), for callers that write them with other changes. */
  transitionChanges(workflow: WorkflowRecord, to: WorkflowState, patch: Partial<WorkflowRecord> = {}): Partial<WorkflowRecord> {
    assertWorkflowTransition(workflow.state, to);
    const now = this.now();
    const changes: Partial<WorkflowRecord> = { ...patch };
    if (workflow.state !== to) {
      changes.state = to;
      if (STOPPED_WORKFLOW_STATES.includes(to)) changes.transitionedAt = now;
      if (to === 'finished' || to === 'canceled') changes.finishedAt = now;
      if (workflow.state === 'paused' && to === 'ready') changes.transitionedAt = null;
      if (to === 'performing' && workflow.startedAt === null) changes.startedAt = now;
    }
    return changes;
  }

  async updateWorkflow(manager: EntityManager, workflow: WorkflowRecord, changes: Partial<WorkflowRecord>): Promise<void> {
    if (Object.keys(changes).length === 0) return;
    changes.updatedAt = this.now();
    await this.updateRow<WorkflowRecord>(manager, 'workflows', workflow.id, changes);
    Object.assign(workflow, changes);
    // Every end of a workflow comes through here. Decided in memory: a workflow that is neither a
    // child nor a parent costs no statement.
    const ended = changes.state === 'finished' || changes.state === 'canceled';
    if (ended && this.workflowEnded && (workflow.parentId || workflow.hasChildren)) await this.workflowEnded(manager, workflow);
  }

  /** Sets what is told of each end (finished or canceled) of a child or a parent, in its transaction. */
  onWorkflowEnd(listener: (manager: EntityManager, workflow: WorkflowRecord) => Promise<void>): void {
    this.workflowEnded = listener;
  }

  /** Moves an execution through its state machine; terminal states stamp their timestamp and `finishedAt`. */
  async transitionExecution(
    manager: EntityManager,
    execution: StepExecution,
    to: StepExecutionState,
    outcome: StepOutcome | null,
    patch: Partial<StepExecution> = {},
  ): Promise<void> {
    const from = execution.state;
    assertExecutionTransition(from, to);
    const now = this.now();
    const changes: Partial<StepExecution> = { ...patch, state: to, outcome, updatedAt: now };
    // A start a rate window counted keeps the time it counted.
    if (to === 'in_progress') changes.startedAt = patch.startedAt ?? now;
    if (to in TERMINAL_TIMESTAMP) {
      changes[TERMINAL_TIMESTAMP[to as keyof typeof TERMINAL_TIMESTAMP]] = now;
      changes.finishedAt = now;
    }
    await this.updateRow<StepExecution>(manager, 'executions', execution.id, changes);
    Object.assign(execution, changes);
    // A holder of a concurrency key leaving `in_progress`, or a waiter for one ending: decided in
    // memory, no statement for an execution without a key.
    if (execution.flowKey && this.slotTransition && (from === 'in_progress' || (from === 'scheduled' && to !== 'in_progress'))) {
      await this.slotTransition(manager, execution, from, to);
    }
  }

  /** Sets what is told of each transition of an execution holding or waiting for a concurrency key, in its transaction. */
  onSlotTransition(listener: (manager: EntityManager, execution: StepExecution, from: StepExecutionState, to: StepExecutionState) => Promise<void>): void {
    this.slotTransition = listener;
  }

  /** The workflow's active execution (scheduled, waiting or in progress), if any. */
  async currentExecution(manager: EntityManager, workflowId: string): Promise<StepExecution | null> {
    await this.flush(manager);
    return activeExecution(manager, workflowId);
  }

  /**
   * Cancels a preserved `scheduled`/`waiting` execution that a new one replaces (after an operator
   * skip of a paused workflow, or a test helper running a step out of order).
   */
  async supersedeActive(manager: EntityManager, workflowId: string): Promise<void> {
    await this.flush(manager);
    await cancelPreserved(manager, workflowId, this.now());
  }

  /**
   * Inserts a `scheduled` execution of the step and points `nextStepName` at it, in one UPDATE with
   * `workflowChanges`. Its job is enqueued after the outermost commit.
   */
  async createExecution(
    manager: EntityManager,
    workflow: WorkflowRecord,
    definition: WorkflowDefinition | undefined,
    stepName: string,
    options: NewExecution = {},
    workflowChanges: Partial<WorkflowRecord> = {},
  ): Promise<StepExecution> {
    const execution = await this.insertExecution(manager, workflow.id, stepName, options);
    const changes = workflow.nextStepName === stepName ? workflowChanges : { ...workflowChanges, nextStepName: stepName };
    await this.updateWorkflow(manager, workflow, changes);
    await this.enqueue(manager, workflow, execution, jobOptionsFor(definition, definition?.step(stepName)));
    return execution;
  }

  /**
   * `start()`'s writes: the workflow, `ready` with `nextStepName` at its first step, and that step's
   * execution, whose job is enqueued after the outermost commit (at once without a transaction: the
   * writes are one statement on PostgreSQL). Null, with nothing written, when the hero row is gone.
   */
  async startWorkflow(
    manager: EntityManager,
    values: Pick<WorkflowRecord, 'type' | 'heroType' | 'heroId' | 'allowMultiple'>,
    definition: WorkflowDefinition,
    first: StepDefinition,
    hero: HeroRow,
  ): Promise<WorkflowRecord | null> {
    const workflow = newWorkflow(manager, this.schema, this.now(), values, first.name);
    const execution = newExecution(manager, this.schema, this.now(), workflow.id, first.name, { waitMs: first.waitMs });
    if (!(await this.sql(manager).insertStart(manager, workflow, execution, hero))) return null;
    // Committed by that one statement (no transaction): its rows are as written, until the next write.
    if (manager.queryRunner === undefined && this.sql(manager).writesIfUnchanged) this.keepRows(manager, execution.id, { workflow, execution, signal: null }, definition, first);
    await this.enqueue(manager, workflow, execution, jobOptionsFor(definition, first));
    return workflow;
  }

  /** Inserts a `scheduled` execution, nothing else (no pointer update, no job). */
  async insertExecution(manager: EntityManager, workflowId: string, stepName: string, options: NewExecution = {}): Promise<StepExecution> {
    const execution = newExecution(manager, this.schema, this.now(), workflowId, stepName, options);
    const codec = this.sql(manager).executions;
    await this.phase.write(manager, (batch) => batch.inserts.push({ codec, row: execution, inserted: (id) => (execution.id = id) }));
    return execution;
  }

  /**
   * Enqueues the execution's job after the outermost commit (or at once when configured so). `jobId`
   * replaces the execution id as the job's identity in the queue (see StepJob.jobId).
   */
  async enqueue(
    manager: EntityManager,
    workflow: JobWorkflow,
    execution: StepExecution,
    jobOptions: StepJobOptions,
    jobId?: string,
  ): Promise<void> {
    await this.phase.enqueue(manager, { workflow, execution, jobOptions, jobId });
  }

  /**
   * Advances past the reference step (default `currentStepName ?? nextStepName`): schedules the step after
   * it with that step's own `wait` (or `waitMs`), or finishes the workflow when there is none.
   * A reference the definition no longer has is placed by the history (WorkflowDefinition.stepAfter).
   * The workflow moves to `ready` (or `finished`) with `patch` in the same UPDATE.
   */
  async scheduleNextStep(
    manager: EntityManager,
    workflow: WorkflowRecord,
    definition: WorkflowDefinition | undefined,
    patch: Partial<WorkflowRecord> = {},
    reference: string | null = workflow.currentStepName ?? workflow.nextStepName,
  ): Promise<StepExecution | null> {
    const next = await definition?.stepAfter(reference, (stepNames) => this.latestExecutedOf(manager, workflow.id, stepNames));
    if (!next) {
      await this.transitionWorkflow(manager, workflow, 'finished', { ...patch, currentStepName: null, nextStepName: null });
      return null;
    }
    return this.createExecution(manager, workflow, definition, next.name, { waitMs: next.waitMs }, this.transitionChanges(workflow, 'ready', patch));
  }

  /** The step of the workflow's most recent execution among `stepNames`, or null. */
  private async latestExecutedOf(manager: EntityManager, workflowId: string, stepNames: readonly string[]): Promise<string | null> {
    await this.flush(manager);
    return latestExecutedOf(manager, workflowId, stepNames);
  }

  /** Schedules the reference step again (reattempts, resume, recovery); the step's own `wait` does not apply. */
  async rescheduleCurrentStep(
    manager: EntityManager,
    workflow: WorkflowRecord,
    definition: WorkflowDefinition | undefined,
    options: NewExecution = {},
    patch: Partial<WorkflowRecord> = {},
  ): Promise<StepExecution> {
    const stepName = workflow.currentStepName ?? workflow.nextStepName;
    if (stepName === null) throw new Error(`Workflow ${workflow.id} has no step to reschedule`);
    return this.createExecution(manager, workflow, definition, stepName, options, this.transitionChanges(workflow, 'ready', patch));
  }
}

export function jobOptionsFor(definition: WorkflowDefinition | undefined, step: StepDefinition | undefined): StepJobOptions {
  return { ...(definition?.jobOptions ?? {}), ...(step?.jobOptions ?? {}) };
}

/**
 * Whether an execution that runs `execution`'s step again runs timed out, as that one did or was
 * to: its wait timed out and the step's `onTimeout` is `'run'` (with `'pause'`, resume waits again).
 */
export function rerunsTimedOut(step: StepDefinition | undefined, execution: Pick<StepExecution, 'metadata'> | null): boolean {
  return execution?.metadata?.timedOut === true && (step?.onTimeout ?? 'run') === 'run';
}

/** A successor continuing `execution`'s chain: same step, its persisted cursor and its signal pin. */
export function successorOf(execution: StepExecution, waitMs: number | undefined): NewExecution {
  return { waitMs, cursor: execution.cursor, signalId: execution.signalId, continuesFromId: execution.id };
}

/** The id of a workflow given as its record or as its id. */
export function idOf(workflow: WorkflowRecord | string): string {
  return typeof workflow === 'object' && workflow !== null ? workflow.id : workflow;
}

