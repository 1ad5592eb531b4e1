import type { LoggerService } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { StepExecution } from '../entities/step-execution.entity.js';
import { ContextLogger } from '../instrumentation/context-logger.js';
import { dueKeys, publish } from '../instrumentation/geneva-drive.events.js';
import type { ChainedStart, ChainedStartAnswer, TrailingRead } from '../persistence/sql/hot-path-sql.js';
import type { WorkflowStore } from '../persistence/workflow-store.js';
import { startsWithoutDecisions, type StepDefinition, type WorkflowDefinition } from '../registry/workflow-definition.js';
import { waitsForNameAlone } from '../registry/name-only-waits.js';
import { workflowInternals, type GenevaWorkflow } from '../workflow/geneva-workflow.js';
import { eventBase, type Prepared } from './step-run.js';
import type { WorkflowInstances } from './workflow-instances.js';

/** A chained start planned for one due execution: the statement to send, and how to read its answer. */
export interface PlannedStart {
  read: TrailingRead;
  /** The started step's run (null: parked, or left scheduled for its own phase 1: `started` says which). */
  finish(rows: Array<Record<string, unknown>> | undefined): { next: Prepared | null; started: ChainedStartAnswer['state'] };
}

/**
 * Phase 1 of a chained step decided by SQL in its predecessor's finalize message (FinalizePhase),
 * for a step that runs none of the application's code before its body and whose gate, if any, waits
 * for a signal by name alone: the statement (HotPathSql.chainedStart) reads the hero and starts the
 * step, attaching the oldest signal of that name or parking it, as PreparePhase.prepareLocked would
 * decide for such a step; this turns its answer into the run. Anything else keeps the locked path.
 */
export class ChainedStarts {
  constructor(
    private readonly store: WorkflowStore,
    private readonly instances: WorkflowInstances,
    private readonly logger: LoggerService,
  ) {}

  /**
   * Whether the step after `prepared`'s may start so, where the dialect can: a chain goes on only after
   * a plain completion, which schedules the next step in the class's order (plan checks the row).
   */
  mayStartAfter(manager: EntityManager, { definition, step }: Prepared): boolean {
    const next = definition.steps[definition.steps.indexOf(step) + 1];
    return next !== undefined && decidesInSql(definition, next) && this.store.startsChainedSteps(manager);
  }

  /**
   * The instance a started step would run on, built before the statement is sent: once the statement
   * committed the start, nothing of the application's may fail to let the step run.
   */
  instance(prepared: Prepared): Promise<GenevaWorkflow<any>> {
    return this.instances.create(prepared.definition);
  }

  /** The start of `due`, the step `prepared`'s outcome scheduled due now, on `instance`, or null when its phase 1 must run in Node. */
  plan(manager: EntityManager, prepared: Prepared, due: StepExecution, instance: GenevaWorkflow<any>): PlannedStart | null {
    const { definition, workflow } = prepared;
    const step = definition.step(due.stepName);
    if (!step || !decidesInSql(definition, step) || !isFresh(due)) return null;
    const codec = this.store.sql(manager).heroCodec(workflow.heroType);
    if (!codec) return null;
    const now = this.store.now();
    const start: ChainedStart = {
      workflowId: workflow.id,
      stepName: step.name,
      hero: { codec, id: workflow.heroId },
      // What markStarted and attachOrPark write (jobId: a chained step has none of its own).
      started: { state: 'in_progress', outcome: null, updatedAt: now, startedAt: now },
      workflow: { ...this.store.transitionChanges(workflow, 'performing', { currentStepName: step.name }), updatedAt: now },
      ...(step.waitFor ? { gate: { name: step.waitFor.signalName!, parked: { state: 'waiting', outcome: null, updatedAt: now, waitingSince: now }, now } } : {}),
    };
    const read = this.store.chainedStart(manager, start);
    if (!read) return null;
    return { read, finish: (rows) => this.finish(manager, prepared, due, step, start, instance, rows) };
  }

  private finish(
    manager: EntityManager,
    prepared: Prepared,
    execution: StepExecution,
    step: StepDefinition,
    start: ChainedStart,
    instance: GenevaWorkflow<any>,
    rows: Array<Record<string, unknown>> | undefined,
  ): { next: Prepared | null; started: ChainedStartAnswer['state'] } {
    const answer = rows ? this.store.chainedStartFrom(manager, start, rows) : { state: null, hero: null, signal: null };
    if (answer.state === null) return { next: null, started: null };
    const began = performance.now();
    const { definition, workflow } = prepared;
    const logger = new ContextLogger(this.logger, workflow, execution);
    const next: Prepared = { executionId: execution.id, workflowId: workflow.id, definition, step, instance, workflow, execution, logger, run: { ...prepared.run, jobId: undefined } };
    if (answer.state === 'waiting') {
      Object.assign(execution, start.gate!.parked);
      publish('precondition', () => ({ ...eventBase(next, began), ...dueKeys(execution), outcome: 'waiting' }));
      return { next: null, started: 'waiting' };
    }
    if (answer.signal) execution.signalId = answer.signal.id;
    workflowInternals.bind(instance, { hero: answer.hero, record: workflow, execution, signal: answer.signal, logger });
    publish('precondition', () => ({ ...eventBase(next, began), ...dueKeys(execution), outcome: 'passed' }));
    Object.assign(execution, start.started);
    Object.assign(workflow, start.workflow);
    return { next, started: 'in_progress' };
  }
}

/**
 * Whether the step's phase 1 decides nothing the statement cannot: no cancelIf, skipIf, rate limit
 * or concurrency key, not transactional or resumable (their starts are their own), and a gate, if
 * any, that waits for a signal by name alone with no timeout.
 */
function decidesInSql(definition: WorkflowDefinition, step: StepDefinition): boolean {
  if (!startsWithoutDecisions(definition, step) || step.concurrency || step.transactional || step.resumable || definition.removedStep(step.name)) return false;
  const { waitFor } = step;
  return !waitFor || (waitsForNameAlone(waitFor) && step.timeoutMs === undefined);
}

/** A fresh execution: no signal pinned, not continuing another, no key, not timed out. */
function isFresh(due: StepExecution): boolean {
  return due.signalId == null && due.continuesFromId == null && due.flowKey == null && due.metadata?.timedOut !== true;
}
