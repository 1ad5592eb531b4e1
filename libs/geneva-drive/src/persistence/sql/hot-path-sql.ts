// The hot path's SQL shared by every dialect, kept whole (over 400 lines): each statement here is one
// half of a pair whose other half is a dialect hook below it, and the bench counts them together;
// split by statement, a reader would lose the one place that shows everything a step sends.
import { QueryFailedError, QueryRunnerProviderAlreadyReleasedError, type DataSource, type EntityManager, type ObjectLiteral, type QueryRunner } from 'typeorm';
import { Signal } from '../../entities/signal.entity.js';
import { StepExecution } from '../../entities/step-execution.entity.js';
import { WorkflowRecord } from '../../entities/workflow.entity.js';
import { ACTIVE_EXECUTION_STATES } from '../../state/step-execution-state.js';
import { EntityCodec } from './entity-codec.js';
import { CLAIMED, CONSUMED } from '../../state/signal-state.js';
import type { FlowKeyRow } from '../flow-keys.js';

/** A row update of the batch: the changed properties of one row. */
export interface RowUpdate<T extends ObjectLiteral = ObjectLiteral> {
  codec: EntityCodec<T>;
  id: string;
  changes: Partial<T>;
}

/** A row insert of the batch; `inserted` receives the id the database gave it (bigint keys). */
export interface RowInsert<T extends ObjectLiteral = ObjectLiteral> {
  codec: EntityCodec<T>;
  row: T;
  inserted(id: string): void;
}

/** A consumption of a signal by an execution of `stepName` that resolved cleanly (see SignalRendezvous). */
export interface SignalConsumption {
  signalId: string;
  stepName: string;
  now: Date;
}

/** The writes of one transaction phase, flushed together before the phase's reads or its COMMIT. */
export interface WriteBatch {
  updates: RowUpdate[];
  inserts: RowInsert[];
  consumptions: SignalConsumption[];
}

/** A workflow row's and an execution row's versions, as HotPathSql.rowVersion names them. */
export interface RowVersions {
  workflow: string;
  execution: string;
}

/** The states a phase's decisions were made in: its writes may go out only while the rows are still in them. */
export interface ExpectedStates {
  workflowId: string;
  workflowState: string;
  executionId: string;
  executionState: string;
  /**
   * The rows' versions (HotPathSql.rowVersion) when the phase knows the rows from the write that
   * left them rather than from a read (WorkflowStore.takeRows): the writes go out only while neither
   * row has been written since, whatever its state and whatever its `updated_at` says (a clock's
   * reading: two writes may stamp the same millisecond).
   */
  versions?: RowVersions;
  /** A concurrency key's slot taken or freed with the writes, which go out only if it could be (PhaseBatch.changeSlot). */
  slot?: SlotChange;
}

/**
 * A slot of a concurrency key, taken (`take`: while fewer than `limit` hold it and nobody waits, the
 * key's row created if new) or freed: with `freed`, whoever waits, `freed` then given the key's row
 * as the write left it once it has committed (the waiters it admits are woken after it); without,
 * only while nobody waits (a waiter to wake needs the row locks).
 */
export type SlotChange = { key: string; now: Date } & ({ take: true; limit: number } | { take: false; freed?(row: FlowKeyRow): Promise<void> });

/** What a guarded write ({@link HotPathSql.writeIfUnchanged}) that went out answers: the key's row its freed slot left, if it freed one. */
export interface GuardedWrite {
  freedSlot?: FlowKeyRow;
  /** The rows of the read that went after the write, in its round trip (see HotPathSql.writeIfUnchanged); absent when it did not go. */
  then?: Array<Record<string, unknown>>;
}

/** A signal to deliver in one message (HotPathSql.deliverSignal): its row, its id given, as `signal()` would insert it. */
export interface SignalDelivery {
  signal: Signal;
  /** The classes whose workflows take the signal by its name alone, each with the steps it wakes there. */
  routes: ReadonlyMap<string, readonly string[]>;
}

/** What a delivery in one message did. */
export interface DeliveredSignal {
  /** Its row as the message left it. */
  workflow: WorkflowRecord;
  /** The stored row: the one sent, or the earlier delivery of its idempotency key. */
  signal: Signal;
  duplicate: boolean;
  /** The parked executions it woke, as written (`scheduled`, pinned, with their wake-up's job id). */
  woken: StepExecution[];
}

/** A read that rides on the statement of a batch's writes (PostgreSQL) or follows it. */
export interface TrailingRead {
  /** The SELECT, its parameters bound through `bind`. */
  sql(bind: (value: unknown) => string): string;
}

/**
 * A chained step's phase 1 as one statement decides it ({@link HotPathSql.chainedStart}), with what
 * Node decided beforehand: the step's and the workflow's changes once it starts.
 */
export interface ChainedStart {
  workflowId: string;
  /** The step the predecessor's outcome scheduled, due now. */
  stepName: string;
  hero: { codec: EntityCodec<ObjectLiteral>; id: string };
  /** The step's changes when it starts (`in_progress`), and the workflow's (`performing`). */
  started: Partial<StepExecution>;
  workflow: Partial<WorkflowRecord>;
  /** A gate that waits for a signal by name alone: the name, the step's changes when it parks, the time of a claim. */
  gate?: { name: string; parked: Partial<StepExecution>; now: Date };
}

/** What {@link HotPathSql.chainedStart}'s statement did: the step's state as it left it (null: not started, no hero), the hero, the signal it claimed. */
export interface ChainedStartAnswer {
  state: 'in_progress' | 'waiting' | null;
  hero: object | null;
  signal: Signal | null;
}

/**
 * The condition that `alias` is the workflow's current execution and in `state`. The active states
 * are named besides, to weigh PostgreSQL's plan towards its one-active unique index on the workflow:
 * on the state alone, with no statistics of the table (a new one, a burst before autovacuum), an
 * index that begins with the state costs the same and may be taken, and other workflows' rows fill
 * it (2,000 parked: each read scanned them all). The list costs such an index a descent per state,
 * and nothing on the one-active index, whose predicate it is.
 */
export function currentExecutionIn(e: EntityCodec<StepExecution>, alias: string, state: (typeof ACTIVE_EXECUTION_STATES)[number]): string {
  const column = `${alias}.${e.column('state')}`;
  return `${column} IN (${ACTIVE_EXECUTION_STATES.map((active) => `'${active}'`).join(', ')}) AND ${column} = '${state}'`;
}

/** The hero row a new workflow needs: inserted only if `SELECT 1 FROM table WHERE column = value` finds it. */
export interface HeroRow {
  table: string;
  column: string;
  value: unknown;
  /** A soft-deleted hero (a `@DeleteDateColumn` set) is no hero. */
  deletedColumn?: string;
}

/** HotPathSql.sessionBounds: a transactional step's time bounds, set with its BEGIN and lifted with its COMMIT. */
export interface SessionBounds {
  /** Autocommit off, and the bounds: the transaction begins with the next statement. */
  begin: string;
  /** The bounds alone, in a transaction begun by START TRANSACTION. */
  set: string;
  /** Autocommit on, which commits after `begin` (not after START TRANSACTION), and the bounds lifted. */
  end: string;
}

/** A statement and its parameters. */
export interface Statement {
  sql: string;
  params: unknown[];
}

/**
 * The hot path's fixed SQL, one implementation per dialect (postgres.ts, mysql.ts, sqlite.ts): the
 * locking read that opens every executor transaction, and the writes of a phase in as few round
 * trips as the dialect allows. Everything runs through the transaction's `EntityManager`, so a
 * caller's transaction still co-commits and the after-commit hooks still fire.
 */
export abstract class HotPathSql {
  readonly workflows: EntityCodec<WorkflowRecord>;
  readonly executions: EntityCodec<StepExecution>;
  readonly signals: EntityCodec<Signal>;
  private readonly lockSql = new Map<string, string>();
  private lockWorkflowSql: string | undefined;
  private readonly heroCodecs = new Map<string, EntityCodec<ObjectLiteral> | null>();

  constructor(protected readonly dataSource: DataSource) {
    this.workflows = new EntityCodec(dataSource, WorkflowRecord);
    this.executions = new EntityCodec(dataSource, StepExecution);
    this.signals = new EntityCodec(dataSource, Signal);
  }

  /** The placeholder of the `index`-th (1-based) parameter. */
  protected abstract placeholder(index: number): string;

  /**
   * Takes the rows' locks (PostgreSQL and MySQL: FOR UPDATE; SQLite: none, the write lock is held).
   * `of` names the tables to lock where a read also joins rows it must not lock (PostgreSQL).
   */
  protected abstract lockClause(of?: string): string;

  /** The join of the locking read (MySQL reads the workflow first, in the order every writer locks). */
  protected join(): string {
    return 'JOIN';
  }

  /**
   * Runs the batch: one statement per write unless the dialect can merge them. `then`, a read, runs
   * after the writes — in their statement where the dialect allows — and its rows are returned.
   */
  abstract write(manager: EntityManager, batch: WriteBatch, then?: TrailingRead): Promise<Array<Record<string, unknown>>>;

  /**
   * Runs the batch in one statement that first takes the workflow and execution row locks and
   * writes only while both rows are still in the `expected` states: what it wrote, or null (nothing
   * written) when they had moved on. Only where {@link writesIfUnchanged}: MySQL and SQLite write a
   * batch in several statements, which only a transaction holding the locks makes atomic. `then`, a
   * read that needs the locks taken first (it sees every commit made under them), goes after the
   * write in the same round trip where the dialect can (GuardedWrite.then); the caller reads
   * it itself when it did not go.
   */
  async writeIfUnchanged(_manager: EntityManager, _batch: WriteBatch, _expected: ExpectedStates, _then?: TrailingRead): Promise<GuardedWrite | null> {
    throw new Error(`${this.constructor.name} cannot write a batch in one statement`);
  }

  /** Whether {@link writeIfUnchanged} is available (PostgreSQL). */
  readonly writesIfUnchanged: boolean = false;

  /**
   * Begins `manager`'s transaction (its runner counted as in one already: TransactionOptions.begin)
   * with {@link writeIfUnchanged}'s guarded write as its first statement and `then` after it, in one
   * round trip: the write's row locks are then held to the transaction's end, and `then`, a statement
   * of its own, sees every commit made under them. Null when the rows had moved on (nothing written,
   * the transaction open); undefined, with nothing sent, where the dialect cannot.
   */
  async beginWritingIfUnchanged(_manager: EntityManager, _batch: WriteBatch, _expected: ExpectedStates, _then?: TrailingRead): Promise<GuardedWrite | null | undefined> {
    return undefined;
  }

  /** Whether {@link beginWritingIfUnchanged} can send its message (PostgreSQL, with prepared statements). */
  get beginsWritingIfUnchanged(): boolean {
    return false;
  }

  /** The versions of rows as the statements that wrote them answered, where the dialect names one (see rowVersion). */
  protected readonly versions = new WeakMap<object, string>();

  /**
   * The version of a row as the statement that wrote it left it (start()'s insert, a signal's
   * message), where the dialect names one (PostgreSQL: the writing transaction and the tuple, which
   * no two writes share); undefined otherwise. What ExpectedStates.versions compares.
   */
  rowVersion(row: object): string | undefined {
    return this.versions.get(row);
  }

  /**
   * A transactional step's end (the guarded write of {@link writeIfUnchanged}) and its COMMIT in
   * one round trip: 'committed'; 'written' when only the write went (COMMIT is the caller's);
   * 'refused' when the rows had moved on (nothing written, the transaction rolled back).
   * PostgreSQL's (see there).
   */
  async endAndCommit(_runner: QueryRunner, _batch: WriteBatch, _expected: ExpectedStates): Promise<'committed' | 'written' | 'refused'> {
    throw new Error(`${this.constructor.name} cannot end a step with its COMMIT`);
  }

  /**
   * The statement that runs a chained step's phase 1 after its predecessor's guarded write, in its
   * message ({@link writeIfUnchanged}'s `then`); undefined where the dialect cannot (PostgreSQL's,
   * with prepared statements: see postgres-chained-start.ts).
   */
  chainedStart(_start: ChainedStart): TrailingRead | undefined {
    return undefined;
  }

  /** Whether {@link chainedStart} gives a statement here. */
  get startsChainedSteps(): boolean {
    return false;
  }

  /** What {@link chainedStart}'s statement answered. */
  chainedStartFrom(start: ChainedStart, rows: Array<Record<string, unknown>>): ChainedStartAnswer {
    const [row] = rows;
    const state = row?.started === 'in_progress' || row?.started === 'waiting' ? row.started : null;
    return { state, hero: this.heroFrom(start.hero.codec, rows), signal: state === 'in_progress' && row.s_id != null ? this.signals.fromRow(row, 's') : null };
  }

  /** The codec of a hero entity read by fixed SQL, or null when it must be read through TypeORM (see EntityCodec.isPlain). */
  heroCodec(heroType: string): EntityCodec<ObjectLiteral> | null {
    let codec = this.heroCodecs.get(heroType);
    if (codec === undefined) {
      const known = this.dataSource.hasMetadata(heroType);
      codec = known && EntityCodec.isPlain(this.dataSource, heroType) ? new EntityCodec(this.dataSource, heroType) : null;
      this.heroCodecs.set(heroType, codec);
    }
    return codec;
  }

  /** `SELECT <hero> FROM <hero table> h WHERE <key> = ...` (soft-deleted rows excluded, as findOne does). */
  heroRead(codec: EntityCodec<ObjectLiteral>, heroId: string): TrailingRead {
    return { sql: (bind) => `SELECT ${codec.selectList('h')} FROM ${codec.table} h WHERE ${this.heroMatch(codec, bind(codec.param(codec.primaryKey, heroId)))}` };
  }

  /**
   * Begins a transactional step's transaction with its time bounds and `read` in one round trip, and
   * answers the read's rows; null where the dialect has no such BEGIN (the transaction then begins as
   * any, and the hero is read in it). With `begin` false, the bounds and the read alone, in a
   * transaction TypeORM began. PostgreSQL's (see there).
   */
  async beginStep(_manager: EntityManager, _timeoutMs: number, _read?: TrailingRead, _begin = true): Promise<Array<Record<string, unknown>> | null> {
    return null;
  }

  /**
   * COMMIT of the manager's transaction and {@link beginStep}'s BEGIN on the same connection, in one
   * round trip (a step chained into a transactional step); where {@link beginsSteps}. Null when only
   * the COMMIT went through (what followed it failed and was rolled back: no transaction is open).
   */
  async commitAndBeginStep(_manager: EntityManager, _timeoutMs: number, _read?: TrailingRead): Promise<Array<Record<string, unknown>> | null> {
    throw new Error(`${this.constructor.name} cannot commit and begin in one message`);
  }

  /** Whether a transactional step's transaction begins and ends with messages of the dialect's own: {@link beginStep}, {@link commitAndBeginStep}, {@link endAndCommit} (PostgreSQL). */
  readonly beginsSteps: boolean = false;

  /**
   * Where the server bounds a session's statements and its idle time in a transaction (MariaDB): the
   * statement that turns autocommit off with a transactional step's bounds (the transaction then
   * begins with its first statement, as after START TRANSACTION) and the one that turns it back on and
   * lifts them, which commits what is open. Null elsewhere (PostgreSQL's bounds ride on its BEGIN:
   * {@link beginStep}).
   */
  sessionBounds(_timeoutMs: number): SessionBounds | null {
    return null;
  }

  /** Whether `value` (a bound parameter) can ride on {@link beginStep}'s read. */
  inlines(_value: unknown): boolean {
    return false;
  }

  /**
   * Whether a read of the hero that trails a phase's writes may read the workflow's attachable signals
   * with it ({@link heroAndSignalsRead}): where the writes and the read are one statement, taken
   * under the row locks a statement of the transaction took before (PostgreSQL).
   */
  readonly readsSignalsWithHero: boolean = false;

  /**
   * {@link heroRead} and {@link attachableSignals} as one read: a row per signal (one with none), the
   * signals' position in their order (oldest first) beside them, the hero's columns on the first
   * row only (a large hero is not repeated for each buffered signal).
   */
  heroAndSignalsRead(codec: EntityCodec<ObjectLiteral>, heroId: string, workflowId: string, name: string | null): TrailingRead {
    const s = this.signals;
    return {
      sql: (bind) => {
        const hero = this.heroRead(codec, heroId).sql(bind);
        const signals = `SELECT ${s.selectList('s')}, row_number() OVER (ORDER BY ${this.signalOrder}) AS s_position FROM ${s.table} s WHERE ${this.attachable(bind, workflowId, name)}`;
        return `SELECT h.*, s.* FROM (SELECT 1) AS o LEFT JOIN (${signals}) AS s ON true LEFT JOIN (${hero}) AS h ON s.s_position IS NULL OR s.s_position = 1`;
      },
    };
  }

  /** What {@link heroAndSignalsRead} answered: the hero (null when gone) and the signals, oldest first. */
  heroAndSignalsFrom(codec: EntityCodec<ObjectLiteral>, rows: Array<Record<string, unknown>>): { hero: object | null; signals: Signal[] } {
    const signals = rows
      .filter((row) => row.s_id != null)
      .sort((a, b) => Number(a.s_position) - Number(b.s_position))
      .map((row) => this.signals.fromRow(row, 's'));
    const first = rows.find((row) => row.s_position == null || Number(row.s_position) === 1);
    return { hero: first ? this.heroFrom(codec, [first]) : null, signals };
  }

  /** The hero an `heroRead` row holds, or null for no row. */
  heroFrom(codec: EntityCodec<ObjectLiteral>, rows: Array<Record<string, unknown>>): object | null {
    const row = rows[0];
    return row && row[`h_${codec.primaryKey}`] != null ? codec.fromRow(row, 'h') : null;
  }

  protected heroMatch(codec: EntityCodec<ObjectLiteral>, key: string): string {
    const deleted = codec.deleteDateProperty;
    return `h.${codec.column(codec.primaryKey)} = ${key}${deleted ? ` AND h.${codec.column(deleted)} IS NULL` : ''}`;
  }

  /** Makes sure `manager`'s transaction holds what `lockStep` relies on (SQLite: the write lock). */
  protected async beforeLock(_manager: EntityManager, _workflowId: string): Promise<void> {}

  /**
   * Reads the workflow and its execution under their row locks (without them, `locked` false), and
   * the signal the execution is pinned to (a woken step's), in one statement. Null when the workflow
   * or execution is gone or the execution is not the workflow's. `signal` is null without a pin or
   * without the signals migration. Never the hero: a locking read's snapshot is taken before it
   * waits for the locks, so what it reads beside the locked rows may predate their holder's commit
   * (read the hero with {@link heroRead} once the locks are held). With `parentId`, where
   * {@link locksParentWithStep}, also the parent workflow under its row lock, taken before the
   * others (`parent` null when it is gone): a child's end then tells its parent without a
   * statement of its own (elsewhere WorkflowStore.lockStep locks the parent first by one).
   */
  async lockStep(
    manager: EntityManager,
    workflowId: string,
    executionId: string,
    locked = true,
    parentId?: string,
  ): Promise<{ workflow: WorkflowRecord; execution: StepExecution; signal: Signal | null; parent?: WorkflowRecord | null } | null> {
    if (locked) await this.beforeLock(manager, workflowId);
    const statement = this.lockStepStatement(workflowId, executionId, locked, parentId);
    const { withParent, pins } = statement;
    const ahead = this.readAhead.get(manager);
    this.readAhead.delete(manager);
    const rows = ahead && sameStatement(ahead, statement) ? ahead.rows : ((await this.query(manager, statement.sql, statement.params)) as Array<Record<string, unknown>>);
    if (rows.length === 0) return null;
    const workflow = this.workflows.fromRow(rows[0], 'w');
    const execution = this.executions.fromRow(rows[0], 'e');
    const signal = pins && execution.signalId !== null ? this.signals.fromRow(rows[0], 's') : null;
    const parent = withParent ? (rows[0][`p_id`] == null ? null : this.workflows.fromRow(rows[0], 'p')) : undefined;
    return { workflow, execution, signal: signal?.id ? signal : null, ...(parent === undefined ? {} : { parent }) };
  }

  /** {@link lockStep}'s statement, and what its rows carry: the parent's columns, the pinned signal's. */
  protected lockStepStatement(workflowId: string, executionId: string, locked: boolean, parentId?: string): Statement & { withParent: boolean; pins: boolean } {
    const withParent = locked && parentId !== undefined && this.locksParentWithStep;
    const pins = this.executions.has('signalId');
    const key = locked ? (withParent ? 'lock-with-parent' : 'lock') : 'read';
    let sql = this.lockSql.get(key);
    if (sql === undefined) {
      const w = this.workflows;
      sql =
        `SELECT ${w.selectList('w')}, ${this.executions.selectList('e')}${pins ? `, ${this.signals.selectList('s')}` : ''}${withParent ? `, ${w.selectList('p')}` : ''} ` +
        `FROM ${w.table} w ${this.join()} ${this.executions.table} e ` +
        `ON e.${this.executions.column('id')} = ${this.placeholder(1)} AND e.${this.executions.column('workflowId')} = w.${w.column('id')} ` +
        (pins ? `LEFT JOIN ${this.signals.table} s ON s.${this.signals.column('id')} = e.${this.executions.column('signalId')} ` : '') +
        // The subquery's own lock is taken as the join reads it, before the outer one locks w and e.
        (withParent ? `LEFT JOIN (SELECT * FROM ${w.table} WHERE ${w.column('id')} = ${this.placeholder(3)}${this.lockClause()}) p ON true ` : '') +
        `WHERE w.${w.column('id')} = ${this.placeholder(2)}${locked ? this.lockClause('w, e') : ''}`;
      this.lockSql.set(key, sql);
    }
    return { sql, params: withParent ? [executionId, workflowId, parentId] : [executionId, workflowId], withParent, pins };
  }

  /**
   * Begins `manager`'s transaction (its runner counted as in one already: TransactionOptions.begin)
   * and reads what {@link lockStep} with these arguments reads, in one round trip, for lockStep to
   * answer from next. False, with nothing sent, where the dialect cannot (the caller begins as any).
   */
  async beginLockingStep(_manager: EntityManager, _workflowId: string, _executionId: string, _parentId?: string): Promise<boolean> {
    return false;
  }

  /**
   * Writes the batch and commits `manager`'s transaction in one round trip; true when it did. False,
   * with nothing sent, where the dialect cannot: the caller writes the batch, then commits as any.
   * The caller does TypeORM's bookkeeping of the COMMIT (committedOutside).
   */
  async writeAndCommit(_manager: EntityManager, _batch: WriteBatch): Promise<boolean> {
    return false;
  }

  /** Whether {@link writeAndCommit} can send a batch with the COMMIT (PostgreSQL). */
  readonly commitsWithWrites: boolean = false;

  /** What {@link beginLockingStep} read, for the {@link lockStep} of its transaction that comes next. */
  protected readonly readAhead = new WeakMap<EntityManager, Statement & { rows: Array<Record<string, unknown>> }>();

  /** Whether {@link lockStep} locks a parent with the step's rows (PostgreSQL: a locking subquery is taken before the outer lock). */
  readonly locksParentWithStep: boolean = false;

  /** The workflow under its row lock. */
  async lockWorkflow(manager: EntityManager, workflowId: string): Promise<WorkflowRecord | null> {
    await this.beforeLock(manager, workflowId);
    this.lockWorkflowSql ??= `SELECT ${this.workflows.selectList('w')} FROM ${this.workflows.table} w WHERE w.${this.workflows.column('id')} = ${this.placeholder(1)}${this.lockClause()}`;
    const rows: Array<Record<string, unknown>> = await this.query(manager, this.lockWorkflowSql, [workflowId]);
    return rows.length === 0 ? null : this.workflows.fromRow(rows[0], 'w');
  }

  /**
   * `signal()`'s lock: the workflow under its row lock, and where the dialect can read them in the
   * same statement as they are now, its parked executions (MySQL). Elsewhere `waiting` is absent and
   * {@link insertSignal} reads them.
   */
  async lockForSignal(manager: EntityManager, workflowId: string): Promise<{ workflow: WorkflowRecord; waiting?: StepExecution[] } | null> {
    const workflow = await this.lockWorkflow(manager, workflowId);
    return workflow && { workflow };
  }

  /**
   * Delivers a signal in one round trip, with no transaction held open across the network (PostgreSQL:
   * see postgres-signal-message.ts). Null where the dialect cannot, or when this workflow needs the
   * transaction (not found, not runnable, of a class outside `routes`): nothing was written then.
   * Throws CommitOutcomeUnknownError when the connection was lost with the message sent.
   */
  async deliverSignal(_delivery: SignalDelivery): Promise<DeliveredSignal | null> {
    return null;
  }

  /** Whether {@link deliverSignal} can deliver here. */
  readonly deliversSignalsAlone: boolean = false;

  /**
   * Inserts a signal unless its idempotency key is taken (a redelivery: nothing written, no error,
   * so neither the engine's nor a caller's transaction is poisoned). With `withWaiting`, also reads
   * the workflow's parked executions, oldest first (see {@link waitingExecutions}). The signal
   * receives its id; `inserted` is false for a redelivery.
   */
  async insertSignal(manager: EntityManager, signal: Signal, withWaiting: boolean): Promise<{ inserted: boolean; waiting: StepExecution[] }> {
    const params: unknown[] = [];
    const result: unknown = await this.query(manager, this.insertIgnoringDuplicate(signal, params), params);
    const id = this.insertedId(result, signal.id);
    if (id === null) return { inserted: false, waiting: [] };
    signal.id = id;
    return { inserted: true, waiting: withWaiting ? await this.waitingExecutions(manager, signal.workflowId) : [] };
  }

  /**
   * `batch` (a phase's pending writes, none of them to the signal's workflow or its executions), then
   * {@link insertSignal}: one statement where the dialect allows (PostgreSQL).
   */
  async writeAndInsertSignal(manager: EntityManager, batch: WriteBatch, signal: Signal, withWaiting: boolean): Promise<{ inserted: boolean; waiting: StepExecution[] }> {
    if (batch.updates.length > 0 || batch.inserts.length > 0 || batch.consumptions.length > 0) await this.write(manager, batch);
    return this.insertSignal(manager, signal, withWaiting);
  }

  /**
   * The workflow's parked executions, oldest first, read as they are now (under the workflow lock,
   * which every writer of an execution holds).
   */
  async waitingExecutions(manager: EntityManager, workflowId: string): Promise<StepExecution[]> {
    const e = this.executions;
    const rows: Array<Record<string, unknown>> = await this.query(
      manager,
      `SELECT ${e.selectList('e')} FROM ${e.table} e${this.waitingIndexHint()} WHERE e.${e.column('workflowId')} = ${this.placeholder(1)} ` +
        `AND ${currentExecutionIn(e, 'e', 'waiting')} ORDER BY e.${e.column('createdAt')}, e.${e.column('id')}${this.latestRowsClause()}`,
      [workflowId],
    );
    return rows.map((row) => e.fromRow(row, 'e'));
  }

  /**
   * The workflow's signals not consumed yet (named `name` unless null), oldest first, read as they are
   * now: what a `waitFor` gate may attach, its matcher deciding in Node.
   */
  async attachableSignals(manager: EntityManager, workflowId: string, name: string | null): Promise<Signal[]> {
    const s = this.signals;
    const params: unknown[] = [];
    const where = this.attachable((value) => this.bind(params, value), workflowId, name);
    const rows: Array<Record<string, unknown>> = await this.query(manager, `SELECT ${s.selectList('s')} FROM ${s.table} s WHERE ${where} ORDER BY ${this.signalOrder}${this.latestRowsClause()}`, params);
    return rows.map((row) => s.fromRow(row, 's'));
  }

  /** The condition on `s` of a workflow's signals a gate may attach: not consumed, named `name` unless null. */
  protected attachable(bind: (value: unknown) => string, workflowId: string, name: string | null): string {
    const s = this.signals;
    return `s.${s.column('workflowId')} = ${bind(workflowId)} AND s.${s.column('state')} <> '${CONSUMED}'${name === null ? '' : ` AND s.${s.column('name')} = ${bind(name)}`}`;
  }

  /** Signals oldest first, as a gate takes them. */
  protected get signalOrder(): string {
    return `s.${this.signals.column('createdAt')}, s.${this.signals.column('id')}`;
  }

  /** The signal's INSERT, a no-op when its idempotency key is taken. */
  protected insertIgnoringDuplicate(signal: Signal, params: unknown[]): string {
    return `${this.insertStatement({ codec: this.signals, row: signal, inserted: () => undefined }, params, false)} ON CONFLICT DO NOTHING${this.returning ? ` RETURNING ${this.signals.column('id')}` : ''}`;
  }

  /** What makes a read inside a transaction see the latest committed rows (MySQL's REPEATABLE READ snapshot would not). */
  protected latestRowsClause(): string {
    return '';
  }

  /** An index hint for the read of parked executions (MySQL: see mysql.ts). */
  protected waitingIndexHint(): string {
    return '';
  }

  /** Whether `start()` writes in one statement, with no transaction of its own (PostgreSQL). */
  readonly startsInOneStatement: boolean = false;

  /** Whether INSERT ... RETURNING gives the new id (MySQL reports `insertId` instead). */
  protected readonly returning: boolean = true;

  /**
   * Inserts a new workflow and its first execution (none for a workflow without steps) when the hero
   * row exists; false, with nothing written, when it does not. The rows receive their ids.
   */
  async insertStart(manager: EntityManager, workflow: WorkflowRecord, execution: StepExecution | null, hero: HeroRow): Promise<boolean> {
    const params: unknown[] = [];
    const result: unknown = await this.query(manager, this.insertWorkflowStatement(workflow, hero, params, this.returning), params);
    const id = this.insertedId(result, workflow.id);
    if (id === null) return false;
    workflow.id = id;
    if (execution) {
      execution.workflowId = id;
      const insertParams: unknown[] = [];
      const row = { codec: this.executions, row: execution, inserted: (value: string) => (execution.id = value) } as RowInsert;
      const inserted: unknown = await this.query(manager, this.insertStatement(row, insertParams, this.returning), insertParams);
      execution.id = this.insertedId(inserted, execution.id)!;
    }
    return true;
  }

  /** The id of a row an INSERT wrote (from RETURNING, or MySQL's insertId), or null when it wrote none. */
  protected insertedId(result: unknown, given: string | undefined): string | null {
    if (Array.isArray(result)) return result.length === 0 ? null : given ?? String(Object.values(result[0] as object)[0]);
    const { insertId, affectedRows } = result as { insertId?: number | string; affectedRows?: number };
    if (affectedRows === 0) return null;
    return given ?? String(insertId);
  }

  /** `INSERT INTO workflows (...) SELECT <values> WHERE EXISTS (<the hero row>)`. */
  protected insertWorkflowStatement(workflow: WorkflowRecord, hero: HeroRow, params: unknown[], returning: boolean): string {
    const columns = this.workflows.writable(workflow, 'insert').filter(({ column, value }) => column !== this.workflows.column('id') || value != null);
    const values = columns.map(({ value }) => this.bind(params, value)).join(', ');
    const exists = `SELECT 1 FROM ${hero.table} h WHERE h.${hero.column} = ${this.bind(params, hero.value)}${hero.deletedColumn ? ` AND h.${hero.deletedColumn} IS NULL` : ''}`;
    return (
      `INSERT INTO ${this.workflows.table} (${columns.map(({ column }) => column).join(', ')}) SELECT ${values}${this.fromNothing()} WHERE EXISTS (${exists})` +
      (returning ? ` RETURNING ${this.workflows.column('id')}` : '')
    );
  }

  /** What a SELECT without a table needs before WHERE (MySQL: `FROM DUAL`). */
  protected fromNothing(): string {
    return '';
  }

  // ------------------------------------------------------------ statement builders

  protected updateStatement(update: RowUpdate, params: unknown[], alias?: string): string | null {
    const columns = update.codec.writable(update.changes, 'update');
    if (columns.length === 0) return null;
    const target = alias ? `${alias}.` : '';
    const sets = columns.map(({ column, value }) => `${target}${column} = ${this.bind(params, value)}`).join(', ');
    return `UPDATE ${update.codec.table}${alias ? ` ${alias}` : ''} SET ${sets} WHERE ${target}${update.codec.column('id')} = ${this.bind(params, update.id)}`;
  }

  /** `INSERT ... VALUES`, or `INSERT ... SELECT <values> FROM <from>` when the insert must wait for what `from` reads. */
  protected insertStatement(insert: RowInsert, params: unknown[], returning: boolean, from?: string): string {
    const columns = insert.codec.writable(insert.row, 'insert').filter(({ column, value }) => column !== insert.codec.column('id') || value != null);
    const values = columns.map(({ value }) => this.bind(params, value)).join(', ');
    const source = from === undefined ? `VALUES (${values})` : `SELECT ${values} FROM ${from}`;
    return `INSERT INTO ${insert.codec.table} (${columns.map(({ column }) => column).join(', ')}) ${source}${returning ? ` RETURNING ${insert.codec.column('id')}` : ''}`;
  }

  /**
   * `consumed + 1`, and the signal becomes `consumed` when no other execution pinned to it is
   * unresolved: none active, and the latest of every other step pinned to it completed or skipped.
   * The consuming step is resolved by definition (it is the workflow's latest execution of that step).
   * `consumed_at` is assigned before `state` so that MySQL, which assigns left to right, reads the old state.
   */
  protected consumptionStatement(consumption: SignalConsumption, params: unknown[]): string {
    const e = this.executions;
    const s = this.signals;
    const now = () => this.bind(params, s.param('updatedAt', consumption.now));
    // Built once per use: with `?` placeholders every occurrence binds its own parameters.
    const settles = () => {
      const stepName = this.bind(params, e.param('stepName', consumption.stepName));
      const active = ACTIVE_EXECUTION_STATES.map((state) => this.bind(params, state)).join(', ');
      const later =
        `SELECT 1 FROM ${e.table} q WHERE q.${e.column('signalId')} = p.${e.column('signalId')} AND q.${e.column('stepName')} = p.${e.column('stepName')} ` +
        `AND (q.${e.column('createdAt')} > p.${e.column('createdAt')} OR (q.${e.column('createdAt')} = p.${e.column('createdAt')} AND q.${e.column('id')} > p.${e.column('id')}))`;
      const unresolved =
        `SELECT 1 FROM ${e.table} p WHERE p.${e.column('signalId')} = s.${s.column('id')} AND p.${e.column('stepName')} <> ${stepName} ` +
        `AND (p.${e.column('state')} IN (${active}) OR ((p.${e.column('outcome')} IS NULL OR p.${e.column('outcome')} NOT IN ('success', 'skipped')) AND NOT EXISTS (${later})))`;
      return `s.${s.column('state')} = '${CLAIMED}' AND NOT EXISTS (${unresolved})`;
    };
    return (
      `UPDATE ${s.table} AS s SET ${s.column('consumedAt')} = CASE WHEN ${settles()} THEN ${now()} ELSE s.${s.column('consumedAt')} END, ` +
      `${s.column('state')} = CASE WHEN ${settles()} THEN '${CONSUMED}' ELSE s.${s.column('state')} END, ` +
      `${s.column('consumed')} = s.${s.column('consumed')} + 1, ${s.column('updatedAt')} = ${now()} ` +
      `WHERE s.${s.column('id')} = ${this.bind(params, consumption.signalId)} AND s.${s.column('state')} <> '${CONSUMED}'`
    );
  }

  /** Runs a trailing read on its own. */
  protected read(manager: EntityManager, read: TrailingRead): Promise<Array<Record<string, unknown>>> {
    const params: unknown[] = [];
    return this.query(manager, read.sql((value) => this.bind(params, value)), params);
  }

  /** Runs one statement of the hot path through the transaction's manager (PostgreSQL and MySQL prepare it: see `onConnection`). */
  protected query(manager: EntityManager, sql: string, params: unknown[]): Promise<any> {
    return manager.query(sql, params);
  }

  /**
   * Runs `sql` with `run` on the driver's own connection behind the manager's query runner (its
   * transaction; a runner of its own when it has none), for what TypeORM's `query()` cannot ask of
   * the driver: a prepared statement, parsed and planned once per connection instead of on every
   * call. The statement is logged and announced to subscribers (`beforeQuery`, `afterQuery`) as
   * TypeORM does its own, and fails as TypeORM's do (QueryFailedError, the driver's error inside).
   */
  protected async onConnection<T>(manager: EntityManager, sql: string, params: unknown[], run: (connection: any) => Promise<T>): Promise<T> {
    // A transaction's runner released under it (TypeORM releases a PostgreSQL runner whose connection
    // failed) has lost its transaction: a statement must fail as TypeORM's own do, never run on another
    // connection, where it would commit by itself without the locks the transaction took.
    if (manager.queryRunner?.isReleased) throw new QueryRunnerProviderAlreadyReleasedError();
    const own = manager.queryRunner === undefined;
    const runner: QueryRunner = own ? this.dataSource.createQueryRunner() : manager.queryRunner!;
    try {
      const connection: unknown = await runner.connect();
      const logger = this.dataSource.logger;
      logger.logQuery(sql, params, runner);
      // Told as TypeORM tells its own queries; a broadcast nobody listens to is two promises per message.
      const told = this.dataSource.subscribers.some((subscriber) => typeof subscriber.beforeQuery === 'function' || typeof subscriber.afterQuery === 'function');
      if (told) await runner.broadcaster.broadcast('BeforeQuery', sql, params);
      const startedAt = Date.now();
      let result: T;
      try {
        result = await run(connection);
      } catch (error) {
        logger.logQueryError(error as Error, sql, params, runner);
        if (told) await runner.broadcaster.broadcast('AfterQuery', sql, params, false, undefined, undefined, error);
        throw new QueryFailedError(sql, params, error as Error);
      }
      const took = Date.now() - startedAt;
      if (told) await runner.broadcaster.broadcast('AfterQuery', sql, params, true, took, result, undefined);
      const slowAfter = this.dataSource.options.maxQueryExecutionTime;
      if (slowAfter && took > slowAfter) logger.logQuerySlow(took, sql, params, runner);
      return result;
    } finally {
      if (own) await runner.release();
    }
  }

  protected bind(params: unknown[], value: unknown): string {
    params.push(value);
    return this.placeholder(params.length);
  }
}

function sameStatement(a: Statement, b: Statement): boolean {
  return a.sql === b.sql && a.params.length === b.params.length && a.params.every((value, index) => value === b.params[index]);
}
