import type { EntityManager } from 'typeorm';
import { HotPathSql, type Statement, type WriteBatch } from './hot-path-sql.js';

/**
 * MySQL/MariaDB: the row updates of a phase in one multi-table UPDATE; inserts and the signal
 * consumption (whose subqueries read the executions table) each in a statement of their own, the
 * consumption first so it reads what PostgreSQL's single statement reads.
 */
export class MysqlHotPathSql extends HotPathSql {
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

  protected fromNothing(): string {
    return ' FROM DUAL';
  }

  async write(manager: EntityManager, batch: WriteBatch): Promise<void> {
    for (const consumption of batch.consumptions) {
      const params: unknown[] = [];
      await manager.query(this.consumptionStatement(consumption, params), params);
    }
    const update = this.mergedUpdate(batch);
    if (update) await manager.query(update.sql, update.params);
    for (const insert of batch.inserts) {
      const params: unknown[] = [];
      const result: { insertId?: number | string } = await manager.query(this.insertStatement(insert, params, false), params);
      if (insert.row.id == null) insert.inserted(String(result.insertId));
    }
  }

  /** `UPDATE t0 u0, t1 u1 SET u0.a = ?, u1.b = ? WHERE u0.id = ? AND u1.id = ?`: one round trip for every row. */
  private mergedUpdate(batch: WriteBatch): Statement | null {
    const targets: string[] = [];
    const sets: string[] = [];
    const wheres: string[] = [];
    const setParams: unknown[] = [];
    const whereParams: unknown[] = [];
    batch.updates.forEach((update, index) => {
      const columns = update.codec.writable(update.changes, 'update');
      if (columns.length === 0) return;
      const alias = `u${index}`;
      targets.push(`${update.codec.table} ${alias}`);
      for (const { column, value } of columns) {
        sets.push(`${alias}.${column} = ?`);
        setParams.push(value);
      }
      wheres.push(`${alias}.${update.codec.column('id')} = ?`);
      whereParams.push(update.id);
    });
    if (targets.length === 0) return null;
    return { sql: `UPDATE ${targets.join(', ')} SET ${sets.join(', ')} WHERE ${wheres.join(' AND ')}`, params: [...setParams, ...whereParams] };
  }
}
