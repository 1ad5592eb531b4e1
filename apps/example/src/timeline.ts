import { Signal, type WorkflowRecord, type WorkflowService } from 'geneva-drive';
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
  // The steps first, then the signals: a step's end and the consumption of its signal commit
  // together, so signals read after a completed step show what that end did to them (read the other
  // way round, a commit between the two reads showed a completed step beside its signal still claimed).
  const history = await workflows.executionHistory(record);
  const [latest, total] = await manager.findAndCount(Signal, { where: { workflowId: record.id }, order: { id: 'DESC' }, take: TIMELINE_SIGNALS });
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
