import type { LoggerService } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { Signal } from '../entities/signal.entity.js';
import type { StepExecution } from '../entities/step-execution.entity.js';
import type { WorkflowRecord } from '../entities/workflow.entity.js';
import { GenevaDriveError } from '../errors/geneva-drive.error.js';
import { SignalNotReceivedError } from '../errors/signal.errors.js';
import { NotTransactionalError } from '../errors/transactional-step.errors.js';
import { FlowControlSignal, type FlowControlIntent } from './flow-control.js';
import type { SignalMatcher } from './signal-matcher.js';
import type { ChildWorkflow } from './children-matcher.js';
import type { ChildHandle, ChildWorkflowClass, StartChildOptions, StepOutputSink } from './start-child.js';
import { parseDuration, type Duration } from '../util/duration.js';

/** What the executor binds to a fresh workflow instance before running a step. */
export interface StepContext<Hero> {
  hero: Hero;
  record: WorkflowRecord;
  execution: StepExecution;
  signal: Signal<any> | null;
  logger: LoggerService;
  /** A `waitFor` step whose `timeout` passed with no matching signal (`onTimeout: 'run'`). */
  timedOut?: boolean;
  /** A transactional step's transaction, which commits with the step's outcome. */
  manager?: EntityManager;
  /** Where the body's children and result go, to be written with its outcome (while the body runs). */
  outputs?: StepOutputSink;
  /** A fan-in step's ended children (`waitFor: childrenOf(...)`). */
  children?: ChildWorkflow[];
}

// Kept outside the instances, so workflow classes expose nothing of the engine in their type.
const contexts = new WeakMap<object, StepContext<any>>();
const intents = new WeakMap<object, FlowControlIntent>();

/**
 * Base class of workflows. Inside a step, `this` offers the hero, the workflow record, the current
 * execution, the signal that woke the step, and flow control. Each execution gets a fresh instance.
 * @publicApi
 */
export abstract class GenevaWorkflow<Hero = unknown> {
  /** The entity this workflow is about (`null` only with `mayProceedWithoutHero` once it is gone). */
  get hero(): Hero {
    return this.context('hero').hero;
  }

  /** The workflow's row. */
  get record(): WorkflowRecord {
    return this.context('record').record;
  }

  /** The execution being run. */
  get currentExecution(): StepExecution {
    return this.context('currentExecution').execution;
  }

  /** The signal this step is processing (a `waitFor` step), otherwise `null`. */
  get receivedSignal(): Signal<any> | null {
    return this.context('receivedSignal').signal;
  }

  /**
   * The signal this step received, its payload typed by the signal's definition — the
   * `SignalMatcher<Payload>` the step waits for, which the sender passes to `signal()` too:
   * `this.receivedSignalOf(PaymentConfirmed).payload.amountCents`. `SignalNotReceivedError` when the
   * step received no signal of that name (its wait timed out, or it waits for another).
   */
  receivedSignalOf<Payload>(definition: SignalMatcher<Payload>): Signal<Payload> {
    const { signal, execution } = this.context('receivedSignalOf');
    if (signal?.name !== definition.signalName) throw new SignalNotReceivedError(this.constructor.name, execution.stepName, definition.signalName, signal?.name ?? null);
    return signal as Signal<Payload>;
  }

  /**
   * True when this `waitFor` step runs because its `timeout` passed with no matching signal
   * (`onTimeout: 'run'`); `receivedSignal` is then `null`.
   */
  get timedOut(): boolean {
    return this.context('timedOut').timedOut === true;
  }

  /**
   * In a transactional step (`@Step({ transactional: true })`), the EntityManager of the transaction
   * that records the step's outcome: what the body writes through it (repositories from
   * `this.manager.getRepository(...)`, the hero) commits exactly when the step completes, and is rolled
   * back when it does not. Pass it on as `{ manager: this.manager }` to `start()` and `signal()`.
   * `NotTransactionalError` in any other step.
   */
  get manager(): EntityManager {
    const { manager, execution } = this.context('manager');
    if (!manager) throw new NotTransactionalError(this.constructor.name, execution.stepName);
    return manager;
  }

  /**
   * Starts a child workflow of `workflowClass` about `hero`, written with this step's outcome: the
   * child exists once the step completes (or calls `finished()` or `skip()`), and a body that
   * throws, reattempts, pauses or cancels starts none. Returns a handle at once. When the child ends,
   * this workflow receives a `child_finished` signal (CHILD_FINISHED); `waitFor: childrenOf(step)`
   * waits for the children of a step. Errors at the call: `UnknownWorkflowError`, `InvalidHeroError`,
   * `InvalidOptionError` (a key given twice, say), `InvalidSignalError`, `ChildrenNotMigratedError`;
   * an ongoing workflow of the child's class for the hero (without `allowMultiple`) fails the step
   * with `WorkflowAlreadyOngoingError` when its outcome is written (its exception policy applies).
   */
  startChild(workflowClass: ChildWorkflowClass, hero: object, options?: StartChildOptions): ChildHandle {
    const { outputs, execution } = this.context('startChild');
    if (!outputs) throw new GenevaDriveError(`${this.constructor.name}.${execution.stepName}: startChild is only available in a step body`);
    return outputs.startChild(workflowClass, hero, options);
  }

  /**
   * Stores `value` as this workflow's result, with this step's outcome (a body that does not
   * complete stores nothing); a child's result is delivered to its parent. Encoded like a signal
   * payload and limited to `maxSignalPayloadSize`: `UnencodableValueError`, `ResultTooLargeError`.
   */
  setResult(value: unknown): void {
    const { outputs, execution } = this.context('setResult');
    if (!outputs) throw new GenevaDriveError(`${this.constructor.name}.${execution.stepName}: setResult is only available in a step body`);
    outputs.setResult(value);
  }

  /** In a fan-in step (`waitFor: childrenOf(step)`), the children of that step that have ended, oldest first; otherwise empty. */
  get children(): ChildWorkflow[] {
    return this.context('children').children ?? [];
  }

  /** A logger whose lines carry the workflow and execution context. */
  get logger(): LoggerService {
    return this.context('logger').logger;
  }

  /** Stops the workflow for good. */
  cancel(): never {
    return this.flowControl({ kind: 'cancel' });
  }

  /** Stops the workflow for a human; `resume` runs this step again. */
  pause(): never {
    return this.flowControl({ kind: 'pause' });
  }

  /** Ends this step as skipped and moves on to the next one. */
  skip(): never {
    return this.flowControl({ kind: 'skip' });
  }

  /**
   * Runs this step again, after `wait` if given. Never counted against `maxReattempts`. A resumable
   * step continues from its cursor, or starts over with `rewind: true`.
   */
  reattempt(options: { wait?: Duration; rewind?: boolean } = {}): never {
    const waitMs = options.wait === undefined ? undefined : parseDuration(options.wait);
    if (options.wait !== undefined && waitMs === undefined) throw new TypeError(`reattempt wait must be a duration, got ${JSON.stringify(options.wait)}`);
    return this.flowControl({ kind: 'reattempt', waitMs, rewind: options.rewind === true });
  }

  /** Completes this step and the whole workflow, skipping the remaining steps. */
  finished(): never {
    return this.flowControl({ kind: 'finished' });
  }

  /** Called before the step body (override to add behaviour). */
  beforeStepExecution(_execution: StepExecution): void | Promise<void> {}

  /** Called after the step body, whatever its outcome (override to add behaviour). */
  afterStepExecution(_execution: StepExecution): void | Promise<void> {}

  /** Wraps the step body; must call `run`. Its return value does not matter. */
  async aroundStepExecution(_execution: StepExecution, run: () => Promise<void>): Promise<unknown> {
    return run();
  }

  private flowControl(intent: FlowControlIntent): never {
    this.context(intent.kind);
    // Record first: the executor honours the intent even if user code swallows the throw.
    intents.set(this, intent);
    throw new FlowControlSignal(intent);
  }

  private context(what: string): StepContext<Hero> {
    const context = contexts.get(this) as StepContext<Hero> | undefined;
    if (!context) {
      throw new GenevaDriveError(`${this.constructor.name}: "${what}" is only available while a step runs; use WorkflowService for operator actions`);
    }
    return context;
  }
}

/** Engine-side access to a workflow instance's binding and recorded flow-control intent. */
export const workflowInternals = {
  bind<Hero>(workflow: GenevaWorkflow<Hero>, context: StepContext<Hero>): void {
    contexts.set(workflow, context);
    intents.delete(workflow);
  },
  /** Changes parts of a bound instance's context (a transactional step's hero, read in its transaction, and its manager). */
  rebind<Hero>(workflow: GenevaWorkflow<Hero>, changes: Partial<StepContext<Hero>>): void {
    const context = contexts.get(workflow);
    if (context) contexts.set(workflow, { ...context, ...changes });
  },
  takeIntent(workflow: GenevaWorkflow<any>): FlowControlIntent | undefined {
    const intent = intents.get(workflow);
    intents.delete(workflow);
    return intent;
  },
};
