import type { StepJobHandler, StepJobHints } from './queue.port.js';

/**
 * Hands jobs from a queue consumer Nest starts itself (a `@Processor` of @nestjs/bull, which
 * consumes from module init) to the engine, which is ready only once the application has
 * bootstrapped: a job taken earlier waits here for the handler.
 */
export class StepJobGate {
  private open!: (handler: StepJobHandler) => void;
  private readonly handler = new Promise<StepJobHandler>((resolve) => (this.open = resolve));

  /** Lets waiting and future jobs through to `handler`. */
  start(handler: StepJobHandler): void {
    this.open(handler);
  }

  /** Refuses jobs the engine will never take (the application stops before it bootstrapped); housekeeping re-enqueues them. */
  refuse(): void {
    this.open(async (executionId) => {
      throw new Error(`Step job ${executionId} arrived while the application was stopping`);
    });
  }

  async run(executionId: string, jobId: string, hints?: StepJobHints): Promise<void> {
    return (await this.handler)(executionId, jobId, hints);
  }
}
