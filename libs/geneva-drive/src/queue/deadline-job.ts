/**
 * The job that ends a parked step's wait when its `timeout` passes. It has an id of its own: the job
 * that parked the execution may still be in the queue, and a signal's wake-up has its own id too, so
 * the three never collapse into one. The queue's handler tells it from a step job by this id.
 */
const DEADLINE_SUFFIX = '-deadline';

export function deadlineJobId(executionId: string): string {
  return `${executionId}${DEADLINE_SUFFIX}`;
}

export function isDeadlineJob(jobId: string | undefined): boolean {
  return jobId !== undefined && jobId.endsWith(DEADLINE_SUFFIX);
}

/**
 * The job that runs a step whose wait timed out with `onTimeout: 'run'`: the deadline job's run
 * schedules it under this id, so that a takeover of that run knows the execution was left to it.
 */
export function timeoutJobId(executionId: string): string {
  return `${executionId}-timeout`;
}
