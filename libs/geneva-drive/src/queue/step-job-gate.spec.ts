/**
 * StepJobGate's takeover: the job of a run whose process died first has what that run left recovered
 * (the function housekeeping registers), then runs as usual; any other job runs as it is. And its
 * hand-offs: a run settles once its workflow's jobs enqueued after its commits are enqueued.
 */
import { describe, expect, it } from '@jest/globals';
import type { EntityManager } from 'typeorm';
import { AfterCommitSubscriber } from '../persistence/after-commit.js';
import { StepJobGate } from './step-job-gate.js';

function gateWithLog(): { gate: StepJobGate; log: string[] } {
  const gate = new StepJobGate(1);
  const log: string[] = [];
  gate.onTakeover(async (executionId, jobId, hints) => void log.push(`recover ${executionId} ${jobId} ${hints?.workflowId}`));
  gate.start(async (executionId, jobId) => void log.push(`run ${executionId} ${jobId}`));
  return { gate, log };
}

describe('StepJobGate takeover', () => {
  it('recovers what the dead run left, then runs the job, for a takeover only', async () => {
    const { gate, log } = gateWithLog();
    await gate.run('7', '7-wake-3', { workflowId: '2' }, { takeover: true });
    await gate.run('8', '8', { workflowId: '2' });
    expect(log).toEqual(['recover 7 7-wake-3 2', 'run 7 7-wake-3', 'run 8 8']);
  });

  it('still recovers for a takeover handed over while the process stops (no other worker gets it again)', async () => {
    const { gate, log } = gateWithLog();
    gate.refuse();
    await gate.run('7', '7', { workflowId: '2' }, { takeover: true });
    expect(log).toEqual(['recover 7 7 2', 'run 7 7']);
  });
});

describe('StepJobGate hand-offs', () => {
  /** Outside a transaction: a callback registered with it starts at once. */
  const committed = {} as EntityManager;
  const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

  it("settles, after giving its slot back, once the enqueues of its workflow's jobs started during the run have", async () => {
    const gate = new StepJobGate(1);
    const handOffs = new AfterCommitSubscriber(() => undefined);
    gate.onHandOffs(handOffs);
    const log: string[] = [];
    const settles = new Map<string, () => void>();
    const enqueue = (label: string, workflowId: string) =>
      handOffs.register(committed, () => new Promise<void>((resolve) => settles.set(label, resolve)).then(() => void log.push(label)), workflowId);

    // The enqueue that started the run (before it), one of the run's workflow and one of another.
    await enqueue('before', '2');
    gate.start(async () => {
      await enqueue('next', '2');
      await enqueue('other workflow', '9');
    });
    let ended = false;
    const run = gate.run('7', '7', { workflowId: '2' }).then(() => (ended = true));
    await nextTurn();
    expect(ended).toBe(false);
    // The slot is free while the run waits.
    expect(gate.tryTake()).toBe(true);
    gate.release();

    // Its workflow's enqueue settles: the run ends, the other workflow's and the earlier one pending.
    settles.get('next')!();
    await run;
    expect(log).toEqual(['next']);
    settles.get('other workflow')!();
    settles.get('before')!();
  });
});
