import { Injectable } from '@nestjs/common';
import { In, type EntityManager } from 'typeorm';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { CommitOutcomeUnknownError } from '../errors/commit-outcome-unknown.error.js';
import { InvalidStateError } from '../errors/invalid-state.error.js';
import { WorkflowAlreadyOngoingError } from '../errors/workflow-already-ongoing.error.js';
import { WorkflowNotFoundError } from '../errors/workflow-not-found.error.js';
import { InvalidHeroError } from '../errors/invalid-hero.error.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { StepNotDefinedError } from '../errors/step-not-defined.error.js';
import { UnknownWorkflowError } from '../errors/unknown-workflow.error.js';
import { skipRemovedStep } from '../execution/step-outcome.js';
import { stepsInFlight } from '../persistence/steps-in-flight.js';
import { heroExists, heroReference, heroRow } from '../persistence/hero.js';
import { traced } from '../instrumentation/geneva-drive.events.js';
import { rejectUnknownKeys } from '../util/unknown-keys.js';
import { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import { isConnectionError, neverSent, TransactionRunner } from '../persistence/transaction-runner.js';
import { latestExecutionOf, unfinishedChainOf } from '../persistence/step-history.js';
import { pageOfChildren } from '../persistence/child-queries.js';
import { isUniqueViolation } from '../persistence/unique-violation.js';
import { idOf, jobOptionsFor, rerunsTimedOut, successorOf, WorkflowStore } from '../persistence/workflow-store.js';
import type { WorkflowDefinition } from '../registry/workflow-definition.js';
import { lacksStep } from '../registry/runnable-steps.js';
import { WorkflowRegistry } from '../registry/workflow.registry.js';
import { SignalRendezvous } from '../execution/signal-rendezvous.js';
import { SignalIntake } from './signal-intake.js';
import { WaitDeadline } from '../execution/wait-deadline.js';
import type { StartSignal } from './signal.service.js';
import { ONGOING_WORKFLOW_STATES, type WorkflowState } from '../state/workflow-state.js';
import type { GenevaWorkflow } from '../workflow/geneva-workflow.js';

type WorkflowClass = abstract new (...args: any[]) => GenevaWorkflow<any>;

const START = 'WorkflowService.start';
const START_OPTION_KEYS: Array<keyof StartOptions> = ['allowMultiple', 'signals', 'manager'];

/** Options of `WorkflowService.start`. @publicApi */
export interface StartOptions {
  /** Allow several ongoing workflows of this class for the same hero. @default false */
  allowMultiple?: boolean;
  /** Signals to buffer in the same transaction (signal-with-start). */
  signals?: StartSignal[];
  /** Join the caller's transaction. */
  manager?: EntityManager;
}

/** Options of `WorkflowService.children`: a page of at most `limit` children after the id `after`. @publicApi */
export interface ChildrenPageOptions {
  /** The last id of the previous page. */
  after?: string;
  /** @default 100 (at most 1000) */
  limit?: number;
}

const MAX_CHILDREN_PAGE = 1000;

/** A gravestone (`removedSteps`) that ongoing workflows still stand at, and how many. @publicApi */
export interface RemovedStepInFlight {
  stepName: string;
  workflows: number;
}

/**
 * Starts, finds and operates workflows. Operator actions (`pause`, `resume`, `skip`, `cancel`) lock
 * the workflow row, check its state under the lock and throw `InvalidStateError` (changing nothing)
 * when the state does not allow them — including while a step is performing.
 * @publicApi
 */
@Injectable()
export class WorkflowService {
  constructor(
    private readonly transactions: TransactionRunner,
    private readonly store: WorkflowStore,
    private readonly registry: WorkflowRegistry,
    private readonly rendezvous: SignalRendezvous,
    private readonly intake: SignalIntake,
    private readonly schema: SchemaCapabilities,
    private readonly deadline: WaitDeadline,
  ) {}

  /**
   * Creates the workflow and schedules its first step (or finishes it at once when it has none).
   * Before writing anything it refuses what it cannot use: no workflow class (`UnknownWorkflowError`),
   * an unknown option (`InvalidOptionError`), a hero that is not a saved entity — no id, no row, a
   * plain object without a declared hero class, another class than the declared one
   * (`InvalidHeroError`).
   */
  async start(workflowClass: WorkflowClass, hero: object, options: StartOptions = {}): Promise<WorkflowRecord> {
    const definition = this.registry.getByClass(workflowClass);
    return traced('start', () => ({ workflowClass: definition.name }), () => this.startDefined(definition, hero, options));
  }

  private async startDefined(definition: WorkflowDefinition, hero: object, options: StartOptions): Promise<WorkflowRecord> {
    if (options === null || typeof options !== 'object') {
      throw new InvalidOptionError(START, 'options', `the options must be an object, got ${options === null ? 'null' : typeof options}`);
    }
    rejectUnknownKeys(START, options, START_OPTION_KEYS);
    const ref = heroReference(this.transactions.dataSource, definition.name, hero, definition.heroEntity?.(), true);
    const signals = this.intake.prepareStartSignals(options.signals, definition);
    const values = { type: definition.name, ...ref, allowMultiple: options.allowMultiple ?? false };
    const first = definition.firstStep;
    const manager = this.transactions.dataSource.manager;
    const heroInTable = heroRow(manager, ref.heroType, ref.heroId);
    // A hero that was never saved, or is gone: its workflow would be canceled at its first step.
    const heroMissing = () =>
      new InvalidHeroError(definition.name, `${ref.heroType} ${ref.heroId} has no row: save it first (inside the transaction of the manager you pass, if any)`);
    const alreadyOngoing = (error: unknown): never => {
      if (isUniqueViolation(error)) throw new WorkflowAlreadyOngoingError(definition.name, ref.heroType, ref.heroId, { cause: error });
      throw error;
    };
    const insert = async (manager: EntityManager): Promise<WorkflowRecord> => {
      if (first && heroInTable) {
        const workflow = await this.store.startWorkflow(manager, values, definition, first, heroInTable).catch(alreadyOngoing);
        if (!workflow) throw heroMissing();
        for (const signal of signals) await this.intake.insert(manager, workflow.id, signal);
        return workflow;
      }
      if (!(await heroExists(manager, ref.heroType, ref.heroId))) throw heroMissing();
      const workflow = await this.store.insertWorkflow(manager, values).catch(alreadyOngoing);
      for (const signal of signals) await this.intake.insert(manager, workflow.id, signal);
      if (!first) await this.store.transitionWorkflow(manager, workflow, 'finished');
      else await this.store.createExecution(manager, workflow, definition, first.name, { waitMs: first.waitMs });
      return workflow;
    };
    // One statement needs no transaction of its own: its job is enqueued once it has returned. It
    // commits by itself, so a connection lost on it leaves the outcome unknown, as at a COMMIT.
    if (first && heroInTable && signals.length === 0 && !options.manager && this.store.sql(manager).startsInOneStatement) {
      return insert(manager).catch((error: unknown) => {
        throw isConnectionError(error) && !neverSent(error) ? new CommitOutcomeUnknownError(error) : error;
      });
    }
    return this.transactions.run(insert, options.manager);
  }

  /** The workflow with this id; `WorkflowNotFoundError` when there is none, or when the id is malformed. */
  async find(id: string): Promise<WorkflowRecord> {
    const workflow = await this.manager.findOne(WorkflowRecord, { where: { id: this.store.workflowId(id) } });
    if (!workflow) throw new WorkflowNotFoundError(String(id));
    return workflow;
  }

  /** The ongoing workflow of this class for the hero (the most recent, with `allowMultiple`), or null. */
  findOngoing(workflowClass: WorkflowClass, hero: object): Promise<WorkflowRecord | null> {
    const definition = this.registry.getByClass(workflowClass);
    const ref = heroReference(this.transactions.dataSource, definition.name, hero, definition.heroEntity?.(), false, `find the ongoing ${definition.name} of a hero`);
    return this.manager.findOne(WorkflowRecord, {
      where: { type: definition.name, ...ref, state: In([...ONGOING_WORKFLOW_STATES]) },
      order: { createdAt: 'DESC', id: 'DESC' },
    });
  }

  /** Every workflow of this class for the hero, newest first. */
  findForHero(workflowClass: WorkflowClass, hero: object): Promise<WorkflowRecord[]> {
    const definition = this.registry.getByClass(workflowClass);
    const ref = heroReference(this.transactions.dataSource, definition.name, hero, definition.heroEntity?.(), false, `find the ${definition.name} workflows of a hero`);
    return this.manager.find(WorkflowRecord, { where: { type: definition.name, ...ref }, order: { createdAt: 'DESC', id: 'DESC' } });
  }

  /** Workflows in a state, optionally of one class, oldest first. */
  findByState(state: WorkflowState | 'ongoing', workflowClass?: WorkflowClass): Promise<WorkflowRecord[]> {
    const states = state === 'ongoing' ? [...ONGOING_WORKFLOW_STATES] : [state];
    return this.manager.find(WorkflowRecord, {
      where: { state: In(states), ...(workflowClass ? { type: this.registry.getByClass(workflowClass).name } : {}) },
      order: { createdAt: 'ASC', id: 'ASC' },
    });
  }

  /**
   * The workflows the steps of this one started (`this.startChild`), oldest first, a page at a time:
   * pass the last id of a page as `after` for the next one. Empty without the child-workflows
   * migration. `InvalidOptionError` for a `limit` that is not an integer from 1 to 1000.
   */
  async children(workflow: WorkflowRecord | string, options: ChildrenPageOptions = {}): Promise<WorkflowRecord[]> {
    rejectUnknownKeys('WorkflowService.children', options, ['after', 'limit']);
    const limit = options.limit ?? 100;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_CHILDREN_PAGE) {
      throw new InvalidOptionError('WorkflowService.children', 'limit', `limit must be an integer from 1 to ${MAX_CHILDREN_PAGE}, got ${String(limit)}`);
    }
    const parentId = this.schema.canonicalId(idOf(workflow));
    const after = options.after === undefined ? null : this.schema.canonicalId(options.after);
    if (options.after !== undefined && after === null) throw new InvalidOptionError('WorkflowService.children', 'after', `after must be a workflow id, got ${String(options.after)}`);
    if (parentId === null || !this.schema.hasChildren) return [];
    return pageOfChildren(this.manager, parentId, after, limit);
  }

  /** The workflow whose step started this one, or null (started by `start()`, or its parent purged). */
  async parentOf(workflow: WorkflowRecord | string): Promise<WorkflowRecord | null> {
    const record = typeof workflow === 'object' && workflow !== null && workflow.parentId !== undefined ? workflow : await this.find(idOf(workflow));
    if (!record.parentId) return null;
    return this.manager.findOne(WorkflowRecord, { where: { id: record.parentId } });
  }

  /** Every execution of the workflow, oldest first. */
  async executionHistory(workflow: WorkflowRecord | string): Promise<StepExecution[]> {
    const workflowId = this.schema.canonicalId(idOf(workflow));
    if (workflowId === null) return [];
    return this.manager.find(StepExecution, { where: { workflowId }, order: { createdAt: 'ASC', id: 'ASC' } });
  }

  /** The scheduled, waiting or in-progress execution, if any. */
  async currentExecution(workflow: WorkflowRecord | string): Promise<StepExecution | null> {
    const workflowId = this.schema.canonicalId(idOf(workflow));
    return workflowId === null ? null : this.store.currentExecution(this.manager, workflowId);
  }

  /** Stops a `ready` workflow for a human. Its scheduled (or parked) execution is kept for `resume`. */
  pause(workflow: WorkflowRecord | string): Promise<WorkflowRecord> {
    return this.operate(workflow, 'pause', ['ready'], async (manager, record) => {
      await this.store.transitionWorkflow(manager, record, 'paused');
    });
  }

  /**
   * Resumes a paused workflow: the kept execution is enqueued again for its original time (now if
   * overdue), a parked one meets any signal buffered meanwhile (or its `timeout`, when that passed
   * during the pause), and when there is none (paused by a
   * failure or by `pause()` in a step) the same step is scheduled afresh. Atomic.
   */
  resume(workflow: WorkflowRecord | string): Promise<WorkflowRecord> {
    return this.operate(workflow, 'resume', ['paused'], async (manager, record) => {
      const current = await this.store.currentExecution(manager, record.id);
      const definition = this.registry.findByName(record.type);
      const stepName = current?.stepName ?? record.nextStepName;
      if (definition && stepName !== null && definition.removedStep(stepName)) {
        await this.releaseRemovedStep(manager, record, definition, current, stepName);
        return;
      }
      // A step deleted without a gravestone: nothing this code could run. resumeAt moves the workflow.
      if (definition && stepName !== null && lacksStep(definition, stepName)) {
        throw new StepNotDefinedError(record.type, stepName, record.id, current?.id ?? null, { definedSteps: definition.stepNames });
      }
      await this.store.transitionWorkflow(manager, record, 'ready');
      if (current?.state === 'scheduled') {
        await this.store.enqueue(manager, record, current, jobOptionsFor(definition, definition?.step(current.stepName)));
      } else if (current?.state === 'waiting') {
        // A deadline that passed while paused applies now; otherwise a buffered signal is delivered.
        if (!(await this.deadline.onResume(manager, record, current))) await this.rendezvous.redeliver(manager, record, current);
      } else if (record.nextStepName !== null) {
        // A resumable chain continues from its cursor: the step closed by a pause, or the failed
        // execution that had already moved its cursor. Anything else starts the step afresh — timed
        // out again when its wait had timed out to run it.
        const predecessor = await unfinishedChainOf(manager, record.id, record.nextStepName);
        const step = definition?.step(record.nextStepName);
        const timedOut = !predecessor && step?.timeoutMs !== undefined && rerunsTimedOut(step, await latestExecutionOf(manager, record.id, record.nextStepName));
        await this.store.rescheduleCurrentStep(manager, record, definition, predecessor ? successorOf(predecessor, undefined) : { timedOut });
      }
    });
  }

  /**
   * Moves a `ready` or `paused` workflow to `stepName`: its current execution (scheduled, parked or
   * kept by a pause) is canceled and `stepName` is scheduled due now (its `wait` does not apply), in
   * one transaction; the workflow is `ready`. For a workflow stranded on a step deleted without a
   * gravestone, or any an operator wants to move. Moving to another step settles the signal the
   * current one was given, as a skip does; moving to the same step runs it again on the same event.
   * Refuses a step the class does not define (`StepNotDefinedError`, naming those it does), a class
   * this process does not register (`UnknownWorkflowError`) and any other state (`InvalidStateError`),
   * changing nothing.
   */
  async resumeAt(workflow: WorkflowRecord | string, stepName: string): Promise<WorkflowRecord> {
    if (typeof stepName !== 'string' || stepName.trim() === '') {
      throw new InvalidOptionError('WorkflowService.resumeAt', 'stepName', `the step name must be a non-empty string, got ${JSON.stringify(stepName) ?? String(stepName)}`);
    }
    return this.operate(workflow, 'resumeAt', ['ready', 'paused'], async (manager, record) => {
      const definition = this.registry.findByName(record.type);
      if (!definition) throw new UnknownWorkflowError(record.type);
      if (!definition.step(stepName)) throw new StepNotDefinedError(record.type, stepName, record.id, null, { definedSteps: definition.stepNames });
      const current = await this.store.currentExecution(manager, record.id);
      const from = current?.stepName ?? record.nextStepName;
      if (current) await this.store.transitionExecution(manager, current, 'canceled', 'canceled');
      if (from !== null && from !== stepName) await this.rendezvous.settleOnSkip(manager, current ?? this.noExecutionAt(record, from));
      await this.store.createExecution(manager, record, definition, stepName, {}, this.store.transitionChanges(record, 'ready', { currentStepName: null }));
    });
  }

  /**
   * The gravestones of this class (`removedSteps`) that ongoing workflows still stand at (scheduled,
   * parked, or kept by a pause); finished and canceled workflows are ignored. A gravestone may be
   * deleted from the class once it no longer comes back.
   */
  async removedStepsInFlight(workflowClass: WorkflowClass): Promise<RemovedStepInFlight[]> {
    const definition = this.registry.getByClass(workflowClass);
    const inFlight = await stepsInFlight(this.manager, [definition.name]);
    return inFlight.filter((row) => definition.removedStep(row.stepName)).map(({ stepName, workflows }) => ({ stepName, workflows }));
  }

  /**
   * Skips the current step and schedules the next (or finishes). On a paused workflow the kept
   * execution is canceled and the workflow resumes at the following step. Skipping settles the
   * signal the skipped step was delivered.
   */
  skip(workflow: WorkflowRecord | string): Promise<WorkflowRecord> {
    return this.operate(workflow, 'skip', ['ready', 'paused'], async (manager, record) => {
      const definition = this.registry.findByName(record.type);
      const current = await this.store.currentExecution(manager, record.id);
      if (record.state === 'ready' && current) {
        await this.store.transitionExecution(manager, current, 'skipped', 'skipped');
        await this.rendezvous.settleOnSkip(manager, current);
      } else if (record.state === 'paused') {
        if (current) await this.store.transitionExecution(manager, current, 'canceled', 'canceled');
        await this.rendezvous.settleOnSkip(manager, current ?? this.noExecutionAt(record, record.nextStepName ?? ''));
      }
      await this.store.scheduleNextStep(manager, record, definition);
    });
  }

  /** Cancels a `ready` or `paused` workflow for good; its active execution is canceled. */
  cancel(workflow: WorkflowRecord | string): Promise<WorkflowRecord> {
    return this.operate(workflow, 'cancel', ['ready', 'paused'], async (manager, record) => {
      const current = await this.store.currentExecution(manager, record.id);
      if (current) await this.store.transitionExecution(manager, current, 'canceled', 'canceled');
      await this.store.transitionWorkflow(manager, record, 'canceled');
    });
  }

  /**
   * `resume` at a gravestone (SIG-63): the kept execution (scheduled, or parked — a signal sent to it
   * stayed buffered) is skipped and its signal settled, or, with none kept, the claim of the step's
   * failed execution is settled; the step after the gravestone's position is scheduled.
   */
  private async releaseRemovedStep(manager: EntityManager, record: WorkflowRecord, definition: WorkflowDefinition, current: StepExecution | null, stepName: string): Promise<void> {
    if (current) return skipRemovedStep(this.store, this.rendezvous, manager, { workflow: record, execution: current, definition });
    await this.rendezvous.settleOnSkip(manager, this.noExecutionAt(record, stepName));
    await this.store.scheduleNextStep(manager, record, definition, { currentStepName: null }, stepName);
  }

  /** Stands for the execution a paused workflow does not keep, to settle the claim of the step's last one (SignalRendezvous.settleOnSkip). */
  private noExecutionAt(record: WorkflowRecord, stepName: string): StepExecution {
    return { workflowId: record.id, stepName, signalId: null } as StepExecution;
  }

  private async operate(
    workflow: WorkflowRecord | string,
    action: string,
    allowed: WorkflowState[],
    change: (manager: EntityManager, record: WorkflowRecord) => Promise<void>,
  ): Promise<WorkflowRecord> {
    return this.transactions.run(async (manager) => {
      const record = await this.store.lockWorkflow(manager, idOf(workflow));
      if (!allowed.includes(record.state)) throw new InvalidStateError(action, record.id, record.state);
      await change(manager, record);
      if (typeof workflow !== 'string') Object.assign(workflow, record);
      return record;
    });
  }

  private get manager(): EntityManager {
    return this.transactions.dataSource.manager;
  }
}
