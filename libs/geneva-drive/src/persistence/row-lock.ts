import type { EntityManager, EntityTarget, ObjectLiteral } from 'typeorm';
import { holdsSqliteWriteLock } from './transaction-runner.js';

/**
 * Reads a row under an exclusive lock held until the transaction ends. PostgreSQL and MySQL take
 * `SELECT ... FOR UPDATE`. SQLite has no row locks, only the database write lock: the engine's own
 * transactions hold it from `BEGIN IMMEDIATE`; in a caller's transaction a no-op UPDATE of the row
 * takes it before the read.
 */
export async function lockRow<T extends ObjectLiteral>(manager: EntityManager, target: EntityTarget<T>, id: string): Promise<T | null> {
  if (isSqlite(manager)) {
    if (!holdsSqliteWriteLock(manager)) {
      const table = manager.connection.getMetadata(target).tableName;
      await manager.query(`UPDATE "${table}" SET "id" = "id" WHERE "id" = ?`, [id]);
    }
    return manager.findOne(target, { where: { id } as never });
  }
  return manager.createQueryBuilder(target, 'row').setLock('pessimistic_write').where('row.id = :id', { id }).getOne();
}

export function isMysqlFamily(manager: EntityManager): boolean {
  const type = manager.connection.options.type;
  return type === 'mysql' || type === 'mariadb';
}

export function isSqlite(manager: EntityManager): boolean {
  const type = manager.connection.options.type;
  return type === 'better-sqlite3' || type === 'sqljs';
}

/**
 * Lock options that make a read see the latest committed rows. Needed on MySQL/MariaDB, where a
 * plain SELECT under REPEATABLE READ reads the transaction's snapshot — which, inside a caller's
 * transaction, may predate the workflow lock we just took and miss a step that parked meanwhile.
 * PostgreSQL's READ COMMITTED and SQLite's database lock already see the latest rows.
 */
export function latestRowsLock(manager: EntityManager): { mode: 'pessimistic_read' | 'pessimistic_write' } | undefined {
  const type = manager.connection.options.type;
  if (type === 'mariadb') return { mode: 'pessimistic_read' }; // LOCK IN SHARE MODE
  // `type: 'mysql'` may be a MariaDB server, whose version number (10.x, 11.x) makes TypeORM write
  // MySQL 8's `FOR SHARE`, a syntax error there (and TypeORM keeps no trace of the server flavour):
  // take FOR UPDATE, valid on both. These reads already run under the workflow row lock.
  if (type === 'mysql') return { mode: 'pessimistic_write' };
  return undefined;
}
