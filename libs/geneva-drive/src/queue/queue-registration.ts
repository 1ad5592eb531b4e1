import { Module, type DynamicModule, type LoggerService, type Provider } from '@nestjs/common';
import { importOptional } from '../errors/missing-dependency.error.js';
import { QueueConfigurationError } from '../errors/queue-configuration.error.js';
import { GENEVA_DRIVE_LOGGER, GENEVA_DRIVE_OPTIONS, QUEUE_PORT } from '../geneva-drive.constants.js';
import type { BullQueueAdapterOptions, QueueAdapterOptions, ResolvedGenevaDriveOptions } from '../interfaces/geneva-drive-options.interface.js';
import { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import { TransactionRunner } from '../persistence/transaction-runner.js';
import { BullQueueAdapter } from './bull-queue.adapter.js';
import { LocalQueueAdapter } from './local-queue.adapter.js';
import { ManualQueueAdapter } from './manual-queue.adapter.js';
import type { QueuePort } from './queue.port.js';
import type { StepJobGate } from './step-job-gate.js';

/** The Bull queue @nestjs/bull built for the engine, and the gate its processor hands jobs through. */
export const ENGINE_BULL_QUEUE = Symbol.for('geneva-drive:bull-queue');
export const STEP_JOB_GATE = Symbol.for('geneva-drive:step-job-gate');

/** Holds the engine's `BullModule.registerQueue` (built in bull-queue.module.ts) and re-exports its queue token. */
@Module({})
export class GenevaDriveBullQueueModule {}

/** What GenevaDriveModule adds for its queue: the modules the adapter needs, the QueuePort provider, the exports. */
export interface QueueRegistration {
  imports: Array<Promise<DynamicModule>>;
  providers: Provider[];
  exports: Array<typeof GenevaDriveBullQueueModule>;
}

/**
 * `declared` is the queue known when the module is declared (`forRoot`'s option, or the one beside
 * `forRootAsync`'s factory): a Bull queue must be, to be registered with @nestjs/bull.
 */
export function queueRegistration(declared: QueueAdapterOptions | undefined): QueueRegistration {
  const bull = declared?.adapter === 'bull' ? declared : undefined;
  return {
    imports: bull ? [lazyModule(() => loadBullQueueModule(bull))] : [],
    providers: [
      {
        provide: QUEUE_PORT,
        useFactory: (options: ResolvedGenevaDriveOptions, transactions: TransactionRunner, logger: LoggerService, schema: SchemaCapabilities, bullQueue?: BullQueueAdapter['queue'], gate?: StepJobGate): QueuePort => {
          const queue = options.queue;
          if (typeof queue.adapter === 'object') return queue.adapter;
          switch (queue.adapter) {
            case 'bull':
              if (!bullQueue || !gate) {
                throw new QueueConfigurationError(
                  "geneva-drive: a 'bull' queue returned by forRootAsync's factory cannot be registered with @nestjs/bull: declare `queue` beside useFactory (connection settings that need injection go to BullModule.forRootAsync)",
                );
              }
              return new BullQueueAdapter(bullQueue, gate, queue, logger, options.chainSteps.maxSteps > 0);
            case 'manual':
              return new ManualQueueAdapter();
            default:
              return new LocalQueueAdapter(transactions, queue.concurrency ?? 1, logger, schema);
          }
        },
        inject: [GENEVA_DRIVE_OPTIONS, TransactionRunner, GENEVA_DRIVE_LOGGER, SchemaCapabilities, ...(bull ? [ENGINE_BULL_QUEUE, STEP_JOB_GATE] : [])],
      },
    ],
    exports: bull ? [GenevaDriveBullQueueModule] : [],
  };
}

/** `bull` first, so an application with neither package is told about the queue library itself. */
async function loadBullQueueModule(options: BullQueueAdapterOptions): Promise<DynamicModule> {
  const feature = "The queue adapter 'bull'";
  await importOptional('bull', feature, () => import('bull'));
  const { bullQueueModule } = await importOptional('@nestjs/bull', feature, () => import('./bull-queue.module.js'));
  return bullQueueModule(options);
}

/**
 * Nest awaits a promised import while it scans the modules, possibly long after the module was
 * declared: the rejection (a missing package) is marked handled here so that it reaches Nest, and
 * the application's bootstrap, instead of ending the process as an unhandled rejection.
 */
function lazyModule(load: () => Promise<DynamicModule>): Promise<DynamicModule> {
  const module = load();
  module.catch(() => undefined);
  return module;
}

/** The queue declared with the module, unless the options (forRootAsync's factory) give one instead; both at once is ambiguous. */
export function declaredQueue(declared: QueueAdapterOptions | undefined, given: QueueAdapterOptions | undefined): QueueAdapterOptions | undefined {
  if (declared && given && declared !== given) {
    throw new QueueConfigurationError('geneva-drive: `queue` is given both beside forRootAsync\'s useFactory and in what it returns: give it once');
  }
  return declared ?? given;
}
