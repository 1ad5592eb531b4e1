/**
 * `--profile=DIR`: a CPU profile of each timed throughput run and of each run of signals one at a
 * time, written as DIR/<n>-<engine>-<what>.cpuprofile (n counts the profiles; `what` is the arrival
 * order, or `one-at-a-time`) (open it in Chrome's DevTools, or sum it by package). Only the timed window is sampled, so the
 * setup, the checks and the idle windows do not dilute what the hot path costs.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

let directory: string | undefined;
let session: Session | undefined;
let runs = 0;

export function profileInto(dir: string | undefined): void {
  directory = dir;
}

/** Runs `work`, sampled into `<n>-<name>.cpuprofile` when `--profile` was given. */
export async function profiled<T>(name: string, work: () => Promise<T>): Promise<T> {
  if (directory === undefined) return work();
  if (!session) {
    session = new Session();
    session.connect();
    await session.post('Profiler.enable');
  }
  await session.post('Profiler.start');
  try {
    return await work();
  } finally {
    const { profile } = await session.post('Profiler.stop');
    mkdirSync(directory, { recursive: true });
    runs += 1;
    writeFileSync(`${directory}/${String(runs).padStart(2, '0')}-${name}.cpuprofile`, JSON.stringify(profile));
  }
}
