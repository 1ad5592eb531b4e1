import { QueryRunnerProviderAlreadyReleasedError, type DataSource, type EntityManager, type QueryRunner } from 'typeorm';
import { CommitOutcomeUnknownError } from '../errors/commit-outcome-unknown.error.js';
import { NotInitialisedError } from '../errors/not-initialised.error.js';
import { AfterCommitSubscriber } from './after-commit.js';
import { isStaleStatement } from './stale-statement.js';

const DEADLOCK_TRIES = 4;
const CONNECTION_TRIES = 5;
/** First pause after a lost connection; doubled on each try (50, 100, 200, 400 ms, plus jitter). */
const CONNECTION_BACKOFF_MS = 50;

/**
 * Whether the engine may begin and commit a transaction of its own with messages of its own (a
 * transactional step's: StepTransaction), skipping TypeORM's startTransaction and commitTransaction:
 * the DataSource sets no isolation level, which startTransaction would, and no subscriber but the
 * engine's after-commit one listens to transaction events, which would run at the wrong moment or in
 * the wrong transaction (after a COMMIT whose message also began the next one).
 */
export function ownsTransactionEvents(dataSource: DataSource): boolean {
  if ((dataSource.options as { isolationLevel?: string }).isolationLevel) return false;
  const events = ['beforeTransactionStart', 'afterTransactionStart', 'beforeTransactionCommit', 'afterTransactionCommit', 'beforeTransactionRollback', 'afterTransactionRollback'] as const;
  return dataSource.subscribers.every((subscriber) => subscriber instanceof AfterCommitSubscriber || events.every((event) => typeof subscriber[event] !== 'function'));
}

/**
 * TypeORM's bookkeeping of a COMMIT the engine sent itself (HotPathSql.endAndCommit), as its
 * commitTransaction does once its own COMMIT answered: the runner out of its transaction, then the
 * event (after-commit callbacks start on it).
 */
export async function committedOutside(runner: QueryRunner): Promise<void> {
  Object.assign(runner, { isTransactionActive: false, transactionDepth: 0 });
  await runner.broadcaster.broadcast('AfterTransactionCommit');
}

/** A transaction the database chose as a deadlock victim (PostgreSQL 40P01, MySQL/MariaDB 1213). */
export function isDeadlock(error: unknown): boolean {
  const driverError = (error as { driverError?: { code?: string; errno?: number } })?.driverError;
  return driverError?.code === '40P01' || driverError?.code === 'ER_LOCK_DEADLOCK' || driverError?.errno === 1213;
}

const CONNECTION_CODES = new Set([
  // Node sockets
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTCONN',
  // PostgreSQL: admin_shutdown (pg_terminate_backend), crash_shutdown, cannot_connect_now (class 08 below)
  '57P01',
  '57P02',
  '57P03',
  // mysql2: the server closed the connection, KILL CONNECTION, server shutting down
  'PROTOCOL_CONNECTION_LOST',
  'ER_CONNECTION_KILLED',
  'ER_SERVER_SHUTDOWN',
]);
/** MySQL/MariaDB: server shutdown (1053), connection killed (1927), server gone away (2006), lost during query (2013). */
const CONNECTION_ERRNOS = new Set([1053, 1927, 2006, 2013]);
/** Driver errors that carry no code: the pg client's dead socket, mysql2's closed connection. */
const CONNECTION_MESSAGE = /Connection terminated|connection error and is not queryable|Can't add new command when connection is in closed state/i;

/**
 * The connection to the database was lost (reset, terminated by the server or an administrator, the
 * server going down): the transaction on it did not commit, unless the loss came during COMMIT. A
 * query runner released under the engine's feet means the same (TypeORM releases a PostgreSQL
 * runner whose connection reported an error).
 */
export function isConnectionError(error: unknown): boolean {
  for (const candidate of [error, (error as { driverError?: unknown })?.driverError]) {
    if (typeof candidate !== 'object' || candidate === null) continue;
    const { code, errno, message, name } = candidate as { code?: unknown; errno?: unknown; message?: unknown; name?: unknown };
    if (typeof code === 'string' && (CONNECTION_CODES.has(code) || /^08[0-9A-Z]{3}$/.test(code))) return true;
    if (typeof errno === 'number' && CONNECTION_ERRNOS.has(errno)) return true;
    if (typeof message === 'string' && CONNECTION_MESSAGE.test(message)) return true;
    if (name === 'QueryRunnerAlreadyReleasedError' || name === 'QueryRunnerProviderAlreadyReleasedError') return true;
  }
  return false;
}

/** How the engine's own transaction may be run again after a transient error. */
export interface TransactionOptions {
  /**
   * The work re-checks under its row locks that what it is about to change is still as it found it
   * (an execution still `scheduled`, still `in_progress`...), so running it again after a COMMIT that
   * did commit changes nothing a second time. Only such work is retried when the connection is lost
   * during COMMIT, whose outcome the client cannot know; any other work only when the loss came
   * before COMMIT (the server rolls back an uncommitted transaction whose connection is gone).
   */
  idempotent?: boolean;
  /** Never run the work again: the caller decides what a transient error means (a transactional step's body must not re-run behind its back). */
  once?: boolean;
  /**
   * Sends the BEGIN itself, with what rides on it in the same round trip (a transactional step's time
   * bounds and hero read on PostgreSQL: WorkflowStore.stepTransaction). TypeORM is told the
   * transaction is open before it goes out, so a failure of any part of it rolls back.
   */
  begin?: (runner: QueryRunner) => Promise<void>;
  /**
   * Sends the COMMIT itself, with what rides on it (a transactional step's end on PostgreSQL:
   * WorkflowStore.stepTransaction), and does TypeORM's bookkeeping of it; only with `begin`.
   */
  commit?: (runner: QueryRunner) => Promise<void>;
  /** Rolls back in its stead, undoing what `begin` set on the session too (MariaDB's bounds: WorkflowStore.stepTransaction); run even when TypeORM counts no open transaction. */
  rollback?: (runner: QueryRunner) => Promise<void>;
  /**
   * A runner whose transaction is already open (begun by the COMMIT of the one before it on the same
   * connection: StepTransaction.continueOn): the work runs in it.
   */
  runner?: QueryRunner;
}

/**
 * The driver refused to send the statement at all, its connection already closed (TypeORM's released
 * runner; node-postgres' and mysql2's closed connections): the server never saw it.
 */
export function neverSent(error: unknown): boolean {
  for (const candidate of [error, (error as { driverError?: unknown })?.driverError]) {
    const { name, message } = (candidate ?? {}) as { name?: unknown; message?: unknown };
    if (name === 'QueryRunnerAlreadyReleasedError' || name === 'QueryRunnerProviderAlreadyReleasedError') return true;
    if (typeof message === 'string' && /is not queryable|Can't add new command when connection is in closed state/i.test(message)) return true;
  }
  return false;
}

/** SQLite transactions this runner began with `BEGIN IMMEDIATE`: they already hold the database write lock. */
const immediateRunners = new WeakSet<QueryRunner>();
/** The query runners of the transactions the engine opened itself (not a caller's, joined through `manager`). */
const ownRunners = new WeakSet<QueryRunner>();

/**
 * Whether `manager` runs a transaction the engine opened itself, which it may roll back and run again
 * whole: a statement failing in it need not reach a caller's transaction, which the failure would abort.
 */
export function inOwnTransaction(manager: EntityManager): boolean {
  return manager.queryRunner !== undefined && ownRunners.has(manager.queryRunner);
}

export function holdsSqliteWriteLock(manager: EntityManager): boolean {
  return manager.queryRunner !== undefined && immediateRunners.has(manager.queryRunner);
}

/**
 * Runs the engine's transactions. Joins a caller's open transaction (passed as `manager`), otherwise
 * opens one, and runs it again (bounded, with backoff) when it was a deadlock victim or lost its
 * connection. On SQLite, TypeORM shares one connection between all query runners, so the engine's
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
    if (!this.bound) throw new NotInitialisedError();
    return this.bound;
  }

  async run<T>(work: (manager: EntityManager) => Promise<T>, manager?: EntityManager, options: TransactionOptions = {}): Promise<T> {
    if (manager?.queryRunner?.isTransactionActive) return work(manager);
    if (manager && manager.connection !== this.dataSource) {
      throw new TypeError('geneva-drive: the manager passed in belongs to another DataSource than the one geneva-drive is configured with');
    }
    if (!this.sqlite) return this.withRetry(work, options);
    return this.inTurn(() => this.runImmediate(work));
  }

  /** SQLite: runs `transaction` after the engine's transactions queued before it, and before those queued after. */
  private inTurn<T>(transaction: () => Promise<T>): Promise<T> {
    const result = this.sqliteQueue.then(transaction);
    this.sqliteQueue = result.catch(() => undefined);
    return result;
  }

  /**
   * Runs `read` on one snapshot of the database, for reads that must show one moment together (an
   * execution beside the signal its end consumed): PostgreSQL and MySQL/MariaDB in a REPEATABLE READ
   * transaction; SQLite in a deferred transaction taking its turn among the engine's (above), since
   * on its one connection the reads would otherwise run inside whichever of them is open, and see
   * what it has not committed. Deferred, it takes no write lock: another process on the file (the
   * CLI) reads beside the application's writers. Not from inside an engine transaction on SQLite:
   * its turn would come after that transaction, which waits for it.
   */
  snapshot<T>(read: (manager: EntityManager) => Promise<T>): Promise<T> {
    if (!this.sqlite) return this.dataSource.transaction('REPEATABLE READ', read);
    return this.inTurn(() => this.dataSource.transaction(read));
  }

  /**
   * A deadlock victim is rolled back whole (nothing written, its after-commit jobs dropped), so the
   * engine's own transactions simply run again; so is a transaction whose connection was lost before
   * COMMIT. A loss during COMMIT may follow a commit that did happen: see TransactionOptions. A
   * caller's transaction is the caller's to retry.
   */
  private async withRetry<T>(work: (manager: EntityManager) => Promise<T>, options: TransactionOptions): Promise<T> {
    const deadlockTries = options.once ? 1 : DEADLOCK_TRIES;
    const connectionTries = options.once ? 1 : CONNECTION_TRIES;
    for (let tries = 1; ; tries++) {
      let committing = false;
      let runner: QueryRunner | undefined;
      try {
        return await this.transaction(options, async (manager) => {
          runner = manager.queryRunner!;
          ownRunners.add(runner);
          const result = await work(manager);
          // COMMIT goes out only on a live connection: one that died after the work's last statement
          // leaves an outcome known for certain (rolled back), not one lost with COMMIT's answer.
          if (manager.queryRunner!.isReleased) throw new QueryRunnerProviderAlreadyReleasedError();
          committing = true;
          return result;
        });
      } catch (error) {
        // Refused before it was sent: COMMIT, not a query run after it (an afterTransactionCommit subscriber's).
        if (committing && neverSent(error) && runner?.isTransactionActive) committing = false;
        if (isDeadlock(error) && tries < deadlockTries) {
          await pause(5 + Math.random() * 20 * tries);
        } else if (isStaleStatement(error) && tries < deadlockTries) {
          // A prepared statement the server refused after a migration: prepared afresh on the next try.
        } else if (isConnectionError(error) && tries < connectionTries && (!committing || options.idempotent === true)) {
          // A COMMIT whose answer was lost may have committed: its jobs go out all the same. The
          // retry finds its own rows done, but not the rows of other workflows it wrote (a parent a
          // child's end woke, the waiter a freed slot woke), whose jobs only these are.
          if (committing && runner) AfterCommitSubscriber.of(this.dataSource)?.commitOutcomeUnknown(runner);
          await pause(CONNECTION_BACKOFF_MS * 2 ** (tries - 1) * (1 + Math.random()));
        } else if (isConnectionError(error) && committing && options.idempotent !== true) {
          if (runner) AfterCommitSubscriber.of(this.dataSource)?.commitOutcomeUnknown(runner);
          throw new CommitOutcomeUnknownError(error);
        } else {
          throw error;
        }
      }
    }
  }

  /**
   * TypeORM's DataSource.transaction, or one begun and committed as `options` say. A runner whose
   * COMMIT began the next transaction on it (StepTransaction.continueOn) is not released: that
   * transaction's work releases it.
   */
  private async transaction<T>({ begin, commit, rollback, runner: open }: TransactionOptions, work: (manager: EntityManager) => Promise<T>): Promise<T> {
    if (!begin && !commit && !open) return this.dataSource.transaction(work);
    const runner = open ?? this.dataSource.createQueryRunner();
    // Before `begin`, whose message may carry the transaction's first statements (prepared: see inOwnTransaction).
    ownRunners.add(runner);
    let handedOn = false;
    try {
      if (begin && !open) {
        // As runImmediate: TypeORM then treats it as a transaction it began itself.
        Object.assign(runner, { isTransactionActive: true, transactionDepth: 1 });
        await begin(runner);
      } else if (!open) {
        await runner.startTransaction();
      }
      const result = await work(runner.manager);
      await (commit ? commit(runner) : runner.commitTransaction());
      handedOn = runner.isTransactionActive;
      return result;
    } catch (error) {
      // A failed rollback (a dead connection) leaves the server to roll back; the work's error is the one to report.
      // `rollback` undoes what `begin` set on the session too, so it runs whatever TypeORM counts.
      if (rollback) await rollback(runner).catch(() => undefined);
      else if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
      throw error;
    } finally {
      if (!handedOn) await runner.release();
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
    ownRunners.add(runner);
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

export function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
