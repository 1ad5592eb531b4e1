import { Logger, Module, type DynamicModule, type LoggerService, type Provider } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { GENEVA_DRIVE_ENTITIES } from './entities/index.js';
import { ExecutorService } from './execution/executor.service.js';
import { WorkflowInstances } from './execution/workflow-instances.js';
import { HousekeepingService } from './housekeeping/housekeeping.service.js';
import { GenevaDriveLifecycle } from './geneva-drive-lifecycle.js';
import { GENEVA_DRIVE_LOGGER, GENEVA_DRIVE_OPTIONS, QUEUE_PORT } from './geneva-drive.constants.js';
import { ASYNC_OPTIONS_TYPE, ConfigurableModuleClass, MODULE_OPTIONS_TOKEN, OPTIONS_TYPE } from './geneva-drive.module-definition.js';
import { resolveOptions } from './geneva-drive.options.js';
import type { GenevaDriveModuleOptions, ResolvedGenevaDriveOptions } from './interfaces/geneva-drive-options.interface.js';
import { AfterCommitSubscriber } from './persistence/after-commit.js';
import { SchemaCapabilities } from './persistence/schema-capabilities.js';
import { TransactionRunner } from './persistence/transaction-runner.js';
import { WorkflowStore } from './persistence/workflow-store.js';
import { BullQueueAdapter } from './queue/bull-queue.adapter.js';
import { LocalQueueAdapter } from './queue/local-queue.adapter.js';
import { ManualQueueAdapter } from './queue/manual-queue.adapter.js';
import type { QueuePort } from './queue/queue.port.js';
import { WorkflowExplorer } from './registry/workflow.explorer.js';
import { WorkflowRegistry } from './registry/workflow.registry.js';
import { SignalIntake } from './signals/signal-intake.js';
import { SignalRendezvous } from './signals/signal-rendezvous.js';
import { SignalService } from './signals/signal.service.js';
import { WorkflowService } from './workflow/workflow.service.js';

function engineProviders(declaredDataSource: string | undefined): Provider[] {
  return [
    {
      provide: GENEVA_DRIVE_OPTIONS,
      useFactory: (options: GenevaDriveModuleOptions) => resolveOptions(options, declaredDataSource),
      inject: [MODULE_OPTIONS_TOKEN],
    },
    {
      provide: GENEVA_DRIVE_LOGGER,
      useFactory: (options: ResolvedGenevaDriveOptions) => options.logger ?? new Logger('GenevaDrive'),
      inject: [GENEVA_DRIVE_OPTIONS],
    },
    // Bound to the DataSource at init (GenevaDriveLifecycle): see TransactionRunner.bind.
    { provide: TransactionRunner, useFactory: () => new TransactionRunner() },
    {
      provide: AfterCommitSubscriber,
      useFactory: (logger: LoggerService) =>
        new AfterCommitSubscriber((error) => logger.error(`Enqueue after commit failed (housekeeping will recover the execution): ${String(error)}`)),
      inject: [GENEVA_DRIVE_LOGGER],
    },
    {
      provide: QUEUE_PORT,
      useFactory: async (options: ResolvedGenevaDriveOptions, transactions: TransactionRunner, logger: LoggerService): Promise<QueuePort> => {
        switch (options.queue.adapter) {
          case 'bull':
            return BullQueueAdapter.create(options.queue, logger);
          case 'manual':
            return new ManualQueueAdapter();
          default:
            return new LocalQueueAdapter(transactions, options.queue.concurrency ?? 1, logger);
        }
      },
      inject: [GENEVA_DRIVE_OPTIONS, TransactionRunner, GENEVA_DRIVE_LOGGER],
    },
    {
      provide: WorkflowStore,
      useFactory: (queue: QueuePort, afterCommit: AfterCommitSubscriber, options: ResolvedGenevaDriveOptions, schema: SchemaCapabilities) =>
        new WorkflowStore(queue, afterCommit, options.enqueueAfterCommit, schema),
      inject: [QUEUE_PORT, AfterCommitSubscriber, GENEVA_DRIVE_OPTIONS, SchemaCapabilities],
    },
    { provide: SchemaCapabilities, useValue: new SchemaCapabilities() },
    {
      provide: SignalRendezvous,
      useFactory: (store: WorkflowStore, schema: SchemaCapabilities, registry: WorkflowRegistry, instances: WorkflowInstances) =>
        new SignalRendezvous(store, schema, registry, instances),
      inject: [WorkflowStore, SchemaCapabilities, WorkflowRegistry, WorkflowInstances],
    },
    WorkflowRegistry,
    WorkflowExplorer,
    WorkflowInstances,
    ExecutorService,
    WorkflowService,
    SignalIntake,
    SignalService,
    HousekeepingService,
    GenevaDriveLifecycle,
  ];
}

/**
 * geneva-drive for a Nest application: `GenevaDriveModule.forRoot({ queue: { adapter: 'bull', redis } })`
 * next to `TypeOrmModule.forRoot({ entities: [...GENEVA_DRIVE_ENTITIES], migrations: [...GENEVA_DRIVE_MIGRATIONS] })`.
 * Workflow classes are discovered among the application's providers.
 * @publicApi
 */
@Module({})
export class GenevaDriveModule extends ConfigurableModuleClass {
  static forRoot(options: typeof OPTIONS_TYPE = {}): DynamicModule {
    return GenevaDriveModule.withEngine(super.forRoot(options), options.dataSource);
  }

  static forRootAsync(options: typeof ASYNC_OPTIONS_TYPE): DynamicModule {
    return GenevaDriveModule.withEngine(super.forRootAsync(options), options.dataSource);
  }

  private static withEngine(module: DynamicModule, dataSource: string | undefined): DynamicModule {
    // Registers the entities for `autoLoadEntities` on that DataSource (TypeOrmModule reads them when
    // it creates it). Its repository providers are not imported: the engine needs none, and they
    // would turn a missing DataSource into Nest's dependency error instead of DataSourceNotFoundError.
    TypeOrmModule.forFeature(GENEVA_DRIVE_ENTITIES, dataSource);
    return {
      ...module,
      imports: [...(module.imports ?? []), DiscoveryModule],
      providers: [...(module.providers ?? []), ...engineProviders(dataSource)],
      exports: [WorkflowService, SignalService, ExecutorService, HousekeepingService, QUEUE_PORT],
    };
  }
}
