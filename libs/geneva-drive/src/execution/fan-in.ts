import type { EntityManager } from 'typeorm';
import type { StepExecution } from '../entities/step-execution.entity.js';
import type { WorkflowRecord } from '../entities/workflow.entity.js';
import { childrenOfStep, claimSignals, countChildrenOfStep, consumeSignals, unconsumedSignals } from '../persistence/child-queries.js';
import type { WorkflowStore } from '../persistence/workflow-store.js';
import { CHILD_FINISHED, type ChildEndState, type ChildrenMatcher, type ChildWorkflow } from '../workflow/children-matcher.js';

/** What a fan-in gate that opened hands the step: the children that ended, and the signals it claimed for them. */
export interface FanInPass {
  children: ChildWorkflow[];
  signalIds: string[];
}

/**
 * The fan-in gate (`waitFor: childrenOf('fanOut', { count })`). A plain `waitFor` step attaches one
 * signal and is pinned to it; a fan-in step decides on a count instead, so it pins nothing:
 *
 * - its gate (phase 1, under the workflow lock, which every child's end takes before it commits)
 *   counts the ended children of step `fanOut` and opens when `count` of them have ended — claiming
 *   the `child_finished` signal of each (as attaching a signal claims it) and handing them to the
 *   body in `this.children` — or parks the step;
 * - a `child_finished` signal delivered to the parked step (SignalRendezvous.dispatch) only makes it
 *   count again, and wakes it, unpinned, once the count is reached: its gate counts once more;
 * - the step's clean end (completed or skipped) consumes the signals its gate claimed
 *   (StepOutcomes' applyClose), as a pinned signal is consumed; any other end leaves them claimed,
 *   and a retry's gate claims them again (`claimed` 2, `consumed` 1, as a retried signal step).
 */
export class FanIn {
  constructor(private readonly store: WorkflowStore) {}

  /** The gate: the ended children and their claimed signals, or null with the execution parked. A step that timed out passes with what ended. */
  async gate(manager: EntityManager, workflow: WorkflowRecord, execution: StepExecution, matcher: ChildrenMatcher, timedOut: boolean): Promise<FanInPass | null> {
    const ended = await this.endedChildren(manager, workflow, matcher);
    if (!ended.reached && !timedOut) {
      await this.store.transitionExecution(manager, execution, 'waiting', null, { waitingSince: this.store.now() });
      return null;
    }
    const signals = await unconsumedSignals(manager, workflow.id, CHILD_FINISHED, ended.children.map((child) => child.id));
    await claimSignals(manager, signals.map((signal) => signal.id), this.store.now());
    return { children: ended.children, signalIds: signals.map((signal) => signal.id) };
  }

  /** Whether enough of the step's children have ended for the gate to open (a parked fan-in step is then woken). */
  async reached(manager: EntityManager, workflow: WorkflowRecord, matcher: ChildrenMatcher): Promise<boolean> {
    // Asked at every child's end while the step is parked: counted, never read row by row.
    await this.store.flush(manager);
    const { all, ended } = await countChildrenOfStep(manager, workflow.id, matcher.stepName);
    return ended >= matcher.needed(all);
  }

  /** Consumes the signals a gate claimed, at the step's clean end. */
  async settle(manager: EntityManager, signalIds: readonly string[]): Promise<void> {
    if (signalIds.length === 0) return;
    await this.store.flush(manager);
    await consumeSignals(manager, [...signalIds], this.store.now());
  }

  private async endedChildren(manager: EntityManager, workflow: WorkflowRecord, matcher: ChildrenMatcher): Promise<{ children: ChildWorkflow[]; reached: boolean }> {
    await this.store.flush(manager);
    const all = await childrenOfStep(manager, workflow.id, matcher.stepName);
    const children = all
      .filter((child) => child.state === 'finished' || child.state === 'canceled')
      .map((child) => ({ id: child.id, workflowClass: child.type, key: child.childKey!, state: child.state as ChildEndState, result: child.result ?? null }));
    return { children, reached: children.length >= matcher.needed(all.length) };
  }
}
