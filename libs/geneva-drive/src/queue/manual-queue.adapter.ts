import type { QueuePort, StepJob } from '../interfaces/queue.port.js';

/** Records jobs and never runs them: tests drive execution with the `geneva-drive/testing` helpers. */
export class ManualQueueAdapter implements QueuePort {
  readonly jobs: StepJob[] = [];

  async enqueue(job: StepJob): Promise<boolean> {
    this.jobs.push(job);
    return true;
  }

  async start(): Promise<void> {}

  async repeat(): Promise<void> {}

  async stop(): Promise<void> {}

  /** Forgets the recorded jobs. */
  clear(): void {
    this.jobs.length = 0;
  }
}
