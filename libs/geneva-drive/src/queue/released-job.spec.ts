/** The job a process hands back to a Redis queue when it does not have the execution's class or step. */
import { describe, expect, it } from '@jest/globals';
import { MAX_RELEASE_DELAY_MS, releaseDelayMs, releasedJob } from './released-job.js';
import { deliveredJob } from './step-job-data.js';

describe('released job', () => {
  it('waits 1 s after the first hand-back, 1 s more after each next one, never more than 5 minutes', () => {
    expect([0, 1, 2, 3, 9].map(releaseDelayMs)).toEqual([1_000, 2_000, 3_000, 4_000, 10_000]);
    expect(releaseDelayMs(298)).toBe(299_000);
    expect(releaseDelayMs(299)).toBe(MAX_RELEASE_DELAY_MS);
    expect(releaseDelayMs(10_000)).toBe(MAX_RELEASE_DELAY_MS);
  });

  it('alternates between two ids per engine job id, never the id of the job being handed back', () => {
    const first = releasedJob({ executionId: '7', workflowId: '2', workflowType: 'Order', stepName: 'reserveStock' }, '7');
    expect(first).toEqual({ id: '7-unowned-1', data: { executionId: '7', workflowId: '2', workflowType: 'Order', stepName: 'reserveStock', releasedFrom: '7', releases: 1 }, delay: 1_000 });
    const second = releasedJob(first.data, deliveredJob(first.data, first.id).jobId);
    expect(second).toMatchObject({ id: '7-unowned-2', data: { releasedFrom: '7', releases: 2 }, delay: 2_000 });
    const third = releasedJob(second.data, deliveredJob(second.data, second.id).jobId);
    expect(third).toMatchObject({ id: '7-unowned-1', data: { releases: 3 }, delay: 3_000 });
  });

  it('is delivered as the job it stands for: a deadline job stays one, a takeover is not taken over twice', () => {
    const deadline = releasedJob({ executionId: '7', workflowId: '2' }, '7-deadline');
    expect(deadline.id).toBe('7-deadline-unowned-1');
    expect(deliveredJob(deadline.data, deadline.id)).toEqual({ executionId: '7', jobId: '7-deadline', hints: { workflowId: '2' }, takeover: false });
    const takeover = releasedJob({ executionId: '7', takeoverOf: '7-wake-3' }, '7-wake-3');
    expect(takeover.data).not.toHaveProperty('takeoverOf');
    expect(deliveredJob(takeover.data, takeover.id)).toEqual({ executionId: '7', jobId: '7-wake-3', hints: {}, takeover: false });
  });
});
