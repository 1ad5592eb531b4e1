import type { DataSource, EntityManager, QueryRunner } from 'typeorm';

const DEADLOCK_TRIES = 4;

/** A transaction the database chose as a deadlock victim (PostgreSQL 40P01, MySQL/MariaDB 1213). */
function isDeadlock(error: unknown): boolean {
  const driverError = (error as { driverError?: { code?: string; errno?: number } })?.driverError;
  return driverError?.code === '40P01' || driverError?.code === 'ER_LOCK_DEADLOCK' || driverError?.errno === 1213;
}

/** SQLite transactions this runner began with `BEGIN IMMEDIATE`: they already hold the database write lock. */
const immediateRunners = new WeakSet<QueryRunner>();

export function holdsSqliteWriteLock(manager: EntityManager): boolean {
  return manager.queryRunner !== undefined && immediateRunners.has(manager.queryRunner);
}

/**
 * Runs the engine's transactions. Joins a caller's open transaction (passed as `manager`), otherwise
 * opens one. On SQLite, TypeORM shares one connection between all query runners, so the engine's
 * transactions in this process are serialised here, and each begins IMMEDIATE: it takes the write
 * lock up front, so another process on the same file waits (busy timeout) instead of failing a
 * read-to-write lock upgrade half way through.
 */
export class TransactionRunner {
  private sqliteQueue: Promise<unknown> = Promise.resolve();
  private sqlite = false;
  private bound: DataSource | undefined;

  constructor(dataSource?: DataSource) {
    if (dataSource) this.bind(dataSource);
  }

  /**
   * Sets the engine's DataSource. The module binds it at init, not when its providers are built:
   * its name may come from a `forRootAsync` factory, and a missing one gets a clear error then.
   */
  bind(dataSource: DataSource): void {
    this.bound = dataSource;
    this.sqlite = dataSource.options.type === 'better-sqlite3' || dataSource.options.type === 'sqljs';
  }

  get dataSource(): DataSource {
    if (!this.bound) throw new Error('geneva-drive is not initialised yet: call app.init() (or moduleRef.init()) before using its services');
    return this.bound;
  }

  async run<T>(work: (manager: EntityManager) => Promise<T>, manager?: EntityManager): Promise<T> {
    if (manager?.queryRunner?.isTransactionActive) return work(manager);
    if (manager && manager.connection !== this.dataSource) {
      throw new TypeError('geneva-drive: the manager passed in belongs to another DataSource than the one geneva-drive is configured with');
    }
    if (!this.sqlite) return this.withDeadlockRetry(() => this.dataSource.transaction(work));
    const result = this.sqliteQueue.then(() => this.runImmediate(work));
    this.sqliteQueue = result.catch(() => undefined);
    return result;
  }

  /**
   * A deadlock victim is rolled back whole (nothing written, its after-commit jobs dropped), so the
   * engine's own transactions simply run again. A caller's transaction is the caller's to retry.
   */
  private async withDeadlockRetry<T>(attempt: () => Promise<T>): Promise<T> {
    for (let tries = 1; ; tries++) {
      try {
        return await attempt();
      } catch (error) {
        if (tries >= DEADLOCK_TRIES || !isDeadlock(error)) throw error;
        await new Promise((resolve) => setTimeout(resolve, 5 + Math.random() * 20 * tries));
      }
    }
  }

  private async runImmediate<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    const runner = this.dataSource.createQueryRunner();
    await runner.connect();
    await runner.query('BEGIN IMMEDIATE');
    // Tell TypeORM a transaction is open, so nested transactions become savepoints and
    // commit/rollback (with their subscriber events) work as for one it began itself.
    Object.assign(runner, { isTransactionActive: true, transactionDepth: 1 });
    immediateRunners.add(runner);
    try {
      const result = await work(runner.manager);
      await runner.commitTransaction();
      return result;
    } catch (error) {
      if (runner.isTransactionActive) await runner.rollbackTransaction();
      throw error;
    } finally {
      immediateRunners.delete(runner);
      await runner.release();
    }
  }
}
