import type { StepJob, StepJobHints } from '../interfaces/queue.port.js';

/** What a step job carries in Redis: its execution and, flat beside it, the job's hints (StepJob.hints). */
export interface StepJobData extends StepJobHints {
  executionId: string;
  /**
   * A takeover job (see RunLedger): the engine job id of a run whose process died, which this job
   * runs again after recovering what the run left in progress.
   */
  takeoverOf?: string;
  /** A job handed back by a process without the execution's class or step (released-job.ts): the engine job id it stands for. */
  releasedFrom?: string;
  /** How many times that job was handed back so far (its next delay grows with it). */
  releases?: number;
}

/**
 * The takeover job of a run whose process died (RunLedger): under an id of its own (the run's job
 * may still be in the queue), due now and at the front of the queue (`lifo`) — its step was due a
 * lease ago — unless the step has a priority of its own.
 */
export function takeoverJob(job: StepJob): { id: string; data: StepJobData; options: ReturnType<typeof stepJobOptions> } {
  const engineJobId = job.jobId ?? job.executionId;
  const lifo = job.jobOptions.priority === undefined ? { lifo: true } : {};
  return { id: `${engineJobId}-takeover`, data: { ...stepJobData(job), takeoverOf: engineJobId }, options: stepJobOptions({ ...job, jobOptions: { ...job.jobOptions, ...lifo } }) };
}

/** The job's id, hints and whether it takes a dead process's run over, from what Redis handed over. */
export function deliveredJob(data: StepJobData, queueJobId: string): { executionId: string; jobId: string; hints: StepJobHints; takeover: boolean } {
  const { executionId, takeoverOf, releasedFrom, releases: _, ...hints } = data;
  return { executionId, jobId: takeoverOf ?? releasedFrom ?? queueJobId, hints, takeover: takeoverOf !== undefined };
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
