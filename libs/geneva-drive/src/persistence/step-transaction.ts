import type { EntityManager, QueryRunner } from 'typeorm';
import type { PhaseBatch } from './phase-batch.js';
import type { HotPathSql, SessionBounds } from './sql/hot-path-sql.js';
import { committedOutside, ownsTransactionEvents } from './transaction-runner.js';

/** How a transactional step's transaction begins and commits, and how its body gets the hero. */
export interface StepTransaction {
  /** TransactionOptions.begin, where the dialect begins it itself. */
  begin?: (runner: QueryRunner) => Promise<void>;
  /** TransactionOptions.commit, where the dialect commits it itself. */
  commit?: (runner: QueryRunner) => Promise<void>;
  /** TransactionOptions.rollback, where the dialect must undo what its `begin` set. */
  rollback?: (runner: QueryRunner) => Promise<void>;
  hero(manager: EntityManager): Promise<object | null>;
  /** Whether the step's end went out with the COMMIT: a lost answer then lost the ids of the rows it wrote. */
  endSent: boolean;
  /**
   * Where the dialect can (see `begin`), commits `runner`'s transaction and begins this one on it, in
   * one round trip: the step chained from the finalize of the one before it. 'continued' when it did
   * (the transaction is then `runner`'s: TransactionOptions.runner); 'committed' when only the COMMIT
   * went through (this transaction is to begin as any); false when it sent nothing.
   */
  continueOn(runner: QueryRunner): Promise<'continued' | 'committed' | false>;
  /** The runner {@link continueOn} began the transaction on. */
  runner?: QueryRunner;
}

/** A transactional step's end, sent with its COMMIT, found its rows moved on: nothing was written. */
export class EndRefusedError extends Error {
  constructor() {
    super("The step's end was refused: its workflow or execution moved on while the body ran");
  }
}

/**
 * A transactional step's transaction (WorkflowStore.stepTransaction). Where the dialect sends the
 * transaction's time bounds with its BEGIN (PostgreSQL: HotPathSql.beginStep), the hero read rides on
 * it too when the engine reads that hero itself, and the step's end, its guarded write (kept by the
 * phase: PhaseBatch.endOnCommit), rides on the COMMIT (HotPathSql.endAndCommit). Otherwise the
 * transaction begins and commits as any, and `hero` reads the hero in it. Without `hero`, the bounds
 * alone (a later segment of a resumable step).
 */
export function openStepTransaction(
  sql: HotPathSql,
  phase: PhaseBatch,
  readHero: (manager: EntityManager, heroType: string, heroId: string) => Promise<object | null>,
  timeoutMs: number,
  hero?: { type: string; id: string },
): StepTransaction {
  const codec = hero && sql.heroCodec(hero.type);
  const read = hero && codec && sql.inlines(codec.param(codec.primaryKey, hero.id)) ? sql.heroRead(codec, hero.id) : undefined;
  const readInTransaction = (manager: EntityManager) => (hero ? readHero(manager, hero.type, hero.id) : Promise.resolve(null));
  if (!sql.beginsSteps) {
    const bounds = sql.sessionBounds(timeoutMs);
    return { hero: readInTransaction, endSent: false, continueOn: () => Promise.resolve(false), ...(bounds ? boundedBySession(bounds) : {}) };
  }
  let rows: Array<Record<string, unknown>> | null = null;
  const opening: StepTransaction = {
    begin: async (runner) => {
      if (!ownsTransactionEvents(runner.connection)) {
        // TypeORM's own start (its events, the DataSource's isolation level), then the bounds and the read.
        Object.assign(runner, { isTransactionActive: false, transactionDepth: 0 });
        await runner.startTransaction();
        rows = await sql.beginStep(runner.manager, timeoutMs, read, false);
        return;
      }
      phase.endOnCommit(runner.manager);
      rows = await sql.beginStep(runner.manager, timeoutMs, read);
    },
    commit: async (runner) => {
      const ending = phase.takeEnding(runner.manager);
      if (!ending) return runner.commitTransaction();
      opening.endSent = true;
      const done = await sql.endAndCommit(runner, ending.batch, ending.expected);
      if (done === 'refused') throw new EndRefusedError();
      // The new rows have their ids: their jobs wait for the COMMIT's event (after-commit), or go now.
      await phase.sendJobs(runner.manager, ending.jobs);
      if (done === 'written') return runner.commitTransaction();
      await committedOutside(runner);
    },
    continueOn: async (runner) => {
      if (!ownsTransactionEvents(runner.connection)) return false;
      await runner.broadcaster.broadcast('BeforeTransactionCommit');
      rows = await sql.commitAndBeginStep(runner.manager, timeoutMs, read);
      if (rows === null) {
        await committedOutside(runner);
        return 'committed';
      }
      try {
        await committedOutside(runner);
      } finally {
        // Open again, as `begin` leaves it, whatever the event's callbacks did: it is, on the server.
        Object.assign(runner, { isTransactionActive: true, transactionDepth: 1 });
      }
      phase.endOnCommit(runner.manager);
      opening.runner = runner;
      return 'continued';
    },
    hero: (manager) => (read && rows ? Promise.resolve(sql.heroFrom(codec!, rows)) : readInTransaction(manager)),
    endSent: false,
  };
  return opening;
}

/**
 * A transaction bounded by its session's timeouts (MariaDB: HotPathSql.sessionBounds), which its own
 * BEGIN sets and its COMMIT lifts. When TypeORM begins and commits (ownsTransactionEvents, decided
 * once, at BEGIN), the bounds are set after its BEGIN and lifted before its COMMIT (its events run
 * without them). A rollback rolls back the whole transaction, whatever TypeORM counts (a savepoint
 * the body left open, a nested rollback that ended it already), then lifts the bounds: turning
 * autocommit back on with anything still open would commit it. A connection that could not be rolled
 * back, or whose bounds could not be lifted, is destroyed, never returned to the pool.
 */
function boundedBySession(bounds: SessionBounds): Pick<StepTransaction, 'begin' | 'commit' | 'rollback'> {
  let typeormBegan = false;
  const destroy = (runner: QueryRunner) => {
    if (!runner.isReleased) (runner as { databaseConnection?: { destroy?: () => void } }).databaseConnection?.destroy?.();
  };
  const lift = async (runner: QueryRunner) => {
    try {
      await runner.query(bounds.end);
    } catch (error) {
      destroy(runner);
      throw error;
    }
  };
  return {
    begin: async (runner) => {
      typeormBegan = !ownsTransactionEvents(runner.connection);
      if (!typeormBegan) return void (await runner.query(bounds.begin));
      Object.assign(runner, { isTransactionActive: false, transactionDepth: 0 });
      await runner.startTransaction();
      await runner.query(bounds.set);
    },
    commit: async (runner) => {
      await lift(runner);
      if (typeormBegan) await runner.commitTransaction();
      else await committedOutside(runner);
    },
    rollback: async (runner) => {
      try {
        Object.assign(runner, { isTransactionActive: true, transactionDepth: 1 });
        await runner.rollbackTransaction();
      } catch (error) {
        destroy(runner);
        throw error;
      }
      await lift(runner);
    },
  };
}
