import type { ExceptionAction, ExceptionHandler, ExceptionPolicy } from '../exception-policy/exception-policy.js';
import type { SignalMatcherLike } from './signal-matcher.js';
import type { Duration } from '../util/duration.js';
import type { ConcurrencyOptions } from './concurrency-options.js';
import type { RateLimitOptions } from './rate-limit-options.js';

/** A condition on the workflow: a function, the name of a method of the workflow, or a constant. @publicApi */
export type WorkflowCondition<W = any> = boolean | string | ((workflow: W) => boolean | Promise<boolean>);

/** Options for a step's jobs: the queue's (Bull's `priority`, `lifo`; `attempts` is always 1), and whether it may run inline. @publicApi */
export interface StepJobOptions {
  priority?: number;
  lifo?: boolean;
  /**
   * `false`: the step always goes through the queue, even when it is due the moment the step before
   * it finishes (see the module's `chainSteps`). @default true
   */
  chain?: boolean;
}

/** What a `waitFor` step does when its `timeout` passes with no matching signal. @publicApi */
export type TimeoutAction = 'run' | 'skip' | 'cancel' | 'pause';

/** Options of `@Step()`. @publicApi */
export interface StepOptions<W = any> {
  /** Stable step name stored in the database. @default the method name */
  name?: string;
  /** Delay before the step runs, counted from when it is scheduled. */
  wait?: Duration;
  /** Park the step until a matching signal arrives: a signal name or a matcher. */
  waitFor?: string | SignalMatcherLike<W>;
  /**
   * With `waitFor`: how long the step may stay parked, counted from when it parks (after any `wait`).
   * When it passes with no matching signal, `onTimeout` applies. Needs the wait-deadlines migration.
   */
  timeout?: Duration;
  /**
   * With `timeout`: what happens when the deadline passes. `'run'` runs the body with
   * `receivedSignal === null` and `timedOut === true`; `'skip'`, `'cancel'` and `'pause'` act like the
   * operator action. The execution's metadata records `timedOut: true`. @default 'run'
   */
  onTimeout?: TimeoutAction;
  /** Skip the step when true (evaluated when the step is due, after `cancelIf`). */
  skipIf?: WorkflowCondition<W>;
  /** What to do when the step throws. @default 'pause' (unless a class-level policy applies) */
  onException?: ExceptionAction | ExceptionPolicy | ExceptionHandler<W>;
  /** With `onException: 'reattempt'`: consecutive reattempts allowed; `null` = unlimited. @default 100 */
  maxReattempts?: number | null;
  /** With `onException: 'reattempt'`: what to do when reattempts run out. @default 'pause' */
  terminalAction?: 'pause' | 'cancel';
  /**
   * Times in a row housekeeping may run this step again after its worker died mid-step, before it
   * pauses the workflow instead; `null` = unlimited. @default the module's `maxRecoveries` (3)
   */
  maxRecoveries?: number | null;
  /** Insert this step before an earlier-declared step. */
  before?: string;
  /** Insert this step after an earlier-declared step. */
  after?: string;
  /** Queue options for this step's jobs (merged over the workflow's). */
  jobOptions?: StepJobOptions;
  /**
   * Run the body in a database transaction that commits only together with the step's outcome:
   * what the body writes through `this.manager` (and `this.hero`, read through it) is in the
   * database exactly when the step's completion is. In a resumable step, the writes between two
   * checkpoints commit with the second one. @default the workflow's `transactional`, else false
   */
  transactional?: boolean;
  /**
   * With `transactional`: how long the body's transaction may last. A body that takes longer is
   * rolled back and fails with `TransactionTimeoutError` (its exception policy applies); on
   * PostgreSQL each statement and each idle gap of the transaction is bounded by it too. @default '30s'
   */
  transactionTimeout?: Duration;
  /**
   * At most `limit` executions of the steps sharing the key run at once (see ConcurrencyOptions).
   * Replaces the workflow's `concurrency` for this step. @default the workflow's `concurrency`
   */
  concurrency?: ConcurrencyOptions<W>;
  /**
   * At most `limit` starts of executions holding the key within any `per` window (see
   * RateLimitOptions). Replaces the workflow's `rateLimit` for this step. @default the workflow's `rateLimit`
   */
  rateLimit?: RateLimitOptions<W>;
}

/** A step declared without a method (programmatic step lists). @publicApi */
export interface ProgrammaticStepOptions<W = any> extends StepOptions<W> {
  run: (workflow: W) => unknown;
}
