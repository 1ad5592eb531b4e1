/** Manual § Scaling out with Bull: the queue through @nestjs/bull, and a queue adapter of your own. */
import { BullModule, InjectQueue } from '@nestjs/bull';
import { Injectable, Module } from '@nestjs/common';
import type { Queue } from 'bull';
import { GenevaDriveModule, type QueuePort, type StepJob, type StepJobHandler } from 'geneva-drive';

// #region nest-bull
@Injectable()
export class QueueDashboard {
  // The engine's queue, under the name given in `queue.name`, for bull-board or an admin page.
  constructor(@InjectQueue('orders-workflows') private readonly queue: Queue) {}

  counts() {
    return this.queue.getJobCounts();
  }
}

@Module({
  imports: [
    BullModule.forRoot({ redis: process.env.REDIS_URL, prefix: 'shop-production' }),
    GenevaDriveModule.forRoot({ queue: { adapter: 'bull', name: 'orders-workflows', concurrency: 4 } }),
  ],
  providers: [QueueDashboard],
})
export class WorkerModule {}
// #endregion nest-bull

// #region custom-adapter
/** Step jobs on timers in this process: a minimal QueuePort (no restart safety, unlike 'local'). */
export class TimerQueue implements QueuePort {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly running = new Set<Promise<void>>();
  private handler: StepJobHandler | undefined;

  async enqueue(job: StepJob): Promise<void> {
    const id = job.jobId ?? job.executionId;
    if (this.timers.has(id)) return; // one job per id, as the engine expects
    const delay = Math.max(0, job.runAt.getTime() - Date.now());
    this.timers.set(id, setTimeout(() => this.run(id, job), delay));
  }

  async start(handler: StepJobHandler): Promise<void> {
    this.handler = handler;
  }

  async repeat(name: string, everyMs: number, task: () => Promise<unknown>): Promise<void> {
    this.timers.set(name, setInterval(() => void task().catch(() => undefined), everyMs));
  }

  async stop(): Promise<void> {
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    await Promise.allSettled([...this.running]);
  }

  private run(id: string, job: StepJob): void {
    this.timers.delete(id);
    if (!this.handler) return; // an enqueue-only process; housekeeping recovers the execution
    const running = this.handler(job.executionId, id, job.hints)
      .catch(() => undefined) // the outcome is already recorded by the engine
      .finally(() => this.running.delete(running));
    this.running.add(running);
  }
}

export const customQueueGenevaDrive = GenevaDriveModule.forRoot({ queue: { adapter: new TimerQueue() } });
// #endregion custom-adapter
