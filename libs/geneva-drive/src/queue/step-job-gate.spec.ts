/**
 * StepJobGate's takeover: the job of a run whose process died first has what that run left recovered
 * (the function housekeeping registers), then runs as usual; any other job runs as it is.
 */
import { describe, expect, it } from '@jest/globals';
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
