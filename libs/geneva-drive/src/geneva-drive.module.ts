import { Logger, Module, type DynamicModule, type LoggerService, type Provider } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { GENEVA_DRIVE_ENTITIES } from './entities/index.js';
import { ExecutorService } from './execution/executor.service.js';
import { WorkflowInstances } from './execution/workflow-instances.js';
import { HousekeepingService } from './housekeeping/housekeeping.service.js';
import { ProcessRoster } from './housekeeping/process-roster.js';
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
import type { QueuePort } from './interfaces/queue.port.js';
import { EngineView } from './operator/engine-view.js';
import { WorkflowExplorer } from './registry/workflow.explorer.js';
import { WorkflowRegistry } from './registry/workflow.registry.js';
import { SignalIntake } from './client/signal-intake.js';
import { SignalRendezvous } from './execution/signal-rendezvous.js';
import { ChildEnd } from './execution/child-end.js';
import { ConcurrencySlots } from './execution/concurrency-slots.js';
import { SignalService } from './client/signal.service.js';
import { SignalHero } from './client/signal-hero.js';
import { UnownedSteps } from './execution/unowned-steps.js';
import { WaitDeadline } from './execution/wait-deadline.js';
import { WorkflowService } from './client/workflow.service.js';
import { DeployCheck } from './client/deploy-check.js';

function engineProviders(declaredDataSource: string | undefined, queue: QueueAdapterOptions | undefined): Provider[] {
  return [
    {
      provide: GENEVA_DRIVE_OPTIONS,
      useFactory: (options: GenevaDriveModuleOptions) => resolveOptions({ ...options, queue: declaredQueue(queue, options.queue) }, declaredDataSource),
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
      provide: WorkflowStore,
      useFactory: (queue: QueuePort, afterCommit: AfterCommitSubscriber, options: ResolvedGenevaDriveOptions, schema: SchemaCapabilities) =>
        new WorkflowStore(queue, afterCommit, options.enqueueAfterCommit, schema, { preparedStatements: options.preparedStatements }),
      inject: [QUEUE_PORT, AfterCommitSubscriber, GENEVA_DRIVE_OPTIONS, SchemaCapabilities],
    },
    { provide: SchemaCapabilities, useValue: new SchemaCapabilities() },
    {
      provide: SignalRendezvous,
      useFactory: (store: WorkflowStore, schema: SchemaCapabilities, registry: WorkflowRegistry, instances: WorkflowInstances) =>
        new SignalRendezvous(store, schema, registry, instances),
      inject: [WorkflowStore, SchemaCapabilities, WorkflowRegistry, WorkflowInstances],
    },
    // Listens to the store for the ends of children and parents (built eagerly, as every provider).
    {
      provide: ChildEnd,
      useFactory: (store: WorkflowStore, rendezvous: SignalRendezvous, schema: SchemaCapabilities) => new ChildEnd(store, rendezvous, schema),
      inject: [WorkflowStore, SignalRendezvous, SchemaCapabilities],
    },
    // Listens to the store for the transitions of executions holding or waiting for a concurrency key.
    {
      provide: ConcurrencySlots,
      useFactory: (store: WorkflowStore, registry: WorkflowRegistry, schema: SchemaCapabilities, transactions: TransactionRunner) => new ConcurrencySlots(store, registry, schema, transactions),
      inject: [WorkflowStore, WorkflowRegistry, SchemaCapabilities, TransactionRunner],
    },
    WorkflowRegistry,
    EngineView,
    WorkflowExplorer,
    WorkflowInstances,
    UnownedSteps,
    ExecutorService,
    WorkflowService,
    DeployCheck,
    SignalIntake,
    SignalService,
    SignalHero,
    WaitDeadline,
    ProcessRoster,
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
    const { isGlobal: _, ...moduleOptions } = options;
    return GenevaDriveModule.withEngine(super.forRoot(options), options.dataSource, options.queue, moduleOptions);
  }

  /** A `bull` queue is declared beside `useFactory` (`queue`), as it is registered with @nestjs/bull when the module is declared. */
  static forRootAsync(options: typeof ASYNC_OPTIONS_TYPE & { queue?: QueueAdapterOptions }): DynamicModule {
    return GenevaDriveModule.withEngine(super.forRootAsync(options), options.dataSource, options.queue, { queue: options.queue });
  }

  /** `declared`: the options known when the module is declared (all of forRoot's, the queue beside forRootAsync's factory). */
  private static withEngine(module: DynamicModule, dataSource: string | undefined, queue: QueueAdapterOptions | undefined, declared: GenevaDriveModuleOptions): DynamicModule {
    // Registers the entities for `autoLoadEntities` on that DataSource (TypeOrmModule reads them when
    // it creates it). Its repository providers are not imported: the engine needs none, and they
    // would turn a missing DataSource into Nest's dependency error instead of DataSourceNotFoundError.
    TypeOrmModule.forFeature(GENEVA_DRIVE_ENTITIES, dataSource);
    const registration = queueRegistration(queue, () => resolveOptions(declared, dataSource));
    return {
      ...module,
      imports: [...(module.imports ?? []), DiscoveryModule, ...registration.imports],
      providers: [...(module.providers ?? []), ...engineProviders(dataSource, queue), ...registration.providers],
      // EngineView is for the dashboard and the CLI (not exported by the package's entry points).
      exports: [WorkflowService, DeployCheck, SignalService, ExecutorService, HousekeepingService, QUEUE_PORT, EngineView, ...registration.exports],
    };
  }
}
