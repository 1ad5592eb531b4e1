/** What a step job carries in Redis, and the takeover job of a dead process's run. */
import { describe, expect, it } from '@jest/globals';
import { deliveredJob, takeoverJob } from './step-job-data.js';

describe('step job data', () => {
  it('a takeover job has an id of its own, names the run it takes over, and goes to the front of the queue', () => {
    const job = takeoverJob({ executionId: '7', jobId: '7-wake-3', hints: { workflowId: '2' }, runAt: new Date(0), jobOptions: {} });
    expect(job.id).toBe('7-wake-3-takeover');
    expect(job.data).toEqual({ executionId: '7', workflowId: '2', takeoverOf: '7-wake-3' });
    expect(job.options).toMatchObject({ delay: 0, attempts: 1, lifo: true });
  });

  it('a takeover job of a step with a priority keeps its priority instead', () => {
    const job = takeoverJob({ executionId: '7', runAt: new Date(0), jobOptions: { priority: 3 } });
    expect(job.id).toBe('7-takeover');
    expect(job.options).toMatchObject({ priority: 3 });
    expect(job.options).not.toHaveProperty('lifo');
  });

  it('a delivered takeover job runs under the job id of the run it takes over, and its hints leave the marker out', () => {
    expect(deliveredJob({ executionId: '7', workflowId: '2', takeoverOf: '7-wake-3' }, '7-wake-3-takeover')).toEqual({
      executionId: '7',
      jobId: '7-wake-3',
      hints: { workflowId: '2' },
      takeover: true,
    });
    expect(deliveredJob({ executionId: '8', workflowId: '2' }, '8')).toEqual({ executionId: '8', jobId: '8', hints: { workflowId: '2' }, takeover: false });
  });
});
