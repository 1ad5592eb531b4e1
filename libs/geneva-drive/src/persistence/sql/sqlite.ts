import type { EntityManager } from 'typeorm';
import { holdsSqliteWriteLock } from '../transaction-runner.js';
import { HotPathSql, type TrailingRead, type WriteBatch } from './hot-path-sql.js';

/**
 * SQLite: no row locks — the engine's transactions hold the database write lock from BEGIN
 * IMMEDIATE — and statements that cost no round trip, so each write is a statement of its own.
 */
export class SqliteHotPathSql extends HotPathSql {
  protected placeholder(): string {
    return '?';
  }

  protected lockClause(): string {
    return '';
  }

  /** In a caller's transaction, a no-op UPDATE of the workflow takes the write lock before the read. */
  protected async beforeLock(manager: EntityManager, workflowId: string): Promise<void> {
    if (holdsSqliteWriteLock(manager)) return;
    await this.query(manager, `UPDATE ${this.workflows.table} SET ${this.workflows.column('id')} = ${this.workflows.column('id')} WHERE ${this.workflows.column('id')} = ?`, [workflowId]);
  }

  async write(manager: EntityManager, batch: WriteBatch, then?: TrailingRead): Promise<Array<Record<string, unknown>>> {
    for (const consumption of batch.consumptions) {
      const params: unknown[] = [];
      await this.query(manager, this.consumptionStatement(consumption, params), params);
    }
    for (const update of batch.updates) {
      const params: unknown[] = [];
      const sql = this.updateStatement(update, params);
      if (sql) await this.query(manager, sql, params);
    }
    for (const insert of batch.inserts) {
      const params: unknown[] = [];
      const rows: Array<Record<string, unknown>> = await this.query(manager, this.insertStatement(insert, params, true), params);
      if (insert.row.id == null) insert.inserted(String(Object.values(rows[0])[0]));
    }
    return then ? this.read(manager, then) : [];
  }
}
