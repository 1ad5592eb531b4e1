import { Signal, type StepExecution, type WorkflowRecord, type WorkflowService } from 'geneva-drive';
import type { EntityManager } from 'typeorm';

/** The most signals a timeline lists (the latest ones): anyone can post webhooks, so a workflow's signals are unbounded. */
export const TIMELINE_SIGNALS = 20;
/** Payloads longer than this (as JSON) are left out of the timeline, their size given instead. */
export const TIMELINE_PAYLOAD_BYTES = 4096;

/**
 * A workflow as the example's timeline endpoints show it: its state, every step execution (a
 * workflow has a few) and its latest {@link TIMELINE_SIGNALS} signals, oldest first, with
 * `signalsOmitted` counting the older ones and large payloads replaced by their size: the answer
 * stays small however many webhook calls a workflow received.
 */
export async function workflowTimeline(workflows: WorkflowService, manager: EntityManager, record: WorkflowRecord) {
  const { history, latest, total } = await stepsAndSignals(workflows, manager, record);
  return {
    workflow: { id: record.id, type: record.type, state: record.state, nextStepName: record.nextStepName },
    steps: history.map((e) => ({
      step: e.stepName,
      state: e.state,
      outcome: e.outcome,
      waitingSince: e.waitingSince,
      at: e.updatedAt,
    })),
    signals: latest.reverse().map((s) => {
      const bytes = Buffer.byteLength(JSON.stringify(s.payload) ?? '');
      return {
        name: s.name,
        state: s.state,
        key: s.idempotencyKey,
        claimed: s.claimed,
        consumed: s.consumed,
        ...(bytes > TIMELINE_PAYLOAD_BYTES ? { payloadOmitted: { bytes } } : { payload: s.payload }),
      };
    }),
    signalsOmitted: total - latest.length,
  };
}

/** How many times the steps are read again before the timeline settles for what it read last. */
const MAX_READINGS = 5;

/**
 * The steps and the latest signals as of one moment. They are two reads, and a commit between them
 * could show a step beside its signal as they never were together (completed beside its signal still
 * claimed, waiting beside the signal that woke it). Every commit that changes a signal's state (a
 * wake-up claims it, a step's end consumes it) also changes its step's execution, so signals read
 * between two equal readings of the steps belong with them.
 */
async function stepsAndSignals(workflows: WorkflowService, manager: EntityManager, record: WorkflowRecord) {
  let history = await workflows.executionHistory(record);
  for (let reading = 1; ; reading++) {
    const [latest, total] = await manager.findAndCount(Signal, { where: { workflowId: record.id }, order: { id: 'DESC' }, take: TIMELINE_SIGNALS });
    const again = await workflows.executionHistory(record);
    if (sameSteps(history, again) || reading === MAX_READINGS) return { history: again, latest, total };
    history = again;
  }
}

function sameSteps(a: StepExecution[], b: StepExecution[]): boolean {
  const shown = (e: StepExecution) => `${e.id} ${e.state} ${e.outcome} ${e.signalId} ${e.updatedAt.getTime()}`;
  return a.length === b.length && a.every((e, i) => shown(e) === shown(b[i]));
}
