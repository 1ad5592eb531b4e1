import type { DataSource, EntityManager } from 'typeorm';
import type { Signal } from '../../entities/signal.entity.js';
import type { WorkflowRecord } from '../../entities/workflow.entity.js';
import { isUniqueViolation } from '../unique-violation.js';
import type { StepExecution } from '../../entities/step-execution.entity.js';
import { HotPathSql, type RowUpdate, type SessionBounds, type Statement, type TrailingRead, type WriteBatch } from './hot-path-sql.js';

/** The mysql2 connection behind TypeORM's query runner (mysql2 is an optional peer: only what is called here). */
interface Mysql2Connection {
  execute(sql: string, values: unknown[], callback: (error: Error | null, result: unknown) => void): void;
}

/**
 * MySQL/MariaDB: the row updates of a phase in one multi-table UPDATE; inserts and the signal
 * consumption (whose subqueries read the executions table) each in a statement of their own, the
 * consumption first so it reads what PostgreSQL's single statement reads.
 */
export class MysqlHotPathSql extends HotPathSql {
  constructor(
    dataSource: DataSource,
    /** Server-side prepared statements (GenevaDriveModuleOptions.preparedStatements). */
    private readonly prepares: boolean,
    /** Whether the server bounds a session's statements and idle transactions (see sessionBounds). */
    private readonly boundsSessions: boolean,
  ) {
    super(dataSource);
  }

  /**
   * MariaDB: `max_statement_time` bounds each statement, `idle_transaction_timeout` (whole seconds)
   * each pause between two, by killing the connection, which rolls the transaction back. Set for the
   * step's transaction only: the statement that would be START TRANSACTION turns autocommit off with
   * them, the one that would be COMMIT turns it on again — committing — and restores the server's
   * global values, so no round trip is added. MySQL has no such timeouts.
   */
  sessionBounds(timeoutMs: number): SessionBounds | null {
    if (!this.boundsSessions) return null;
    const seconds = Math.ceil(timeoutMs) / 1000;
    const bounds = `max_statement_time = ${seconds}, idle_transaction_timeout = ${Math.ceil(seconds)}`;
    return {
      begin: `SET SESSION autocommit = 0, ${bounds}`,
      set: `SET SESSION ${bounds}`,
      end: 'SET SESSION autocommit = 1, max_statement_time = DEFAULT, idle_transaction_timeout = DEFAULT',
    };
  }

  /** A server-side prepared statement (see HotPathSql.onConnection), which mysql2 keeps per connection by its text. */
  protected query(manager: EntityManager, sql: string, params: unknown[]): Promise<any> {
    if (!this.prepares) return manager.query(sql, params);
    return this.onConnection(
      manager,
      sql,
      params,
      (connection: Mysql2Connection) => new Promise((resolve, reject) => connection.execute(sql, params, (error, result) => (error ? reject(error) : resolve(result)))),
    );
  }

  protected placeholder(): string {
    return '?';
  }

  protected lockClause(): string {
    return ' FOR UPDATE';
  }

  protected join(): string {
    return 'STRAIGHT_JOIN';
  }

  protected readonly returning = false;

  /**
   * A plain INSERT: a redelivery's duplicate key fails that statement alone (MySQL rolls back the
   * statement, not the transaction), so neither the engine's nor a caller's transaction is harmed.
   * (`ON DUPLICATE KEY` cannot tell a redelivery from a new row, mysql2 counting found rows.)
   */
  async insertSignal(manager: EntityManager, signal: Signal, withWaiting: boolean): Promise<{ inserted: boolean; waiting: StepExecution[] }> {
    try {
      return await super.insertSignal(manager, signal, withWaiting);
    } catch (error) {
      if (signal.idempotencyKey !== null && isUniqueViolation(error)) return { inserted: false, waiting: [] };
      throw error;
    }
  }

  protected insertIgnoringDuplicate(signal: Signal, params: unknown[]): string {
    return this.insertStatement({ codec: this.signals, row: signal, inserted: () => undefined }, params, false);
  }

  /**
   * The workflow row is read first (the left side of the join) and locked, then its parked
   * executions by the same locking read, which reads the latest committed rows: the same rows and
   * locks as reading them in a statement of their own.
   */
  async lockForSignal(manager: EntityManager, workflowId: string): Promise<{ workflow: WorkflowRecord; waiting?: StepExecution[] } | null> {
    const e = this.executions;
    const w = this.workflows;
    const rows: Array<Record<string, unknown>> = await this.query(
      manager,
      `SELECT ${w.selectList('w')}, ${e.selectList('e')} FROM ${w.table} w LEFT JOIN ${e.table} e${this.waitingIndexHint()} ` +
        `ON e.${e.column('workflowId')} = w.${w.column('id')} AND e.${e.column('state')} = 'waiting' WHERE w.${w.column('id')} = ? ` +
        `ORDER BY e.${e.column('createdAt')}, e.${e.column('id')} FOR UPDATE`,
      [workflowId],
    );
    if (rows.length === 0) return null;
    const waiting = rows.filter((row) => row.e_id !== null && row.e_id !== undefined).map((row) => e.fromRow(row, 'e'));
    return { workflow: w.fromRow(rows[0], 'w'), waiting };
  }

  /** FOR UPDATE, valid on MySQL and MariaDB alike; the rows read are already ours under the workflow lock. */
  protected latestRowsClause(): string {
    return ' FOR UPDATE';
  }

  /**
   * The locking read must lock this workflow's rows only. Left to itself, MySQL/MariaDB may scan the
   * (state, scheduled_for) index instead and lock every parked execution of every workflow, with the
   * gaps between them: two deliveries to two workflows then deadlock as each moves its row out of
   * the other's locked range.
   */
  protected waitingIndexHint(): string {
    return ' USE INDEX (geneva_drive_step_executions_workflow_state)';
  }

  protected fromNothing(): string {
    return ' FROM DUAL';
  }

  async write(manager: EntityManager, batch: WriteBatch, then?: TrailingRead): Promise<Array<Record<string, unknown>>> {
    for (const consumption of batch.consumptions) {
      const params: unknown[] = [];
      await this.query(manager, this.consumptionStatement(consumption, params), params);
    }
    for (const update of this.mergedUpdates(batch)) await this.query(manager, update.sql, update.params);
    for (const insert of batch.inserts) {
      const params: unknown[] = [];
      const result: { insertId?: number | string } = await this.query(manager, this.insertStatement(insert, params, false), params);
      if (insert.row.id == null) insert.inserted(String(result.insertId));
    }
    return then ? this.read(manager, then) : [];
  }

  /**
   * `UPDATE t0 u0, t1 u1 SET u0.a = ?, u1.b = ? WHERE u0.id = ? AND u1.id = ?`: one round trip for
   * every row, or for every {@link MAX_JOINED_TABLES} rows (each row is a table of the statement's join).
   */
  private mergedUpdates(batch: WriteBatch): Statement[] {
    const updates = batch.updates
      .map((update) => ({ update, columns: update.codec.writable(update.changes, 'update') }))
      .filter(({ columns }) => columns.length > 0);
    const statements: Statement[] = [];
    for (let start = 0; start < updates.length; start += MAX_JOINED_TABLES) statements.push(mergedUpdate(updates.slice(start, start + MAX_JOINED_TABLES)));
    return statements;
  }
}

/** How many tables MySQL and MariaDB join in one statement (ER_TOO_MANY_TABLES beyond). */
const MAX_JOINED_TABLES = 61;

function mergedUpdate(updates: Array<{ update: RowUpdate; columns: Array<{ column: string; value: unknown }> }>): Statement {
  const targets: string[] = [];
  const sets: string[] = [];
  const wheres: string[] = [];
  const setParams: unknown[] = [];
  const whereParams: unknown[] = [];
  updates.forEach(({ update, columns }, index) => {
    const alias = `u${index}`;
    targets.push(`${update.codec.table} ${alias}`);
    for (const { column, value } of columns) {
      sets.push(`${alias}.${column} = ?`);
      setParams.push(value);
    }
    wheres.push(`${alias}.${update.codec.column('id')} = ?`);
    whereParams.push(update.id);
  });
  return { sql: `UPDATE ${targets.join(', ')} SET ${sets.join(', ')} WHERE ${wheres.join(' AND ')}`, params: [...setParams, ...whereParams] };
}

/** MySQL/MariaDB: whether `table` has the index `index` (USE INDEX of a missing index is an error there). */
export async function mysqlHasIndex(manager: EntityManager, table: string, index: string): Promise<boolean> {
  const rows: unknown[] = await manager.query('SELECT 1 FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND INDEX_NAME = ? LIMIT 1', [table, index]);
  return rows.length > 0;
}

