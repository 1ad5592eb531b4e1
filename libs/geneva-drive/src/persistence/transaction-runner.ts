import type { DataSource, EntityManager } from 'typeorm';
import { isSqlite } from './row-lock.js';

/**
 * Runs the engine's transactions. Joins a caller's open transaction (passed as `manager`), otherwise
 * opens one. On SQLite every engine transaction in this process is serialised: TypeORM shares one
 * connection there, so two interleaved transactions would otherwise nest on it.
 */
export class TransactionRunner {
  private sqliteQueue: Promise<unknown> = Promise.resolve();

  constructor(readonly dataSource: DataSource) {}

  async run<T>(work: (manager: EntityManager) => Promise<T>, manager?: EntityManager): Promise<T> {
    if (manager?.queryRunner?.isTransactionActive) return work(manager);
    if (manager && manager.connection !== this.dataSource) {
      throw new TypeError('geneva-drive: the manager passed in belongs to another DataSource than the one geneva-drive is configured with');
    }
    if (!isSqlite(this.dataSource.manager)) return this.dataSource.transaction(work);
    const result = this.sqliteQueue.then(() => this.dataSource.transaction(work));
    this.sqliteQueue = result.catch(() => undefined);
    return result;
  }
}
