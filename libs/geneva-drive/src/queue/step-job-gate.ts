import type { StepJobHandler, StepJobHints } from './queue.port.js';

/**
 * Hands jobs from a queue consumer Nest starts itself (a `@Processor` of @nestjs/bull, which
 * consumes from module init) to the engine, which is ready only once the application has
 * bootstrapped: a job taken earlier waits here for the handler.
 */
export class StepJobGate {
  private open!: (handler: StepJobHandler) => void;
  private readonly handler = new Promise<StepJobHandler>((resolve) => (this.open = resolve));
  private accepting = false;
  /** Jobs handed to the engine and not finished yet, from the queue or started here. */
  inFlight = 0;

  /** Lets waiting and future jobs through to `handler`. */
  start(handler: StepJobHandler): void {
    this.accepting = true;
    this.open(handler);
  }

  /** Whether the engine takes jobs now (started, not stopping). */
  get isAccepting(): boolean {
    return this.accepting;
  }

  /** Refuses jobs the engine will never take (the application stops before it bootstrapped); housekeeping re-enqueues them. */
  refuse(): void {
    this.accepting = false;
    this.open(async (executionId) => {
      throw new Error(`Step job ${executionId} arrived while the application was stopping`);
    });
  }

  async run(executionId: string, jobId: string, hints?: StepJobHints): Promise<void> {
    this.inFlight++;
    try {
      return await (await this.handler)(executionId, jobId, hints);
    } finally {
      this.inFlight--;
    }
  }
}
