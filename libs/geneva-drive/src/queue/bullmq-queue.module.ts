// Loaded only for the `bullmq` adapter (queue-registration.ts imports it lazily): @nestjs/bullmq and
// bullmq are optional peers.
import { BullModule, getQueueToken, Processor, WorkerHost, type RegisterQueueOptions } from '@nestjs/bullmq';
import { Inject, type DynamicModule, type Provider, type Type } from '@nestjs/common';
import type { Job, Queue } from 'bullmq';
import { StepNotDefinedError } from '../errors/step-not-defined.error.js';
import { DEFAULT_QUEUE_NAME } from '../geneva-drive.constants.js';
import type { BullMqQueueAdapterOptions } from '../interfaces/geneva-drive-options.interface.js';
import { engineJobId, releaseBullMqJob, STEP_JOB_NAME, type BullMqStepConsumer } from './bullmq-queue.adapter.js';
import { ENGINE_BULLMQ_CONSUMER, ENGINE_BULLMQ_QUEUE, GenevaDriveBullMqQueueModule, STEP_JOB_GATE } from './queue.tokens.js';
import { deliveredJob, type StepJobData } from './step-job-data.js';
import { StepJobGate } from './step-job-gate.js';

/**
 * The engine's queue registered with @nestjs/bullmq's `BullModule.registerQueue` (so
 * `BullModule.forRoot` settings apply and `@InjectQueue(name)` resolves), and its consumer, a
 * `@Processor` whose worker Nest starts. An enqueue-only process (concurrency 0) registers no consumer.
 */
export function bullMqQueueModule(options: BullMqQueueAdapterOptions): DynamicModule {
  const name = options.name ?? DEFAULT_QUEUE_NAME;
  const concurrency = options.concurrency ?? 1;
  const providers: Provider[] = [
    { provide: ENGINE_BULLMQ_QUEUE, useExisting: getQueueToken(name) },
    { provide: STEP_JOB_GATE, useValue: new StepJobGate(concurrency) },
    // One provider of the class (not an alias of another): @nestjs/bullmq starts a worker per provider it finds.
    concurrency > 0 ? { provide: ENGINE_BULLMQ_CONSUMER, useClass: stepProcessor(name, { ...options.worker, concurrency }) } : { provide: ENGINE_BULLMQ_CONSUMER, useValue: null },
  ];
  return {
    module: GenevaDriveBullMqQueueModule,
    imports: [BullModule.registerQueue(registration(name, options))],
    providers,
    exports: [BullModule, ENGINE_BULLMQ_QUEUE, ENGINE_BULLMQ_CONSUMER, STEP_JOB_GATE],
  };
}

/** BullMQ's options as given, without keys left undefined (they would hide `BullModule.forRoot`'s). */
function registration(name: string, options: BullMqQueueAdapterOptions): RegisterQueueOptions {
  const { redis, prefix, configKey, defaultJobOptions } = options;
  const given: Record<string, unknown> = { prefix, configKey, defaultJobOptions, connection: typeof redis === 'string' ? { url: redis } : redis };
  return { name, ...Object.fromEntries(Object.entries(given).filter(([, value]) => value !== undefined)) } as RegisterQueueOptions;
}

/** A processor class for queue `name`: the decorator is applied here because the name and worker options are options. */
function stepProcessor(name: string, workerOptions: Record<string, unknown>): Type<BullMqStepConsumer> {
  class GenevaDriveBullMqProcessor extends WorkerHost implements BullMqStepConsumer {
    readonly tasks = new Map<string, () => Promise<unknown>>();

    constructor(
      private readonly gate: StepJobGate,
      private readonly queue: Queue<StepJobData>,
    ) {
      super();
    }

    /** A repeated task whose job arrives in a process that did not schedule it fails, and runs where it is known next period. */
    process(job: Job<StepJobData>): Promise<unknown> {
      if (job.name === STEP_JOB_NAME) {
        // A takeover job, or a job BullMQ hands back after a stall, takes over the run of a dead
        // process (StepJobGate.run). A job of a class or step this process does not have goes back to the queue.
        const { executionId, jobId, hints, takeover } = deliveredJob(job.data, engineJobId(String(job.id)));
        return this.gate.run(executionId, jobId, hints, { takeover: takeover || job.stalledCounter > 0 }).catch((error: unknown) => {
          if (!(error instanceof StepNotDefinedError)) throw error;
          return releaseBullMqJob(this.queue, job, jobId);
        });
      }
      const task = this.tasks.get(job.name);
      if (!task) return Promise.reject(new Error(`No task named ${job.name} in this process`));
      return task();
    }
  }
  Inject(STEP_JOB_GATE)(GenevaDriveBullMqProcessor, undefined, 0);
  Inject(ENGINE_BULLMQ_QUEUE)(GenevaDriveBullMqProcessor, undefined, 1);
  Processor(name, workerOptions)(GenevaDriveBullMqProcessor);
  return GenevaDriveBullMqProcessor;
}
