import { createHash, randomUUID } from 'node:crypto';
import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import type { Signal } from '../../entities/signal.entity.js';
import type { StepExecution } from '../../entities/step-execution.entity.js';
import type { WorkflowRecord } from '../../entities/workflow.entity.js';
import { CommitOutcomeUnknownError } from '../../errors/commit-outcome-unknown.error.js';
import { inOwnTransaction, isConnectionError } from '../transaction-runner.js';
import { isStaleStatement } from '../stale-statement.js';
import { currentExecutionIn, HotPathSql, type ChainedStart, type DeliveredSignal, type ExpectedStates, type GuardedWrite, type HeroRow, type SignalDelivery, type SlotChange, type Statement, type TrailingRead, type WriteBatch } from './hot-path-sql.js';
import { PgSignalIds } from './postgres-signal-ids.js';
import { deliveredSignal, signalStatement, type SignalStatement } from './postgres-signal-message.js';
import { chainedStartStatement } from './postgres-chained-start.js';
import { pgRowVersion } from './pg-row-version.js';
import { PgPreparedStatements, STATEMENT_PREFIX, type PgClient } from './pg-prepared-statements.js';
import { toRow } from '../flow-keys.js';

/**
 * How many distinct statements get a name: the hot path builds a bounded set of shapes (one per
 * combination of the columns a phase writes), so this is a guard, not a limit it reaches.
 */
const MAX_PREPARED = 500;

/**
 * PostgreSQL: every write of a phase in one statement — data-modifying CTEs, each row written once,
 * all reading the snapshot from before the statement (the consumption test skips the consuming
 * step's rows for that reason, on every dialect).
 */
export class PostgresHotPathSql extends HotPathSql {
  private readonly names = new Map<string, string>();
  private readonly statements = new PgPreparedStatements();

  constructor(
    dataSource: DataSource,
    /** Named prepared statements (GenevaDriveModuleOptions.preparedStatements). */
    private readonly prepares: boolean,
  ) {
    super(dataSource);
  }

  protected placeholder(index: number): string {
    return `$${index}`;
  }

  protected lockClause(of?: string): string {
    return of ? ` FOR UPDATE OF ${of}` : ' FOR UPDATE';
  }

  readonly startsInOneStatement = true;

  readonly writesIfUnchanged = true;

  readonly beginsSteps = true;

  readonly commitsWithWrites = true;

  readonly locksParentWithStep = true;

  readonly readsSignalsWithHero = true;

  inlines(value: unknown): boolean {
    return isSqlLiteral(value);
  }

  /**
   * START TRANSACTION, the bounds of `transactionTimeout` (every statement, and every pause between
   * two: settings that end with the transaction) and `read`, as one message of the simple protocol:
   * one round trip where the BEGIN, the SET LOCAL and the hero read took three. That protocol carries
   * no parameters, so the read's values go in as literals ({@link sqlLiteral}).
   */
  async beginStep(manager: EntityManager, timeoutMs: number, read?: TrailingRead, begin = true): Promise<Array<Record<string, unknown>>> {
    const results = await this.sendBeginning(manager, this.beginning(begin ? ['START TRANSACTION'] : [], timeoutMs, read));
    return read ? results[results.length - 1].rows : [];
  }

  async commitAndBeginStep(manager: EntityManager, timeoutMs: number, read?: TrailingRead): Promise<Array<Record<string, unknown>> | null> {
    const sql = this.beginning(['COMMIT', 'START TRANSACTION'], timeoutMs, read);
    const results = await this.onConnection(manager, sql, [], async (client: PgClient) => {
      try {
        return (await client.query(sql)) as unknown as Array<{ rows: Array<Record<string, unknown>> }>;
      } catch (error) {
        if (isConnectionError(error)) throw error;
        // The driver answers the error as it reads it, before the server's ReadyForQuery, which says
        // the session's state, may have arrived: an empty query waits for that (and changes nothing).
        await client.query('');
        // Failed in the transaction it began (its bounds, its read): the COMMIT before went through.
        if (client.getTransactionStatus?.() !== 'E') throw error;
        await client.query('ROLLBACK');
        return null;
      }
    });
    if (!results) return null;
    return read ? results[results.length - 1].rows : [];
  }

  /** `before`, then the bounds of `transactionTimeout` (every statement, and every pause between two) and `read`, as one message's text. */
  private beginning(before: string[], timeoutMs: number, read?: TrailingRead): string {
    const ms = Math.ceil(timeoutMs);
    const statements = [...before, `SET LOCAL statement_timeout = ${ms}`, `SET LOCAL idle_in_transaction_session_timeout = ${ms}`];
    if (read) statements.push(read.sql(sqlLiteral));
    return statements.join('; ');
  }

  /** Sends several statements in one message: the driver answers with one result each. */
  private sendBeginning(manager: EntityManager, sql: string): Promise<Array<{ rows: Array<Record<string, unknown>> }>> {
    return this.onConnection(manager, sql, [], (client: PgClient) => client.query(sql) as unknown as Promise<Array<{ rows: Array<Record<string, unknown>> }>>);
  }

  /**
   * A transactional step's end, the guarded write of {@link writeIfUnchanged}, and its COMMIT as one
   * message of the simple protocol: the write is prepared under a name of the message's own, run by
   * EXECUTE with its values as literals (which the statement's parameter types read as the driver's
   * values would be), and dropped, all in that message, so that nothing of it outlives the message on
   * the session (a pooler in transaction mode included). Where the rows moved on, the write fails
   * with its own error (see batchStatement): the message stops before COMMIT, nothing is written, and
   * the transaction is rolled back here, then the statement it left on the session dropped
   * ('refused'; a pooled session would otherwise keep one per refusal for its whole life). A value
   * with no literal form here: the write goes alone, and COMMIT is the caller's ('written').
   */
  async endAndCommit(runner: QueryRunner, batch: WriteBatch, expected: ExpectedStates): Promise<'committed' | 'written' | 'refused'> {
    const statement = this.batchStatement(batch, undefined, expected, true)!;
    const args = executeArguments(statement.params);
    const name = `geneva_drive_end_${randomUUID().replaceAll('-', '')}`;
    let prepared = false;
    try {
      if (args === undefined) {
        const rows: Array<Record<string, unknown>> = await this.query(runner.manager, statement.sql, statement.params);
        statement.received(rows[0]);
        return 'written';
      }
      const text = `PREPARE ${name} AS ${statement.sql}; EXECUTE ${name}(${args}); DEALLOCATE ${name}; COMMIT`;
      await runner.broadcaster.broadcast('BeforeTransactionCommit');
      prepared = true;
      const results = await this.onConnection(runner.manager, text, [], (connection: PgClient) => connection.query(text) as unknown as Promise<Array<{ rows: Array<Record<string, unknown>> }>>);
      statement.received(results[1].rows[0]);
      return 'committed';
    } catch (error) {
      if (!isRefusedEnd(error)) throw error;
      if (!prepared) return 'refused';
      // The aborted transaction refuses every statement but its ROLLBACK: the whole of it, whatever
      // savepoint a body left open. A session lost meanwhile took both with it; the caller's own
      // rollback then finds nothing to do.
      const drop = `DEALLOCATE ${name}`;
      Object.assign(runner, { transactionDepth: 1 });
      await runner
        .rollbackTransaction()
        .then(() => this.onConnection(runner.manager, drop, [], (connection: PgClient) => connection.query(drop)))
        .catch(() => undefined);
      return 'refused';
    }
  }

  /**
   * A named prepared statement (see HotPathSql.onConnection): PostgreSQL's parsing and planning of
   * each statement was half of its CPU per step. As TypeORM's query(), UPDATE and DELETE answer
   * [rows, count]. Only in the engine's own transactions and outside any: one refused as stale after
   * a migration (see PgPreparedStatements) aborts its transaction, and a caller's the engine cannot
   * run again.
   */
  protected query(manager: EntityManager, sql: string, params: unknown[]): Promise<any> {
    const name = this.nameOf(sql);
    const alone = manager.queryRunner === undefined;
    if (name === undefined || !(alone || inOwnTransaction(manager))) return manager.query(sql, params);
    return this.onConnection(manager, sql, params, async (client: PgClient) => {
      const result = await this.statements.run(client, name, sql, params, alone);
      return result.command === 'UPDATE' || result.command === 'DELETE' ? [result.rows, result.rowCount] : result.rows;
    });
  }

  private nameOf(sql: string): string | undefined {
    if (!this.prepares) return undefined;
    let name = this.names.get(sql);
    if (name === undefined && this.names.size < MAX_PREPARED) {
      name = `${STATEMENT_PREFIX}${createHash('sha1').update(sql).digest('hex').slice(0, 20)}`;
      this.names.set(sql, name);
    }
    return name;
  }

  readonly deliversSignalsAlone = true;

  private signalIds: PgSignalIds | undefined;
  private signalColumnTypes: Promise<Map<string, string>> | undefined;
  /** signal()'s statements, by the name, routes and keyedness they were built for, each with the name it is prepared under. */
  private readonly signalStatements = new Map<string, SignalStatement & { name: string }>();

  /**
   * See postgres-signal-message.ts. The signal gets its id first (PgSignalIds) unless it has one (uuid
   * keys). The statement, and the lock read before it, are prepared on the session by the first
   * message that needs them (PREPARE in the message, as EXECUTE runs them: parsing and planning the
   * lock read in every message was a seventh of the message's time), and are dropped with the session's others
   * when one goes stale (PgPreparedStatements); without `preparedStatements` each message prepares
   * and drops the statement, and sends the lock read as a literal. A message the server refused
   * wrote nothing: it is rolled back, its statements dropped, the error rethrown.
   */
  async deliverSignal(delivery: SignalDelivery): Promise<DeliveredSignal | null> {
    if (delivery.signal.id === undefined) {
      this.signalIds ??= new PgSignalIds(this.dataSource, this.signals.table);
      delivery.signal.id = await this.signalIds.next();
    }
    const { signal, routes } = delivery;
    const shape = `${signal.idempotencyKey === null}\0${signal.name}\0${JSON.stringify([...routes])}`;
    let statement = this.signalStatements.get(shape);
    if (!statement) {
      const built = signalStatement(this, delivery, await (this.signalColumnTypes ??= this.columnTypes(this.signals.table)));
      statement = { ...built, name: `${STATEMENT_PREFIX}signal_${createHash('sha1').update(built.sql).digest('hex').slice(0, 20)}` };
      if (this.signalStatements.size < MAX_PREPARED) this.signalStatements.set(shape, statement);
    }
    const values = statement.values(signal);
    const args = executeArguments(values);
    if (args === undefined) return null;
    const { name } = statement;
    const workflowId = sqlLiteral(delivery.signal.workflowId);
    const lockSql = `SELECT 1 FROM ${this.workflows.table} WHERE ${this.workflows.column('id')} = ${this.prepares ? '$1' : workflowId} FOR UPDATE`;
    // Logged and told to subscribers as what it does, its values apart (the lock read's $1 is the statement's too), whether or not its statements are prepared yet.
    const logged = `BEGIN; ${lockSql}; ${statement.sql}; COMMIT`;
    try {
      const rows = await this.onConnection(this.dataSource.manager, logged, values, async (client: PgClient) => {
        const kept = this.prepares && (await this.statements.has(client, name));
        const lockKept = this.prepares && (await this.statements.has(client, SIGNAL_LOCK));
        const lockRead = this.prepares ? [...(lockKept ? [] : [`PREPARE ${SIGNAL_LOCK} AS ${lockSql}`]), `EXECUTE ${SIGNAL_LOCK}(${workflowId})`] : [lockSql];
        const parts = ['BEGIN', ...lockRead, ...(kept ? [] : [`PREPARE ${name} AS ${statement.sql}`]), `EXECUTE ${name}(${args})`, ...(this.prepares ? [] : [`DEALLOCATE ${name}`]), 'COMMIT'];
        try {
          const results = (await client.query(parts.join('; '))) as unknown as Array<{ rows: Array<Record<string, unknown>> }>;
          if (this.prepares && !kept) this.statements.record(client, name, statement.sql);
          if (this.prepares && !lockKept) this.statements.record(client, SIGNAL_LOCK, lockSql);
          return results[parts.indexOf(`EXECUTE ${name}(${args})`)].rows;
        } catch (error) {
          // The message stopped at the failed statement, inside its transaction (a lost connection's rolls back by itself).
          if (isConnectionError(error)) throw error;
          await client.query('ROLLBACK');
          await this.statements.drop(client, name, error);
          if (this.prepares) await this.statements.drop(client, SIGNAL_LOCK, error);
          throw error;
        }
      });
      return deliveredSignal(this, delivery, rows, (row, version) => this.versions.set(row, version));
    } catch (error) {
      throw isConnectionError(error) ? new CommitOutcomeUnknownError(error) : error;
    }
  }

  /** A table's columns and their types as the database declares them (`format_type`). */
  private async columnTypes(table: string): Promise<Map<string, string>> {
    const rows: Array<{ name: string; type: string }> = await this.dataSource.query(
      'SELECT attname AS name, format_type(atttypid, atttypmod) AS type FROM pg_attribute WHERE attrelid = CAST($1 AS regclass) AND attnum > 0 AND NOT attisdropped',
      [table],
    );
    return new Map(rows.map((row) => [row.name, row.type]));
  }

  /** The insert and the read of parked executions in one statement; the read sees the rows as they were before it, all of them committed under the workflow lock. */
  async insertSignal(manager: EntityManager, signal: Signal, withWaiting: boolean): Promise<{ inserted: boolean; waiting: StepExecution[] }> {
    if (!withWaiting) return super.insertSignal(manager, signal, false);
    const e = this.executions;
    const params: unknown[] = [];
    const insert = this.insertIgnoringDuplicate(signal, params);
    const rows: Array<Record<string, unknown>> = await this.query(
      manager,
      `WITH s AS (${insert}) SELECT s.${this.signals.column('id')} AS "signal_id", ${e.selectList('e')} FROM s LEFT JOIN ${e.table} e ` +
        `ON e.${e.column('workflowId')} = ${this.bind(params, signal.workflowId)} AND ${currentExecutionIn(e, 'e', 'waiting')} ORDER BY e.${e.column('createdAt')}, e.${e.column('id')}`,
      params,
    );
    if (rows.length === 0) return { inserted: false, waiting: [] };
    signal.id = String(rows[0].signal_id);
    return { inserted: true, waiting: rows.filter((row) => row.e_id !== null && row.e_id !== undefined).map((row) => e.fromRow(row, 'e')) };
  }

  /**
   * The batch's writes, the signal's INSERT and (with `withWaiting`) the read of the workflow's parked
   * executions in one statement. The read sees the rows as they were before the statement: the
   * batch does not write the signal's workflow (WorkflowStore.insertSignal).
   */
  async writeAndInsertSignal(manager: EntityManager, batch: WriteBatch, signal: Signal, withWaiting: boolean): Promise<{ inserted: boolean; waiting: StepExecution[] }> {
    if (batch.updates.length === 0 && batch.inserts.length === 0 && batch.consumptions.length === 0) return this.insertSignal(manager, signal, withWaiting);
    const e = this.executions;
    const waiting: TrailingRead | undefined = withWaiting
      ? { sql: (bind) => `SELECT ${e.selectList('e')} FROM ${e.table} e WHERE e.${e.column('workflowId')} = ${bind(signal.workflowId)} AND ${currentExecutionIn(e, 'e', 'waiting')}` }
      : undefined;
    const statement = this.batchStatement(batch, waiting, undefined, false, {
      insert: (params) => this.insertIgnoringDuplicate(signal, params),
      orderBy: 'r."e_createdAt", r."e_id"',
    })!;
    const rows: Array<Record<string, unknown>> = await this.query(manager, statement.sql, statement.params);
    statement.received(rows[0]);
    if (rows[0].signal_id == null) return { inserted: false, waiting: [] };
    signal.id = String(rows[0].signal_id);
    return { inserted: true, waiting: rows.filter((row) => row.e_id != null).map((row) => e.fromRow(row, 'e')) };
  }

  /** Both rows in one statement: the execution's INSERT reads the workflow's new id from the first. */
  async insertStart(manager: EntityManager, workflow: WorkflowRecord, execution: StepExecution | null, hero: HeroRow): Promise<boolean> {
    if (!execution) return super.insertStart(manager, workflow, null, hero);
    const params: unknown[] = [];
    const insertWorkflow = this.insertWorkflowStatement(workflow, hero, params, true);
    const columns = this.executions
      .writable(execution, 'insert')
      .filter(({ column, value }) => column !== this.executions.column('id') || value != null)
      .filter(({ column }) => column !== this.executions.column('workflowId'));
    const values = columns.map(({ value }) => this.bind(params, value)).join(', ');
    const insertExecution =
      `INSERT INTO ${this.executions.table} (${this.executions.column('workflowId')}, ${columns.map(({ column }) => column).join(', ')}) ` +
      `SELECT w.${this.workflows.column('id')}, ${values} FROM w RETURNING ${this.executions.column('id')} AS id, ${pgRowVersion()} AS version`;
    // Each row's id and version (kept with the rows for the first step's job: WorkflowStore.keepRows); the workflow's RETURNING list, which ends the statement, gets the version appended.
    const rows: Array<{ w: unknown; e: unknown; w_version: string; e_version: string }> = await this.query(
      manager,
      `WITH w AS (${insertWorkflow} AS id, ${pgRowVersion()} AS version), e AS (${insertExecution}) ` +
        'SELECT (SELECT id FROM w) AS w, (SELECT version FROM w) AS w_version, (SELECT id FROM e) AS e, (SELECT version FROM e) AS e_version',
      params,
    );
    if (rows[0].w === null) return false;
    workflow.id = String(rows[0].w);
    execution.workflowId = workflow.id;
    execution.id = String(rows[0].e);
    this.versions.set(workflow, rows[0].w_version);
    this.versions.set(execution, rows[0].e_version);
    return true;
  }

  async write(manager: EntityManager, batch: WriteBatch, then?: TrailingRead): Promise<Array<Record<string, unknown>>> {
    const statement = this.batchStatement(batch, then);
    if (!statement) return [];
    const rows: Array<Record<string, unknown>> = await this.query(manager, statement.sql, statement.params);
    statement.received(rows[0]);
    return rows;
  }

  /**
   * The guard is a locking read in the statement: it waits for the rows' locks like any FOR UPDATE
   * and then checks their latest versions, and every write reads it (`EXISTS`), so none writes unless
   * it found both rows as expected. What the writes read besides is the statement's snapshot, taken
   * before the lock: rows that only a holder of the workflow lock changes, and such a holder would
   * have moved the workflow or the execution out of the expected states.
   */
  async writeIfUnchanged(manager: EntityManager, batch: WriteBatch, expected: ExpectedStates, then?: TrailingRead): Promise<GuardedWrite | null> {
    const statement = this.batchStatement(batch, undefined, expected)!;
    // `then` rides on the write's message: its statement runs once the write's has taken the locks.
    const results = then ? await this.sendStatements(manager, [statement, this.statementOf(then)]) : undefined;
    const [row] = results ? results[0] : ((await this.query(manager, statement.sql, statement.params)) as Array<Record<string, unknown>>);
    if (Number(row.unchanged) === 0) return null;
    statement.received(row);
    return {
      ...(expected.slot?.take === false && expected.slot.freed ? { freedSlot: toRow({ holding: row.slot_holding, waiters: row.slot_waiters }) } : {}),
      ...(results ? { then: results[1] } : {}),
    };
  }

  /** See postgres-chained-start.ts: with prepared statements only, for its message is sent by EXECUTE (sendStatements). */
  override get startsChainedSteps(): boolean {
    return this.prepares;
  }

  override chainedStart(start: ChainedStart): TrailingRead | undefined {
    if (!this.prepares) return undefined;
    return chainedStartStatement(
      {
        workflows: this.workflows,
        executions: this.executions,
        signals: this.signals,
        heroRead: (codec, heroId) => this.heroRead(codec, heroId),
        attachable: (bind, workflowId, name) => this.attachable(bind, workflowId, name),
        signalOrder: this.signalOrder,
      },
      start,
    );
  }

  override get beginsWritingIfUnchanged(): boolean {
    return this.prepares;
  }

  /** START TRANSACTION, the guarded write and `then` as one message. */
  async beginWritingIfUnchanged(manager: EntityManager, batch: WriteBatch, expected: ExpectedStates, then?: TrailingRead): Promise<GuardedWrite | null | undefined> {
    const statement = this.batchStatement(batch, undefined, expected)!;
    const results = await this.sendStatements(manager, then ? [statement, this.statementOf(then)] : [statement], ['START TRANSACTION']);
    if (!results) return undefined;
    const [row] = results[0];
    if (Number(row.unchanged) === 0) return null;
    statement.received(row);
    return then ? { then: results[1] } : {};
  }

  /** START TRANSACTION and lockStep's locking read as one message. */
  async beginLockingStep(manager: EntityManager, workflowId: string, executionId: string, parentId?: string): Promise<boolean> {
    const statement = this.lockStepStatement(workflowId, executionId, true, parentId);
    const results = await this.sendStatements(manager, [statement], ['START TRANSACTION']);
    if (!results) return false;
    this.readAhead.set(manager, { ...statement, rows: results[0] });
    return true;
  }

  /** The batch's statement and COMMIT as one message. */
  async writeAndCommit(manager: EntityManager, batch: WriteBatch): Promise<boolean> {
    const statement = this.batchStatement(batch);
    const results = statement && (await this.sendStatements(manager, [statement], [], ['COMMIT']));
    if (!statement || !results) return false;
    statement.received(results[0][0]);
    return true;
  }

  private statementOf(read: TrailingRead): Statement {
    const params: unknown[] = [];
    return { sql: read.sql((value) => this.bind(params, value)), params };
  }

  /**
   * Statements as one message of the simple protocol (between `before` and `after`, statements
   * without values, whose results are left out), each a prepared statement run by EXECUTE with
   * its values as literals ({@link executeArguments}): one round trip for all of them. A statement the
   * session has not prepared yet is prepared first, by a PREPARE of its own. Outside a transaction the
   * message is a transaction of its own: its statements commit together once the last has run, and
   * an error in any of them rolls them all back. Undefined, with nothing sent, where they cannot go
   * so (a value with no literal form, prepared statements off, a caller's transaction): the caller
   * sends them one by one.
   */
  private async sendStatements(manager: EntityManager, statements: Statement[], before: string[] = [], after: string[] = []): Promise<Array<Array<Record<string, unknown>>> | undefined> {
    if (manager.queryRunner !== undefined && !inOwnTransaction(manager)) return undefined;
    const parts: Array<Statement & { name: string; args: string }> = [];
    for (const statement of statements) {
      const name = this.nameOf(statement.sql);
      const args = executeArguments(statement.params);
      if (name === undefined || args === undefined) return undefined;
      parts.push({ ...statement, name, args });
    }
    const logged = [...before, ...statements.map(({ sql }) => sql), ...after].join('; ');
    const text = [...before, ...parts.map(({ name, args }) => `EXECUTE ${name}(${args})`), ...after].join('; ');
    return this.onConnection(manager, logged, statements.flatMap(({ params }) => params), async (client: PgClient) => {
      // A message refused for a stale statement is sent once more, prepared afresh, when it is a
      // transaction of its own (which the refusal rolled back); in the engine's, the transaction runs again.
      for (let rerun = manager.queryRunner === undefined; ; rerun = false) {
        for (const { name, sql } of parts) {
          if (await this.statements.has(client, name)) continue;
          await client.query(`PREPARE ${name} AS ${sql}`);
          this.statements.record(client, name, sql);
        }
        try {
          const answer = (await client.query(text)) as unknown as { rows: Array<Record<string, unknown>> } | Array<{ rows: Array<Record<string, unknown>> }>;
          // The driver answers a message of one statement with that statement's result, not a list.
          return (Array.isArray(answer) ? answer : [answer]).slice(before.length, before.length + parts.length).map(({ rows }) => rows);
        } catch (error) {
          if (!isStaleStatement(error)) throw error;
          this.statements.refused(client);
          if (!rerun) throw error;
        }
      }
    });
  }

  /**
   * The batch's writes as data-modifying CTEs of one statement; `then` a read that rides on it, and
   * `expected` the guard of {@link writeIfUnchanged} (CTEs `l` and `g`); a lone insert or read goes out as it
   * is. `received` hands the inserted ids over. Null when there is nothing to run.
   */
  private batchStatement(
    batch: WriteBatch,
    then?: TrailingRead,
    expected?: ExpectedStates,
    raising = false,
    signal?: { insert: (params: unknown[]) => string; orderBy: string },
  ): (Statement & { received(row: Record<string, unknown>): void }) | null {
    const params: unknown[] = [];
    const bind = (value: unknown) => this.bind(params, value);
    const guarded = expected ? ' AND EXISTS (SELECT 1 FROM g)' : '';
    const parts: string[] = [];
    for (const consumption of batch.consumptions) parts.push(`${this.consumptionStatement(consumption, params)}${guarded}`);
    const updated: string[] = [];
    for (const update of batch.updates) {
      const sql = this.updateStatement(update, params);
      if (sql) updated.push(`p${parts.push(`${sql}${guarded} RETURNING 1`) - 1}`);
    }
    // A signal's INSERT (writeAndInsertSignal) writes no row the batch writes: it may run in any order.
    const signalPart = signal ? `p${parts.push(signal.insert(params)) - 1}` : undefined;
    if (!expected && parts.length === 0 && batch.inserts.length === 0) return then ? { sql: then.sql(bind), params, received: () => undefined } : null;
    if (!expected && parts.length === 0 && batch.inserts.length === 1 && !then) {
      const [insert] = batch.inserts;
      return { sql: this.insertStatement(insert, params, true), params, received: (row) => insert.inserted(String(Object.values(row)[0])) };
    }
    // Sub-statements run in no set order, and a unique index is checked row by row: an insert reads
    // the updates' counts so that it runs after them (an execution leaves the active state first).
    const from = [...(expected ? ['g'] : []), ...updated.map((name) => `(SELECT count(*) FROM ${name}) AS c${name}`)];
    const inserted = batch.inserts.map((insert) => ({ insert, name: `p${parts.push(this.insertStatement(insert, params, true, from.length === 0 ? undefined : from.join(', '))) - 1}` }));
    const ids = inserted.map(({ name }) => `(SELECT * FROM ${name}) AS ${name}`);
    // `raising`: moved-on rows are an error of the statement's own (see endAndCommit), not a count of
    // 0. The cast depends on `g`, so that it is evaluated as the statement runs, never when planned.
    if (signalPart) ids.push(`(SELECT ${this.signals.column('id')} FROM ${signalPart}) AS signal_id`);
    if (expected) ids.unshift(raising ? `CAST(CASE WHEN EXISTS (SELECT 1 FROM g) THEN '1' ELSE '${REFUSED_END}' END AS integer) AS unchanged` : '(SELECT count(*) FROM g) AS unchanged');
    if (expected?.slot?.take === false && expected.slot.freed) ids.push('(SELECT holding FROM k) AS slot_holding', '(SELECT waiters FROM k) AS slot_waiters');
    // The trailing read sees the rows as they were before the statement: it must not read what the batch writes.
    const select = then
      ? `SELECT ${[...ids, 'r.*'].join(', ')} FROM (SELECT 1) AS one LEFT JOIN (${then.sql(bind)}) AS r ON true${signal ? ` ORDER BY ${signal.orderBy}` : ''}`
      : `SELECT ${ids.length === 0 ? '1' : ids.join(', ')}`;
    const ctes = parts.map((sql, index) => `p${index} AS (${sql})`);
    if (expected) ctes.unshift(...this.guardStatements(expected, params));
    return {
      sql: `WITH ${ctes.join(', ')} ${select}`,
      params,
      received: (row) => {
        for (const { insert, name } of inserted) insert.inserted(String(row[name]));
      },
    };
  }

  /**
   * `l`, the workflow and execution rows under their locks (found by key alone: a state in the
   * WHERE would let a generic plan pick a state index and scan every row in that state), and `g`,
   * the one row when both are in the expected states. `l` reads the rows' latest versions, as any
   * FOR UPDATE does once it holds the locks.
   */
  private guardStatements(expected: ExpectedStates, params: unknown[]): string[] {
    const w = this.workflows;
    const e = this.executions;
    const stamps = expected.versions ? `, ${pgRowVersion('w')} AS workflow_version, ${pgRowVersion('e')} AS execution_version` : '';
    const locked =
      `SELECT w.${w.column('state')} AS workflow_state, e.${e.column('state')} AS execution_state${stamps} FROM ${w.table} w JOIN ${e.table} e ` +
      `ON e.${e.column('id')} = ${this.bind(params, expected.executionId)} AND e.${e.column('workflowId')} = w.${w.column('id')} ` +
      `WHERE w.${w.column('id')} = ${this.bind(params, expected.workflowId)}${this.lockClause('w, e')}`;
    const unwritten = expected.versions
      ? ` AND workflow_version = ${this.bind(params, expected.versions.workflow)} AND execution_version = ${this.bind(params, expected.versions.execution)}`
      : '';
    const unchanged = `SELECT 1 FROM l WHERE workflow_state = ${this.bind(params, expected.workflowState)} AND execution_state = ${this.bind(params, expected.executionState)}${unwritten}`;
    if (!expected.slot) return [`l AS (${locked})`, `g AS (${unchanged})`];
    return [`l AS (${locked})`, `s AS (${unchanged})`, `k AS (${this.slotStatement(expected.slot, params)})`, 'g AS (SELECT 1 FROM k)'];
  }

  /**
   * `k`, the key's slot taken or freed once `s` found the rows as expected (so the key's row is
   * locked after theirs, as everywhere): `g`, which every write of the batch depends on, is its one
   * row. A slot is taken only while the key is uncontended and unchanged since the start was
   * stamped (`updated_at`, which every take and free stamps after its execution's own stamp, is not
   * later than `now`, taken before the start's): the start was stamped before this statement, which
   * may wait for locks, so a slot freed meanwhile would let it be recorded started before the
   * holder it replaced had ended; the locked phase 1 stamps it once it holds the key instead. A free with `freed` answers the key's row
   * as it leaves it, whose waiters are woken once it has committed (PhaseBatch.writeIfUnchanged), and
   * one without goes out only while nobody waits.
   */
  private slotStatement(slot: SlotChange, params: unknown[]): string {
    const key = this.bind(params, slot.key);
    const now = this.bind(params, slot.now);
    if (!slot.take) {
      const uncontended = slot.freed ? '' : ` AND waiters = '[]'`;
      return `UPDATE ${FLOW_KEYS} SET holding = CASE WHEN holding > 0 THEN holding - 1 ELSE 0 END, updated_at = ${now} WHERE flow_key = ${key}${uncontended} AND EXISTS (SELECT 1 FROM s) RETURNING holding, waiters`;
    }
    return (
      `INSERT INTO ${FLOW_KEYS} (flow_key, holding, waiters, created_at, updated_at) SELECT ${key}, 1, '[]', ${now}, ${now} WHERE EXISTS (SELECT 1 FROM s) ` +
      `ON CONFLICT (flow_key) DO UPDATE SET holding = ${FLOW_KEYS}.holding + 1, updated_at = excluded.updated_at ` +
      `WHERE ${FLOW_KEYS}.holding < ${this.bind(params, slot.limit)} AND ${FLOW_KEYS}.waiters = '[]' AND ${FLOW_KEYS}.updated_at <= excluded.updated_at RETURNING 1`
    );
  }
}

/** The name signal()'s lock read is prepared under (PostgresHotPathSql.deliverSignal). */
const SIGNAL_LOCK = `${STATEMENT_PREFIX}signal_lock`;

/** The concurrency keys' table (persistence/flow-keys.ts). */
const FLOW_KEYS = 'geneva_drive_flow_keys';

/** What a transactional step's end fails with, in its error's message, when its rows moved on (endAndCommit). */
const REFUSED_END = 'geneva-drive: the rows moved on';

/** The end's own refusal (invalid_text_representation of REFUSED_END), not an error of anything else in its message. */
function isRefusedEnd(error: unknown): boolean {
  const driverError = (error as { driverError?: { code?: string; message?: string } }).driverError;
  return driverError?.code === '22P02' && (driverError.message ?? '').includes(REFUSED_END);
}

/**
 * The values of a statement as the arguments of EXECUTE: each as the text the driver sends it as
 * (a date as its instant, the columns being timestamptz), quoted; undefined when one has no such
 * form here (the statement then goes with its values as parameters).
 */
function executeArguments(values: unknown[]): string | undefined {
  const args: string[] = [];
  for (const value of values) {
    // A NUL ends a message of the simple protocol; a year past 9999 has no ISO form PostgreSQL reads.
    if (typeof value === 'string' && value.includes('\0')) return undefined;
    if (value === null || value === undefined) args.push('NULL');
    else if (value instanceof Date && value.getUTCFullYear() >= 1 && value.getUTCFullYear() <= 9999) args.push(sqlLiteral(value.toISOString()));
    else if (typeof value === 'boolean') args.push(sqlLiteral(String(value)));
    else if (isSqlLiteral(value)) args.push(sqlLiteral(String(value)));
    else return undefined;
  }
  return args.join(', ');
}

/** Whether {@link sqlLiteral} writes `value`: a finite number, a bigint or a string. */
function isSqlLiteral(value: unknown): value is number | bigint | string {
  return (typeof value === 'number' && Number.isFinite(value)) || typeof value === 'bigint' || typeof value === 'string';
}

/**
 * A number or a string as a literal of PostgreSQL's SQL, for a statement of the simple protocol: a
 * string quoted with its quotes doubled, and in the E'' form with its backslashes doubled when it has
 * any, so that it reads the same whatever `standard_conforming_strings` says. Anything else is refused.
 */
export function sqlLiteral(value: unknown): string {
  if (!isSqlLiteral(value)) throw new TypeError(`geneva-drive: no SQL literal for a ${typeof value}`);
  if (typeof value !== 'string') return String(value);
  const quoted = `'${value.replace(/'/g, "''")}'`;
  return value.includes('\\') ? ` E${quoted.replace(/\\/g, '\\\\')}` : quoted;
}
