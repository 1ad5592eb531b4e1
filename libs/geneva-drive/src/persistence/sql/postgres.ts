import { createHash } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import type { Signal } from '../../entities/signal.entity.js';
import type { StepExecution } from '../../entities/step-execution.entity.js';
import type { WorkflowRecord } from '../../entities/workflow.entity.js';
import { HotPathSql, type HeroRow, type TrailingRead, type WriteBatch } from './hot-path-sql.js';

/** What the pg driver's client answers a query with (pg is an optional peer: only what is read here). */
interface PgClient {
  query(config: { name: string; text: string; values: unknown[] }): Promise<{ command: string; rows: unknown[]; rowCount: number | null }>;
}

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

  /**
   * A named prepared statement (see HotPathSql.onConnection): PostgreSQL's parsing and planning of
   * each statement was half of its CPU per step. As TypeORM's query(), UPDATE and DELETE answer
   * [rows, count].
   */
  protected query(manager: EntityManager, sql: string, params: unknown[]): Promise<any> {
    const name = this.nameOf(sql);
    if (name === undefined) return manager.query(sql, params);
    return this.onConnection(manager, sql, params, async (client: PgClient) => {
      const result = await client.query({ name, text: sql, values: params });
      return result.command === 'UPDATE' || result.command === 'DELETE' ? [result.rows, result.rowCount] : result.rows;
    });
  }

  private nameOf(sql: string): string | undefined {
    if (!this.prepares) return undefined;
    let name = this.names.get(sql);
    if (name === undefined && this.names.size < MAX_PREPARED) {
      name = `geneva_drive_${createHash('sha1').update(sql).digest('hex').slice(0, 20)}`;
      this.names.set(sql, name);
    }
    return name;
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
        `ON e.${e.column('workflowId')} = ${this.bind(params, signal.workflowId)} AND e.${e.column('state')} = 'waiting' ORDER BY e.${e.column('createdAt')}, e.${e.column('id')}`,
      params,
    );
    if (rows.length === 0) return { inserted: false, waiting: [] };
    signal.id = String(rows[0].signal_id);
    return { inserted: true, waiting: rows.filter((row) => row.e_id !== null && row.e_id !== undefined).map((row) => e.fromRow(row, 'e')) };
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
      `SELECT w.${this.workflows.column('id')}, ${values} FROM w RETURNING ${this.executions.column('id')}`;
    const rows: Array<{ w: unknown; e: unknown }> = await this.query(
      manager,
      `WITH w AS (${insertWorkflow}), e AS (${insertExecution}) SELECT (SELECT * FROM w) AS w, (SELECT * FROM e) AS e`,
      params,
    );
    if (rows[0].w === null) return false;
    workflow.id = String(rows[0].w);
    execution.workflowId = workflow.id;
    execution.id = String(rows[0].e);
    return true;
  }

  async write(manager: EntityManager, batch: WriteBatch, then?: TrailingRead): Promise<Array<Record<string, unknown>>> {
    const params: unknown[] = [];
    const bind = (value: unknown) => this.bind(params, value);
    const parts: string[] = [];
    for (const consumption of batch.consumptions) parts.push(this.consumptionStatement(consumption, params));
    const updated: string[] = [];
    for (const update of batch.updates) {
      const sql = this.updateStatement(update, params);
      if (sql) updated.push(`p${parts.push(`${sql} RETURNING 1`) - 1}`);
    }
    if (parts.length === 0 && batch.inserts.length === 0) return then ? this.query(manager, then.sql(bind), params) : [];
    if (parts.length === 0 && batch.inserts.length === 1 && !then) {
      const rows: Array<Record<string, unknown>> = await this.query(manager, this.insertStatement(batch.inserts[0], params, true), params);
      batch.inserts[0].inserted(String(Object.values(rows[0])[0]));
      return [];
    }
    // Sub-statements run in no set order, and a unique index is checked row by row: an insert reads
    // the updates' counts so that it runs after them (an execution leaves the active state first).
    const after = updated.length === 0 ? undefined : updated.map((name) => `(SELECT count(*) FROM ${name}) AS c${name}`).join(', ');
    const inserted = batch.inserts.map((insert) => ({ insert, name: `p${parts.push(this.insertStatement(insert, params, true, after)) - 1}` }));
    const ids = inserted.map(({ name }) => `(SELECT * FROM ${name}) AS ${name}`);
    // The trailing read sees the rows as they were before the statement: it must not read what the batch writes.
    const select = then
      ? `SELECT ${[...ids, 'r.*'].join(', ')} FROM (SELECT 1) AS one LEFT JOIN (${then.sql(bind)}) AS r ON true`
      : `SELECT ${ids.length === 0 ? '1' : ids.join(', ')}`;
    const rows: Array<Record<string, unknown>> = await this.query(manager, `WITH ${parts.map((sql, index) => `p${index} AS (${sql})`).join(', ')} ${select}`, params);
    for (const { insert, name } of inserted) insert.inserted(String(rows[0][name]));
    return rows;
  }
}
