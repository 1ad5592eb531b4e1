import { type DynamicModule, type LoggerService, type Provider } from '@nestjs/common';
import { importOptionals } from '../errors/missing-dependency.error.js';
import { QueueConfigurationError } from '../errors/queue-configuration.error.js';
import { GENEVA_DRIVE_LOGGER, GENEVA_DRIVE_OPTIONS, QUEUE_PORT } from '../geneva-drive.constants.js';
import type { BullMqQueueAdapterOptions, BullQueueAdapterOptions, QueueAdapterOptions, ResolvedGenevaDriveOptions } from '../interfaces/geneva-drive-options.interface.js';
import { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import { TransactionRunner } from '../persistence/transaction-runner.js';
import { WorkflowRegistry } from '../registry/workflow.registry.js';
import { BullQueueAdapter, bullRunLedger } from './bull-queue.adapter.js';
import { BullMqQueueAdapter, bullMqRunLedger, type BullMqStepConsumer } from './bullmq-queue.adapter.js';
import { DueJobStarter } from './due-job-starter.js';
import { LocalQueueAdapter } from './local-queue.adapter.js';
import { ManualQueueAdapter } from './manual-queue.adapter.js';
import type { QueuePort } from '../interfaces/queue.port.js';
import type { StepJobGate } from './step-job-gate.js';
import { ENGINE_BULL_QUEUE, ENGINE_BULLMQ_CONSUMER, ENGINE_BULLMQ_QUEUE, GenevaDriveBullMqQueueModule, GenevaDriveBullQueueModule, STEP_JOB_GATE } from './queue.tokens.js';

/** What GenevaDriveModule adds for its queue: the modules the adapter needs, the QueuePort provider, the exports. */
export interface QueueRegistration {
  imports: Array<Promise<DynamicModule>>;
  providers: Provider[];
  exports: Array<typeof GenevaDriveBullQueueModule | typeof GenevaDriveBullMqQueueModule>;
}

/**
 * `declared` is the queue known when the module is declared (`forRoot`'s option, or the one beside
 * `forRootAsync`'s factory): a Bull or BullMQ queue must be, to be registered with @nestjs/bull(mq).
 */
export function queueRegistration(declared: QueueAdapterOptions | undefined, checkDeclaredOptions: () => unknown): QueueRegistration {
  const bull = declared?.adapter === 'bull' ? declared : undefined;
  const bullMq = declared?.adapter === 'bullmq' ? declared : undefined;
  const registered = bull ? [ENGINE_BULL_QUEUE, STEP_JOB_GATE] : bullMq ? [ENGINE_BULLMQ_QUEUE, STEP_JOB_GATE, ENGINE_BULLMQ_CONSUMER] : [];
  return {
    imports: bull
      ? [lazyModule(() => loadBullQueueModule(bull, checkDeclaredOptions))]
      : bullMq
        ? [lazyModule(() => loadBullMqQueueModule(bullMq, checkDeclaredOptions))]
        : [],
    providers: [
      {
        provide: QUEUE_PORT,
        useFactory: (
          options: ResolvedGenevaDriveOptions,
          transactions: TransactionRunner,
          logger: LoggerService,
          schema: SchemaCapabilities,
          registry: WorkflowRegistry,
          registeredQueue?: unknown,
          gate?: StepJobGate,
          consumer?: BullMqStepConsumer | null,
        ): QueuePort => {
          const queue = options.queue;
          if (typeof queue.adapter === 'object') return queue.adapter;
          switch (queue.adapter) {
            case 'bull':
            case 'bullmq': {
              if (!registeredQueue || !gate) throw notRegistered(queue.adapter);
              const chain = options.chainSteps.maxSteps > 0;
              if (queue.adapter === 'bull') {
                const bullQueue = registeredQueue as BullQueueAdapter['queue'];
                const starter = new DueJobStarter(gate, chain, logger, options.chainSteps.maxDurationMs, bullRunLedger(bullQueue, logger), () => registry.hasJobPriorities());
                return new BullQueueAdapter(bullQueue, gate, queue, logger, starter);
              }
              const bullMqQueue = registeredQueue as BullMqQueueAdapter['queue'];
              const ledger = consumer ? bullMqRunLedger(bullMqQueue, consumer, logger) : undefined;
              const starter = new DueJobStarter(gate, chain, logger, options.chainSteps.maxDurationMs, ledger, () => registry.hasJobPriorities());
              return new BullMqQueueAdapter(bullMqQueue, gate, consumer ?? null, logger, starter);
            }
            case 'manual':
              return new ManualQueueAdapter();
            default:
              return new LocalQueueAdapter(transactions, queue.concurrency ?? 1, logger, schema, registry);
          }
        },
        inject: [GENEVA_DRIVE_OPTIONS, TransactionRunner, GENEVA_DRIVE_LOGGER, SchemaCapabilities, WorkflowRegistry, ...registered],
      },
    ],
    exports: bull ? [GenevaDriveBullQueueModule] : bullMq ? [GenevaDriveBullMqQueueModule] : [],
  };
}

function notRegistered(adapter: 'bull' | 'bullmq'): QueueConfigurationError {
  const nest = adapter === 'bull' ? '@nestjs/bull' : '@nestjs/bullmq';
  return new QueueConfigurationError(
    `geneva-drive: a '${adapter}' queue returned by forRootAsync's factory cannot be registered with ${nest}: declare \`queue\` beside useFactory (connection settings that need injection go to BullModule.forRootAsync)`,
  );
}

/**
 * Options that will stop the boot are refused before the queue is registered: a Bull queue connects
 * to Redis as soon as Nest creates it, and a boot that fails then has no application to close it.
 * An application without the queue library or its Nest module is told about both at once.
 */
async function loadBullQueueModule(options: BullQueueAdapterOptions, checkDeclaredOptions: () => unknown): Promise<DynamicModule> {
  checkDeclaredOptions();
  const [, { bullQueueModule }] = await importOptionals("The queue adapter 'bull'", [
    ['bull', () => import('bull')],
    ['@nestjs/bull', () => import('./bull-queue.module.js')],
  ] as const);
  return bullQueueModule(options);
}

/** As for Bull: refused options never reach a queue that connects to Redis. */
async function loadBullMqQueueModule(options: BullMqQueueAdapterOptions, checkDeclaredOptions: () => unknown): Promise<DynamicModule> {
  checkDeclaredOptions();
  const [, { bullMqQueueModule }] = await importOptionals("The queue adapter 'bullmq'", [
    ['bullmq', () => import('bullmq')],
    ['@nestjs/bullmq', () => import('./bullmq-queue.module.js')],
  ] as const);
  return bullMqQueueModule(options);
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
