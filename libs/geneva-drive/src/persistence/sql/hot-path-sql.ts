import type { DataSource, EntityManager, ObjectLiteral } from 'typeorm';
import { Signal } from '../../entities/signal.entity.js';
import { StepExecution } from '../../entities/step-execution.entity.js';
import { WorkflowRecord } from '../../entities/workflow.entity.js';
import { ACTIVE_EXECUTION_STATES } from '../../state/step-execution-state.js';
import { EntityCodec } from './entity-codec.js';

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
  private lockSql: string | undefined;

  constructor(protected readonly dataSource: DataSource) {
    this.workflows = new EntityCodec(dataSource, WorkflowRecord);
    this.executions = new EntityCodec(dataSource, StepExecution);
    this.signals = new EntityCodec(dataSource, Signal);
  }

  /** The placeholder of the `index`-th (1-based) parameter. */
  protected abstract placeholder(index: number): string;

  /** Takes the rows' locks for `lockStep` (PostgreSQL and MySQL: FOR UPDATE; SQLite: the write lock). */
  protected abstract lockClause(): string;

  /** The join of the locking read (MySQL reads the workflow first, in the order every writer locks). */
  protected join(): string {
    return 'JOIN';
  }

  /** Runs the batch: one statement per write unless the dialect can merge them. */
  abstract write(manager: EntityManager, batch: WriteBatch): Promise<void>;

  /** Makes sure `manager`'s transaction holds what `lockStep` relies on (SQLite: the write lock). */
  protected async beforeLock(_manager: EntityManager, _workflowId: string): Promise<void> {}

  /**
   * Reads the workflow and its execution under their row locks, in one statement. Null when either
   * is gone or the execution is not the workflow's.
   */
  async lockStep(manager: EntityManager, workflowId: string, executionId: string): Promise<{ workflow: WorkflowRecord; execution: StepExecution } | null> {
    await this.beforeLock(manager, workflowId);
    this.lockSql ??=
      `SELECT ${this.workflows.selectList('w')}, ${this.executions.selectList('e')} FROM ${this.workflows.table} w ${this.join()} ${this.executions.table} e ` +
      `ON e.${this.executions.column('id')} = ${this.placeholder(2)} AND e.${this.executions.column('workflowId')} = w.${this.workflows.column('id')} ` +
      `WHERE w.${this.workflows.column('id')} = ${this.placeholder(1)}${this.lockClause()}`;
    const rows: Array<Record<string, unknown>> = await manager.query(this.lockSql, [workflowId, executionId]);
    if (rows.length === 0) return null;
    return { workflow: this.workflows.fromRow(rows[0], 'w'), execution: this.executions.fromRow(rows[0], 'e') };
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
      return `s.${s.column('state')} = 'claimed' AND NOT EXISTS (${unresolved})`;
    };
    return (
      `UPDATE ${s.table} AS s SET ${s.column('consumedAt')} = CASE WHEN ${settles()} THEN ${now()} ELSE s.${s.column('consumedAt')} END, ` +
      `${s.column('state')} = CASE WHEN ${settles()} THEN 'consumed' ELSE s.${s.column('state')} END, ` +
      `${s.column('consumed')} = s.${s.column('consumed')} + 1, ${s.column('updatedAt')} = ${now()} ` +
      `WHERE s.${s.column('id')} = ${this.bind(params, consumption.signalId)} AND s.${s.column('state')} <> 'consumed'`
    );
  }

  protected bind(params: unknown[], value: unknown): string {
    params.push(value);
    return this.placeholder(params.length);
  }
}
