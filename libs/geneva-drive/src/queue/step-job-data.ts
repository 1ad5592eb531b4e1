import type { StepJob, StepJobHints } from './queue.port.js';

/** What a step job carries in Redis: its execution and, flat beside it, the job's hints (StepJob.hints). */
export interface StepJobData extends StepJobHints {
  executionId: string;
}

/** The job's data: the execution and the hints the engine put on the StepJob. */
export function stepJobData(job: StepJob): StepJobData {
  return { executionId: job.executionId, ...job.hints };
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
