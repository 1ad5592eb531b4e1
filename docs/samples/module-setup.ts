/** Manual § Module setup. */
import { Injectable, Logger, Module } from '@nestjs/common';
import { BullModule } from '@nestjs/bull';
import { TypeOrmModule } from '@nestjs/typeorm';
import { GENEVA_DRIVE_ENTITIES, GENEVA_DRIVE_MIGRATIONS, GenevaDriveModule, genevaDriveMigrations } from 'geneva-drive';
import { OrderFulfillmentWorkflow } from './defining-workflows.js';
import { Order, PaymentsService, SHOP_ENTITIES, ShippingService } from './shop.js';

// #region app-module
@Module({
  imports: [
    TypeOrmModule.forRoot({
      type: 'postgres',
      url: process.env.DATABASE_URL,
      entities: [...SHOP_ENTITIES, ...GENEVA_DRIVE_ENTITIES],
      migrations: [...GENEVA_DRIVE_MIGRATIONS],
      migrationsRun: true,
    }),
    TypeOrmModule.forFeature([Order]),
    GenevaDriveModule.forRoot({
      queue: { adapter: 'bull', redis: process.env.REDIS_URL, concurrency: 4 },
    }),
  ],
  providers: [PaymentsService, ShippingService, OrderFulfillmentWorkflow],
})
export class AppModule {}
// #endregion app-module

// #region uuid-keys
export const uuidKeyedDatabase = TypeOrmModule.forRoot({
  type: 'postgres',
  url: process.env.DATABASE_URL,
  entities: [...SHOP_ENTITIES, ...GENEVA_DRIVE_ENTITIES],
  migrations: [...genevaDriveMigrations({ primaryKey: 'uuid' })],
  migrationsRun: true,
});
// #endregion uuid-keys

// #region for-root-async
@Injectable()
export class Settings {
  readonly redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  readonly localConcurrency = Number(process.env.LOCAL_CONCURRENCY ?? 2);
  readonly retention = process.env.NODE_ENV === 'production' ? ('90d' as const) : ('1d' as const);
}

@Module({ providers: [Settings], exports: [Settings] })
export class SettingsModule {}

export const genevaDrive = [
  BullModule.forRootAsync({
    imports: [SettingsModule],
    inject: [Settings],
    useFactory: (settings: Settings) => ({ redis: settings.redisUrl }),
  }),
  GenevaDriveModule.forRootAsync({
    queue: { adapter: 'bull', concurrency: Number(process.env.WORKER_CONCURRENCY ?? 4) }, // beside useFactory
    imports: [SettingsModule],
    inject: [Settings],
    useFactory: (settings: Settings) => ({ deleteCompletedWorkflowsAfter: settings.retention }),
  }),
];
// #endregion for-root-async

// #region named-data-source
export const workflowsDatabase = [
  TypeOrmModule.forRoot({
    name: 'workflows',
    type: 'postgres',
    url: process.env.WORKFLOWS_DATABASE_URL,
    entities: [...SHOP_ENTITIES, ...GENEVA_DRIVE_ENTITIES],
    migrations: [...GENEVA_DRIVE_MIGRATIONS],
    migrationsRun: true,
  }),
  GenevaDriveModule.forRootAsync({
    dataSource: 'workflows', // or in what useFactory returns (not both)
    imports: [SettingsModule],
    inject: [Settings],
    useFactory: (settings: Settings) => ({ queue: { adapter: 'local' as const, concurrency: settings.localConcurrency } }),
  }),
];
// #endregion named-data-source

// #region all-defaults
export const spelledOut = GenevaDriveModule.forRoot({
  queue: { adapter: 'local', concurrency: 1 },
  enqueueAfterCommit: true,
  maxSignalPayloadSize: 131_072,
  maxCursorSize: 131_072,
  waitingVisibilityThreshold: '7d',
  deleteCompletedWorkflowsAfter: '30d',
  stuckInProgressThreshold: '1h',
  stuckScheduledThreshold: '15m',
  stuckRecoveryAction: 'reattempt',
  maxRecoveries: 3,
  housekeepingBatchSize: 1000,
  housekeeping: { every: '30m' },
  chainSteps: { maxSteps: 10, maxDuration: '100ms' },
  preparedStatements: true,
  logger: new Logger('GenevaDrive'),
  isGlobal: true,
});
// #endregion all-defaults
