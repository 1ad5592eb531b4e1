import { In, IsNull, Not, type EntityManager } from 'typeorm';
import { Signal } from '../entities/signal.entity.js';
import { StepExecution } from '../entities/step-execution.entity.js';
import type { WorkflowRecord } from '../entities/workflow.entity.js';
import { SignalsNotMigratedError } from '../errors/signal.errors.js';
import { latestRowsLock } from '../persistence/row-lock.js';
import type { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import { jobOptionsFor, type WorkflowStore } from '../persistence/workflow-store.js';
import type { StepDefinition, WorkflowDefinition } from '../registry/workflow-definition.js';
import { lacksStep } from '../registry/runnable-steps.js';
import type { WorkflowRegistry } from '../registry/workflow.registry.js';
import type { GenevaWorkflow } from '../workflow/geneva-workflow.js';
import type { WorkflowInstances } from './workflow-instances.js';
import { FanIn } from './fan-in.js';
import { isChildrenMatcher } from '../workflow/children-matcher.js';
import { assertSignalTransition, CLAIMED, PENDING } from '../state/signal-state.js';

/**
 * The rendezvous of signals and waiting steps — both sides, and the settlement of claims. Every
 * method runs inside a transaction that holds the workflow row lock, which is what makes the meeting
 * race-free: a signal either finds the step parked (and wakes it) or is buffered before the step's
 * gate looks (and is found there).
 *
 * Lifecycle: `pending` → `claimed` (an execution attached) → `consumed` (every attached chain
 * resolved cleanly: completed or skipped). Failures, pauses, cancels and reattempts leave the claim
 * in place, so a retry re-reads the same event.
 */
export class SignalRendezvous {
  /** The gate of fan-in steps (`waitFor: childrenOf(...)`), which decide on a count rather than on one signal. */
  readonly fanIn: FanIn;

  constructor(
    private readonly store: WorkflowStore,
    private readonly schema: SchemaCapabilities,
    private readonly registry: WorkflowRegistry,
    private readonly instances: WorkflowInstances,
  ) {
    this.fanIn = new FanIn(store);
  }

  assertSchemaSupportsSignals(workflow: WorkflowRecord, step: StepDefinition): void {
    if (!this.schema.hasSignals) throw new SignalsNotMigratedError(`Step ${workflow.type}.${step.name} (waitFor)`);
  }

  // ------------------------------------------------------------ receiver side: the gate

  /**
   * For a `waitFor` step about to start: the pinned signal if the execution carries one (woken by
   * dispatch, or inherited by a successor; `pinned` when its row was read with the lock), else the oldest attachable matching signal (claimed and
   * pinned now), else park the execution as `waiting` and return null.
   */
  async attachOrPark(
    manager: EntityManager,
    workflow: WorkflowRecord,
    execution: StepExecution,
    step: StepDefinition,
    instance: GenevaWorkflow<any>,
    pinned: Signal | null = null,
  ): Promise<Signal | null> {
    if (execution.signalId) return pinned?.id === execution.signalId ? pinned : manager.findOneOrFail(Signal, { where: { id: execution.signalId } });
    const signal = await this.firstMatching(manager, workflow.id, step, instance);
    if (signal) {
      await this.claim(manager, signal);
      // Pinned by the UPDATE that starts the execution, when the phase writes its batch.
      await this.store.updateRow<StepExecution>(manager, 'executions', execution.id, { signalId: signal.id, updatedAt: this.store.now() });
      execution.signalId = signal.id;
      return signal;
    }
    await this.store.transitionExecution(manager, execution, 'waiting', null, { waitingSince: this.store.now() });
    return null;
  }

  // ------------------------------------------------------------ sender side: dispatch

  /**
   * Wakes every parked execution of the workflow (`parked`, or read now) whose matcher accepts the signal: claim, pin,
   * `waiting → scheduled` due now, job enqueued after commit. Returns how many woke. Matchers run on
   * a fresh workflow instance bound to the locked record; a matcher that throws aborts the delivery.
   */
  async dispatch(manager: EntityManager, workflow: WorkflowRecord, signal: Signal, parked?: StepExecution[]): Promise<number> {
    const definition = this.registry.findByName(workflow.type);
    if (!definition || !this.schema.hasSignals) return 0;
    await this.store.flush(manager);
    // `parked`: read by the statement that inserted the signal (SignalIntake.insert).
    const waiting = parked ?? (await this.store.sql(manager).waitingExecutions(manager, workflow.id));
    let woken = 0;
    for (const execution of waiting) {
      const step = definition.step(execution.stepName);
      if (!step?.waitFor) continue;
      if (isChildrenMatcher(step.waitFor)) {
        // A fan-in step pins nothing: woken once the count is reached, its gate counts again.
        if (!step.waitFor.matches(signal) || !(await this.fanIn.reached(manager, workflow, step.waitFor))) continue;
        await this.wake(manager, workflow, definition, step, execution, wakeJobId(execution, signal));
        woken++;
        continue;
      }
      const instance = await this.instances.createBound(manager, definition, workflow, execution, { withHero: step.waitFor.needsWorkflow !== false });
      if (!step.waitFor.matches(signal, instance)) continue;
      await this.claim(manager, signal);
      await this.wake(manager, workflow, definition, step, execution, wakeJobId(execution, signal), signal.id);
      woken++;
    }
    return woken;
  }

  /** `waiting → scheduled`, due now (pinned to `signalId` if given), and its job enqueued after commit under `jobId`. */
  private async wake(manager: EntityManager, workflow: WorkflowRecord, definition: WorkflowDefinition, step: StepDefinition, execution: StepExecution, jobId: string, signalId?: string): Promise<void> {
    await this.store.transitionExecution(manager, execution, 'scheduled', null, {
      ...(signalId === undefined ? {} : { signalId }),
      // Due now: if the enqueue below is lost, the stuck-scheduled sweep finds this row overdue.
      // waitingSince stays: with scheduledFor it records how long the step waited.
      scheduledFor: this.store.now(),
      jobId,
    });
    await this.store.enqueue(manager, workflow, execution, jobOptionsFor(definition, step), jobId);
  }

  /**
   * The wake-up jobs of the executions a signal delivered in one message woke (HotPathSql.deliverSignal),
   * which has committed. The rows it answered are kept for each job, should it start in this process
   * (WorkflowStore.keepRows).
   */
  async sendWakes(manager: EntityManager, workflow: WorkflowRecord, signal: Signal, woken: StepExecution[]): Promise<void> {
    const definition = this.registry.findByName(workflow.type);
    for (const execution of woken) {
      const step = definition?.step(execution.stepName);
      if (definition && step) this.store.keepRows(manager, execution.jobId!, { workflow, execution, signal }, definition, step);
      await this.store.enqueue(manager, workflow, execution, jobOptionsFor(definition, step), execution.jobId!);
    }
  }

  /**
   * `resume` of a workflow whose current execution is parked: run the rendezvous again with the
   * oldest attachable signal its matcher accepts (it may have been buffered while paused). A parked
   * step that no longer waits for a signal, or that a deploy removed from a class with
   * `skipUndefinedSteps`, is scheduled to run now instead, so the executor deals with it rather than
   * nothing ever waking it. A class or step this process does not have is another version's: the
   * execution stays parked as it is (registry/runnable-steps.ts).
   */
  async redeliver(manager: EntityManager, workflow: WorkflowRecord, execution: StepExecution): Promise<number> {
    const definition = this.registry.findByName(workflow.type);
    const step = definition?.step(execution.stepName);
    if (!definition || lacksStep(definition, execution.stepName)) return 0;
    // A fan-in step whose children ended meanwhile runs its gate again.
    const fanInReached = isChildrenMatcher(step?.waitFor) && (await this.fanIn.reached(manager, workflow, step.waitFor));
    if (!step?.waitFor || fanInReached) {
      // An id of its own, like a signal's wake-up: the job that parked the execution may still be in the queue.
      await this.wake(manager, workflow, definition, step!, execution, `${execution.id}-resume`);
      return 1;
    }
    if (isChildrenMatcher(step.waitFor)) return 0;
    const instance = await this.instances.createBound(manager, definition, workflow, execution, { withHero: step.waitFor.needsWorkflow !== false });
    const signal = await this.firstMatching(manager, workflow.id, step, instance);
    return signal ? this.dispatch(manager, workflow, signal) : 0;
  }

  /**
   * Sends again the wake-up jobs of the executions `signal` woke that have not started yet: after a
   * COMMIT whose answer was lost, the jobs it would have enqueued were never sent. Returns how many.
   */
  async resendWakes(manager: EntityManager, workflow: WorkflowRecord, signal: Signal): Promise<number> {
    const definition = this.registry.findByName(workflow.type);
    await this.store.flush(manager);
    const woken = await manager.find(StepExecution, { where: { workflowId: workflow.id, signalId: signal.id, state: 'scheduled' }, lock: latestRowsLock(manager) });
    let sent = 0;
    for (const execution of woken) {
      const jobId = wakeJobId(execution, signal);
      if (execution.jobId !== jobId) continue;
      await this.store.enqueue(manager, workflow, execution, jobOptionsFor(definition, definition?.step(execution.stepName)), jobId);
      sent++;
    }
    return sent;
  }

  // ------------------------------------------------------------ settlement

  /** A fan-in step ended cleanly: the signals its gate claimed record a consumption (FanIn). */
  settleFanIn(manager: EntityManager, signalIds: readonly string[] | undefined): Promise<void> {
    return this.fanIn.settle(manager, signalIds ?? []);
  }

  /** The execution completed cleanly: its pinned signal records a consumption. */
  async settleOnSuccess(manager: EntityManager, execution: StepExecution): Promise<void> {
    if (execution.signalId) await this.store.consumeSignal(manager, execution.signalId, execution.stepName);
  }

  /**
   * The execution was skipped (skipIf, `skip()`, a skip policy, an operator skip). Skipping counts
   * as finishing: the signal the step was delivered is settled. When the skipped execution never
   * attached, the claim still held by the step's latest failed or canceled execution is settled
   * instead (a retry skipped before its gate ran; a woken execution canceled by its job during a
   * pause, then skipped); signals that no execution attached stay buffered.
   */
  async settleOnSkip(manager: EntityManager, execution: StepExecution): Promise<void> {
    if (!this.schema.hasSignals) return;
    let signalId = execution.signalId;
    if (!signalId) {
      await this.store.flush(manager);
      const holder = await manager.findOne(StepExecution, {
        where: { workflowId: execution.workflowId, stepName: execution.stepName, state: In(['failed', 'canceled']), signalId: Not(IsNull()) },
        order: { createdAt: 'DESC', id: 'DESC' },
      });
      signalId = holder?.signalId ?? null;
    }
    if (signalId) await this.store.consumeSignal(manager, signalId, execution.stepName);
  }

  private async claim(manager: EntityManager, signal: Signal): Promise<void> {
    const now = this.store.now();
    const changes: Partial<Signal> = { claimed: Number(signal.claimed) + 1, updatedAt: now };
    // The first claim moves the signal on; later ones count (state/signal-state.ts).
    assertSignalTransition(signal.state, CLAIMED);
    if (signal.state === PENDING) {
      changes.state = CLAIMED;
      changes.claimedAt = now;
    }
    await this.store.updateRow<Signal>(manager, 'signals', signal.id, changes);
    Object.assign(signal, changes);
  }

  /** Oldest-first attachable (not consumed) signal of the workflow the step's matcher accepts. */
  private async firstMatching(manager: EntityManager, workflowId: string, step: StepDefinition, instance: GenevaWorkflow<any>): Promise<Signal | null> {
    await this.store.flush(manager);
    const name = step.waitFor!.signalName || null;
    const signals = this.store.takeReadSignals(manager, workflowId, name) ?? (await this.store.sql(manager).attachableSignals(manager, workflowId, name));
    for (const signal of signals) {
      if (step.waitFor!.matches(signal, instance)) return signal;
    }
    return null;
  }
}

/**
 * The job id of a wake-up. Not the execution's id: the job that parked the execution may still be in
 * the queue (it is removed only once the worker reports it done, after the park committed), and Bull
 * silently drops an add whose id exists — the wake-up would be lost. One wake per signal and execution.
 */
function wakeJobId(execution: StepExecution, signal: Signal): string {
  return `${execution.id}-wake-${signal.id}`;
}
