import type { SignalService, WorkflowRecord, WorkflowService } from 'geneva-drive';

/** A workflow as the example's timeline endpoints show it: its state, every step execution and every signal, oldest first. */
export async function workflowTimeline(workflows: WorkflowService, signals: SignalService, record: WorkflowRecord) {
  return {
    workflow: { id: record.id, type: record.type, state: record.state, nextStepName: record.nextStepName },
    steps: (await workflows.executionHistory(record)).map((e) => ({
      step: e.stepName,
      state: e.state,
      outcome: e.outcome,
      waitingSince: e.waitingSince,
      at: e.updatedAt,
    })),
    signals: (await signals.list(record)).map((s) => ({
      name: s.name,
      state: s.state,
      key: s.idempotencyKey,
      claimed: s.claimed,
      consumed: s.consumed,
      payload: s.payload,
    })),
  };
}
