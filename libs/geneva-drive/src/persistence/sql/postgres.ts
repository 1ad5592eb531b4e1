import type { EntityManager } from 'typeorm';
import type { StepExecution } from '../../entities/step-execution.entity.js';
import type { WorkflowRecord } from '../../entities/workflow.entity.js';
import { HotPathSql, type HeroRow, type WriteBatch } from './hot-path-sql.js';

/**
 * PostgreSQL: every write of a phase in one statement — data-modifying CTEs, each row written once,
 * all reading the snapshot from before the statement (the consumption test skips the consuming
 * step's rows for that reason, on every dialect).
 */
export class PostgresHotPathSql extends HotPathSql {
  protected placeholder(index: number): string {
    return `$${index}`;
  }

  protected lockClause(of?: string): string {
    return of ? ` FOR UPDATE OF ${of}` : ' FOR UPDATE';
  }

  readonly startsInOneStatement = true;

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
    const rows: Array<{ w: unknown; e: unknown }> = await manager.query(
      `WITH w AS (${insertWorkflow}), e AS (${insertExecution}) SELECT (SELECT * FROM w) AS w, (SELECT * FROM e) AS e`,
      params,
    );
    if (rows[0].w === null) return false;
    workflow.id = String(rows[0].w);
    execution.workflowId = workflow.id;
    execution.id = String(rows[0].e);
    return true;
  }

  async write(manager: EntityManager, batch: WriteBatch): Promise<void> {
    const params: unknown[] = [];
    const parts: string[] = [];
    for (const consumption of batch.consumptions) parts.push(this.consumptionStatement(consumption, params));
    const updated: string[] = [];
    for (const update of batch.updates) {
      const sql = this.updateStatement(update, params);
      if (sql) updated.push(`p${parts.push(`${sql} RETURNING 1`) - 1}`);
    }
    if (parts.length === 0 && batch.inserts.length === 1) {
      const rows: Array<Record<string, unknown>> = await manager.query(this.insertStatement(batch.inserts[0], params, true), params);
      batch.inserts[0].inserted(String(Object.values(rows[0])[0]));
      return;
    }
    // Sub-statements run in no set order, and a unique index is checked row by row: an insert reads
    // the updates' counts so that it runs after them (an execution leaves the active state first).
    const after = updated.length === 0 ? undefined : updated.map((name) => `(SELECT count(*) FROM ${name}) AS c${name}`).join(', ');
    const inserted = batch.inserts.map((insert) => ({ insert, name: `p${parts.push(this.insertStatement(insert, params, true, after)) - 1}` }));
    if (parts.length === 0) return;
    if (parts.length === 1) {
      await manager.query(parts[0], params);
      return;
    }
    const ctes = parts.map((sql, index) => `p${index} AS (${sql})`).join(', ');
    const select = inserted.length === 0 ? 'SELECT 1' : `SELECT ${inserted.map(({ name }) => `(SELECT * FROM ${name}) AS ${name}`).join(', ')}`;
    const rows: Array<Record<string, unknown>> = await manager.query(`WITH ${ctes} ${select}`, params);
    for (const { insert, name } of inserted) insert.inserted(String(rows[0][name]));
  }
}
