// Loaded only for the `bull` adapter (queue-registration.ts imports it lazily): @nestjs/bull and bull
// are optional peers.
import { BullModule, getQueueToken, Process, Processor, type BullModuleOptions } from '@nestjs/bull';
import { Inject, type DynamicModule, type Provider, type Type } from '@nestjs/common';
import type { Job } from 'bull';
import { DEFAULT_QUEUE_NAME } from '../geneva-drive.constants.js';
import type { BullQueueAdapterOptions } from '../interfaces/geneva-drive-options.interface.js';
import { StepNotDefinedError } from '../errors/step-not-defined.error.js';
import { isStalledReturn, releaseBullJob } from './bull-queue.adapter.js';
import { deliveredJob, type StepJobData } from './step-job-data.js';
import { ENGINE_BULL_QUEUE, GenevaDriveBullQueueModule, STEP_JOB_GATE } from './queue.tokens.js';
import { StepJobGate } from './step-job-gate.js';

/**
 * The engine's queue registered with `BullModule.registerQueue` (so `BullModule.forRoot` settings
 * apply and `@InjectQueue(name)` resolves), and its consumer, a `@Processor` Nest starts. An
 * enqueue-only process (concurrency 0) registers no consumer.
 */
export function bullQueueModule(options: BullQueueAdapterOptions): DynamicModule {
  const name = options.name ?? DEFAULT_QUEUE_NAME;
  const concurrency = options.concurrency ?? 1;
  const providers: Provider[] = [
    { provide: ENGINE_BULL_QUEUE, useExisting: getQueueToken(name) },
    { provide: STEP_JOB_GATE, useValue: new StepJobGate(concurrency) },
  ];
  if (concurrency > 0) providers.push(stepProcessor(name, concurrency));
  return {
    module: GenevaDriveBullQueueModule,
    imports: [BullModule.registerQueue(registration(name, options))],
    providers,
    exports: [BullModule, ENGINE_BULL_QUEUE, STEP_JOB_GATE],
  };
}

/** Bull's options as given, without keys left undefined (they would hide `BullModule.forRoot`'s). */
function registration(name: string, options: BullQueueAdapterOptions): BullModuleOptions {
  const { redis, prefix, configKey, limiter, settings, defaultJobOptions, createClient } = options;
  const given: Record<string, unknown> = { prefix, configKey, limiter, settings, defaultJobOptions, createClient };
  if (typeof redis === 'string') given.url = redis;
  else given.redis = redis;
  return { name, ...Object.fromEntries(Object.entries(given).filter(([, value]) => value !== undefined)) } as BullModuleOptions;
}

/** A processor class for queue `name`: decorators are applied here because the name and concurrency are options. */
function stepProcessor(name: string, concurrency: number): Type {
  class GenevaDriveStepProcessor {
    constructor(private readonly gate: StepJobGate) {}

    /**
     * A takeover job, or a job Bull hands back after a stall, takes over the run of a dead process
     * (StepJobGate.run). A job of a class or step this process does not have goes back to the queue.
     */
    async handle(job: Job<StepJobData>): Promise<void> {
      const { executionId, jobId, hints, takeover } = deliveredJob(job.data, String(job.id));
      try {
        return await this.gate.run(executionId, jobId, hints, { takeover: takeover || (await isStalledReturn(job)) });
      } catch (error) {
        if (!(error instanceof StepNotDefinedError)) throw error;
        await releaseBullJob(job, jobId);
      }
    }
  }
  Inject(STEP_JOB_GATE)(GenevaDriveStepProcessor, undefined, 0);
  Processor(name)(GenevaDriveStepProcessor);
  const handle = Object.getOwnPropertyDescriptor(GenevaDriveStepProcessor.prototype, 'handle')!;
  Process({ concurrency })(GenevaDriveStepProcessor.prototype, 'handle', handle);
  return GenevaDriveStepProcessor;
}
