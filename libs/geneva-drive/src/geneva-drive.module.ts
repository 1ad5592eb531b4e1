import { Logger, Module, type DynamicModule, type LoggerService, type Provider } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { getDataSourceToken } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { ExecutorService } from './execution/executor.service.js';
import { WorkflowInstances } from './execution/workflow-instances.js';
import { HousekeepingService } from './housekeeping/housekeeping.service.js';
import { GenevaDriveLifecycle } from './geneva-drive-lifecycle.js';
import { GENEVA_DRIVE_LOGGER, GENEVA_DRIVE_OPTIONS, QUEUE_PORT } from './geneva-drive.constants.js';
import { ASYNC_OPTIONS_TYPE, ConfigurableModuleClass, MODULE_OPTIONS_TOKEN, OPTIONS_TYPE } from './geneva-drive.module-definition.js';
import { resolveOptions } from './geneva-drive.options.js';
import type { GenevaDriveModuleOptions, QueueAdapterOptions, ResolvedGenevaDriveOptions } from './interfaces/geneva-drive-options.interface.js';
import { AfterCommitSubscriber } from './persistence/after-commit.js';
import { SchemaCapabilities } from './persistence/schema-capabilities.js';
import { TransactionRunner } from './persistence/transaction-runner.js';
import { WorkflowStore } from './persistence/workflow-store.js';
import { declaredQueue, queueRegistration } from './queue/queue-registration.js';
import type { QueuePort } from './queue/queue.port.js';
import { WorkflowExplorer } from './registry/workflow.explorer.js';
import { WorkflowRegistry } from './registry/workflow.registry.js';
import { SignalRendezvous } from './signals/signal-rendezvous.js';
import { SignalService } from './signals/signal.service.js';
import { WorkflowService } from './workflow/workflow.service.js';

const ENGINE_DATA_SOURCE = Symbol.for('geneva-drive:data-source');

function engineProviders(dataSource: string | undefined, queue: QueueAdapterOptions | undefined): Provider[] {
  return [
    { provide: ENGINE_DATA_SOURCE, useExisting: getDataSourceToken(dataSource) },
    {
      provide: GENEVA_DRIVE_OPTIONS,
      useFactory: (options: GenevaDriveModuleOptions) => resolveOptions({ ...options, queue: declaredQueue(queue, options.queue), dataSource }),
      inject: [MODULE_OPTIONS_TOKEN],
    },
    {
      provide: GENEVA_DRIVE_LOGGER,
      useFactory: (options: ResolvedGenevaDriveOptions) => options.logger ?? new Logger('GenevaDrive'),
      inject: [GENEVA_DRIVE_OPTIONS],
    },
    { provide: TransactionRunner, useFactory: (ds: DataSource) => new TransactionRunner(ds), inject: [ENGINE_DATA_SOURCE] },
    {
      provide: AfterCommitSubscriber,
      useFactory: (ds: DataSource, logger: LoggerService) =>
        AfterCommitSubscriber.install(ds, (error) => logger.error(`Enqueue after commit failed (housekeeping will recover the execution): ${String(error)}`)),
      inject: [ENGINE_DATA_SOURCE, GENEVA_DRIVE_LOGGER],
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
    return GenevaDriveModule.withEngine(super.forRoot(options), options.dataSource, options.queue);
  }

  /** A `bull` queue is declared beside `useFactory` (`queue`), as it is registered with @nestjs/bull when the module is declared. */
  static forRootAsync(options: typeof ASYNC_OPTIONS_TYPE & { queue?: QueueAdapterOptions }): DynamicModule {
    return GenevaDriveModule.withEngine(super.forRootAsync(options), options.dataSource, options.queue);
  }

  private static withEngine(module: DynamicModule, dataSource: string | undefined, queue: QueueAdapterOptions | undefined): DynamicModule {
    const registration = queueRegistration(queue, ENGINE_DATA_SOURCE);
    return {
      ...module,
      imports: [...(module.imports ?? []), DiscoveryModule, ...registration.imports],
      providers: [...(module.providers ?? []), ...engineProviders(dataSource, queue), ...registration.providers],
      exports: [WorkflowService, SignalService, ExecutorService, HousekeepingService, QUEUE_PORT, ...registration.exports],
    };
  }
}
