/**
 * Bulk rows for the benchmarks, written with multi-row INSERTs (1,000 rows per statement, one
 * transaction per chunk) instead of the API, so 100k parked workflows set up in seconds.
 *
 * A parked workflow is exactly what the engine leaves behind when a `waitFor` step finds no signal
 * (compare `SignalRendezvous.attachOrPark`): the workflow `ready` with `next_step_name` = the step,
 * `current_step_name` and `started_at` null; one execution of that step in state `waiting` with
 * `waiting_since` set and no signal pinned. A finished workflow has one completed execution. Ids
 * are explicit (max + 1 onwards); PostgreSQL's sequences are moved past them afterwards, MySQL and
 * SQLite (AUTOINCREMENT) advance by themselves.
 */
import type { DataSource } from 'typeorm';
import { HERO_TABLE } from './app.js';
import type { DatabaseKind } from './config.js';

const WORKFLOWS = 'geneva_drive_workflows';
const EXECUTIONS = 'geneva_drive_step_executions';
const CHUNK = 1_000;

export class BulkWriter {
  constructor(
    private readonly dataSource: DataSource,
    private readonly kind: DatabaseKind,
  ) {}

  /** Inserts `count` heroes; returns their ids. */
  async insertHeroes(count: number): Promise<number[]> {
    const first = await this.nextId(HERO_TABLE);
    const ids = Array.from({ length: count }, (_, i) => first + i);
    for (let start = 0; start < count; start += CHUNK) {
      const chunk = ids.slice(start, start + CHUNK);
      await this.insert(this.dataSource, HERO_TABLE, ['id', 'label'], chunk.map((id) => [String(id), `'hero-${id}'`]));
    }
    await this.fixSequences([HERO_TABLE]);
    return ids;
  }

  /**
   * Inserts `count` workflows of `type`, each with its own hero, parked on `stepName`; returns the
   * workflow ids.
   */
  insertParked(count: number, type: string, heroType: string, stepName: string, parkedAt: Date): Promise<string[]> {
    return this.insertWorkflows(count, type, heroType, stepName, parkedAt, 'parked');
  }

  /**
   * Inserts `count` workflows of `type` that finished at `finishedAt`, `stepName` their last step
   * (one completed execution each); returns the workflow ids.
   */
  insertFinished(count: number, type: string, heroType: string, stepName: string, finishedAt: Date): Promise<string[]> {
    return this.insertWorkflows(count, type, heroType, stepName, finishedAt, 'finished');
  }

  private async insertWorkflows(count: number, type: string, heroType: string, stepName: string, date: Date, shape: 'parked' | 'finished'): Promise<string[]> {
    const heroIds = await this.insertHeroes(count);
    const firstWorkflow = await this.nextId(WORKFLOWS);
    const firstExecution = await this.nextId(EXECUTIONS);
    const at = this.timestamp(date);
    const parked = shape === 'parked';
    const ids: string[] = [];
    for (let start = 0; start < count; start += CHUNK) {
      const end = Math.min(count, start + CHUNK);
      const workflows: string[][] = [];
      const executions: string[][] = [];
      for (let i = start; i < end; i++) {
        const workflowId = firstWorkflow + i;
        ids.push(String(workflowId));
        workflows.push([
          String(workflowId), this.text(type), this.text(heroType), this.text(String(heroIds[i])), parked ? `'ready'` : `'finished'`,
          'NULL', this.text(stepName), this.boolean(false), parked ? 'NULL' : at, parked ? 'NULL' : at, parked ? 'NULL' : at, at, at,
        ]);
        executions.push([
          String(firstExecution + i), String(workflowId), this.text(stepName), parked ? `'waiting'` : `'completed'`, parked ? 'NULL' : `'success'`,
          at, parked ? 'NULL' : at, parked ? 'NULL' : at, parked ? at : 'NULL', at, at,
        ]);
      }
      await this.dataSource.transaction(async (manager) => {
        const runner = { query: (sql: string) => manager.query(sql) };
        await this.insert(runner, WORKFLOWS, [
          'id', 'type', 'hero_type', 'hero_id', 'state', 'current_step_name', 'next_step_name', 'allow_multiple',
          'started_at', 'transitioned_at', 'finished_at', 'created_at', 'updated_at',
        ], workflows);
        await this.insert(runner, EXECUTIONS, [
          'id', 'workflow_id', 'step_name', 'state', 'outcome', 'scheduled_for', 'completed_at', 'finished_at', 'waiting_since', 'created_at', 'updated_at',
        ], executions);
      });
    }
    await this.fixSequences([WORKFLOWS, EXECUTIONS]);
    return ids;
  }

  /**
   * Refreshes the planner statistics, as autovacuum (PostgreSQL) or InnoDB's automatic statistics
   * (MySQL) would shortly after a bulk load in production. On PostgreSQL it also vacuums away the
   * dead rows the earlier phases left, so autovacuum does not start in the middle of a measurement.
   * SQLite keeps no statistics unless asked: nothing to do.
   */
  async analyze(): Promise<void> {
    const tables = [HERO_TABLE, WORKFLOWS, EXECUTIONS, 'geneva_drive_signals'].map((t) => this.quote(t)).join(', ');
    if (this.kind === 'postgres') await this.dataSource.query(`VACUUM (ANALYZE) ${tables}`);
    if (this.kind === 'mysql') await this.dataSource.query(`ANALYZE TABLE ${tables}`);
  }

  private async insert(runner: { query: (sql: string) => Promise<unknown> }, table: string, columns: string[], rows: string[][]): Promise<void> {
    if (rows.length === 0) return;
    const values = rows.map((row) => `(${row.join(', ')})`).join(',\n');
    await runner.query(`INSERT INTO ${this.quote(table)} (${columns.map((c) => this.quote(c)).join(', ')}) VALUES ${values}`);
  }

  private async nextId(table: string): Promise<number> {
    const rows: Array<{ next: string | number }> = await this.dataSource.query(`SELECT COALESCE(MAX(${this.quote('id')}), 0) + 1 AS ${this.quote('next')} FROM ${this.quote(table)}`);
    return Number(rows[0].next);
  }

  private async fixSequences(tables: string[]): Promise<void> {
    if (this.kind !== 'postgres') return;
    for (const table of tables) {
      await this.dataSource.query(`SELECT setval(pg_get_serial_sequence('${this.quote(table)}', 'id'), (SELECT MAX(id) FROM ${this.quote(table)}))`);
    }
  }

  private quote(identifier: string): string {
    return this.kind === 'mysql' ? `\`${identifier}\`` : `"${identifier}"`;
  }

  /** Only the bench's own constant strings pass through here; quotes are doubled all the same. */
  private text(value: string): string {
    return `'${value.replace(/'/g, "''")}'`;
  }

  private boolean(value: boolean): string {
    if (this.kind === 'postgres') return value ? 'true' : 'false';
    return value ? '1' : '0';
  }

  /** The literal each driver itself writes for a Date: UTC `YYYY-MM-DD HH:MM:SS.mmm` (with the zone on PostgreSQL's timestamptz). */
  private timestamp(date: Date): string {
    const text = date.toISOString().replace('T', ' ').replace('Z', '');
    return this.kind === 'postgres' ? `'${text}+00'` : `'${text}'`;
  }
}
