import type { ExceptionAction, ExceptionHandler, ExceptionPolicy, ExceptionPolicyOptions } from '../exception-policy/exception-policy.js';
import type { ConcurrencyOptions } from './concurrency-options.js';
import type { RateLimitOptions } from './rate-limit-options.js';
import type { StepJobOptions, WorkflowCondition } from './step-options.interface.js';

/** A class-level exception policy: a policy object or its options in one literal. @publicApi */
export type ClassExceptionPolicy<W = any> =
  | ExceptionPolicy
  | (ExceptionPolicyOptions & { action: ExceptionAction })
  | { on?: ExceptionPolicyOptions['on']; handler: ExceptionHandler<W> };

/**
 * A step deleted from the class but kept as a name (a gravestone): executions of it scheduled or
 * parked before the deploy are skipped and the workflow continues from this position; nothing
 * schedules it again. Give exactly one of `after` / `before` (a live step or an earlier gravestone);
 * the first position is `before: <first step>`. @publicApi
 */
export interface RemovedStepOptions {
  name: string;
  after?: string;
  before?: string;
}

/** Options of `@Workflow()`. @publicApi */
export interface WorkflowOptions<W = any> {
  /** Stable type name stored in the database. @default the class name */
  name?: string;
  /** The hero entity class (a thunk, to allow circular imports). */
  hero?: () => Function;
  /** Cancel the workflow when any condition is true before a step starts. */
  cancelIf?: WorkflowCondition<W>[];
  /** Class-level exception policies; later entries win over earlier ones. */
  onException?: ClassExceptionPolicy<W>[];
  /** Queue options for every step of this workflow. */
  jobOptions?: StepJobOptions;
  /** Keep running when the hero row is gone (otherwise the workflow is canceled). @default false */
  mayProceedWithoutHero?: boolean;
  /**
   * Skip steps that are no longer defined instead of leaving them to a process that defines them.
   * Unsafe during a rolling deploy that adds a step (an older process would skip it): declare
   * `removedSteps` instead. @default false
   */
  skipUndefinedSteps?: boolean;
  /** The default of `transactional` for this class's steps. @default false */
  transactional?: boolean;
  /** Steps deleted from the class whose executions may still be in flight (see RemovedStepOptions). */
  removedSteps?: RemovedStepOptions[];
  /** The `concurrency` of every step of this class that gives none (see ConcurrencyOptions). */
  concurrency?: ConcurrencyOptions<W>;
  /** The `rateLimit` of every step of this class that gives none (see RateLimitOptions). */
  rateLimit?: RateLimitOptions<W>;
}
