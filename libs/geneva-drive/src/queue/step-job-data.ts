import type { StepJob } from './queue.port.js';

/** What a step job carries in Redis: the StepJob without what the queue itself keeps (when, how, under which id). */
export type StepJobData = Omit<StepJob, 'runAt' | 'jobOptions' | 'jobId'>;

/** The job's data, every field the engine put on the StepJob passed through as it is. */
export function stepJobData(job: StepJob): StepJobData {
  const { runAt: _runAt, jobOptions: _jobOptions, jobId: _jobId, ...data } = job;
  return data;
}

/**
 * The options Bull and BullMQ both take for a step job: due at `runAt`, one attempt (what follows a
 * failure is the engine's exception policy, already committed), removed once done so that a later
 * re-enqueue of the same execution (resume, recovery) is not swallowed, and the step's priority/lifo.
 */
export function stepJobOptions(job: StepJob) {
  return {
    delay: Math.max(0, job.runAt.getTime() - Date.now()),
    attempts: 1,
    removeOnComplete: true,
    removeOnFail: true,
    ...(job.jobOptions.priority !== undefined ? { priority: job.jobOptions.priority } : {}),
    ...(job.jobOptions.lifo !== undefined ? { lifo: job.jobOptions.lifo } : {}),
  };
}
