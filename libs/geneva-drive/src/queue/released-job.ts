import type { StepJobData } from './step-job-data.js';

/**
 * A Redis queue's job that this process handed back because it does not have the execution's
 * workflow class or step (StepNotDefinedError: another version of the code owns it — a worker not
 * yet deployed, or one already replaced). The process decided nothing; the job goes back to the
 * queue as a new delayed job, for any worker to take.
 *
 * The delay grows by 1 s with each hand-back of the same job (1 s, 2 s, 3 s, …) up to 5 minutes.
 * Linear, not doubling: which worker takes a job is chance, so a job meets old workers several times
 * in a row as often as they are many — early in a rolling deploy — and doubling delays would then
 * leave it minutes behind once the deploy is done (k hand-backs cost k²/2 s here, not 2^k s). A
 * fleet where no worker has the class (a class removed without a drain, a deploy that never
 * finished) still slows down to one delivery per job every 5 minutes, without a database read (the
 * job's hints name its class and step): not a spin. Housekeeping reports such executions
 * (`unrunnableExecutions`).
 *
 * Its id is `<engine job id>-unowned-1` or `-2`, alternating: never the id of the job being handed
 * back, which is still active in the queue while its processor runs (the queue would ignore an add
 * of that id), and never more than two per engine job id, so copies — a job of the same execution
 * that housekeeping's stuck-scheduled sweep added again, a duplicate delivery — merge into them
 * instead of multiplying (an add of a waiting or delayed id is a no-op). The job's data keeps the
 * engine job id (`releasedFrom`): the engine sees the job as the one it enqueued — the execution's
 * `jobId`, a deadline job's `-deadline` suffix, a takeover's bookkeeping all stay as they were.
 */

/** The first hand-back waits this long, each later one this much longer, up to {@link MAX_RELEASE_DELAY_MS}. */
export const RELEASE_DELAY_STEP_MS = 1_000;
export const MAX_RELEASE_DELAY_MS = 5 * 60_000;

/** How long the job waits in the queue after its `releases`-th hand-back (0 for the first). */
export function releaseDelayMs(releases: number): number {
  return Math.min(MAX_RELEASE_DELAY_MS, RELEASE_DELAY_STEP_MS * (releases + 1));
}

/** The job to add for a job handed back: its id, its data and its delay (see above). */
export function releasedJob(data: StepJobData, engineJobId: string): { id: string; data: StepJobData; delay: number } {
  const { takeoverOf: _, releases = 0, ...rest } = data;
  return {
    id: `${engineJobId}-unowned-${(releases % 2) + 1}`,
    // A takeover's recovery already ran in the process that handed it back: the new job is a plain one.
    data: { ...rest, releasedFrom: engineJobId, releases: releases + 1 },
    delay: releaseDelayMs(releases),
  };
}
