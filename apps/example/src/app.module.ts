import { Module, type DynamicModule } from '@nestjs/common';
import { TypeOrmModule, type TypeOrmModuleOptions } from '@nestjs/typeorm';
import { GENEVA_DRIVE_ENTITIES, GENEVA_DRIVE_MIGRATIONS, GenevaDriveModule, type GenevaDriveModuleOptions, type QueueAdapterOptions } from 'geneva-drive';
import { resolve } from 'node:path';
import { Contract } from './contracts/contract.entity.js';
import { ContractsModule } from './contracts/contracts.module.js';
import { CreateExampleContracts1700000000001 } from './contracts/create-contracts.migration.js';
import { dashboardImports } from './dashboard/dashboard.js';
import { HealthController } from './health.controller.js';
import { CreateExampleOrders1700000000000 } from './orders/create-orders.migration.js';
import { Order } from './orders/order.entity.js';
import { OrdersModule } from './orders/orders.module.js';
import { PaymentsModule } from './payments/payments.module.js';
import { CreateExampleShipments1700000000002 } from './shipments/create-shipments.migration.js';
import { Shipment } from './shipments/shipment.entity.js';
import { ShipmentsModule } from './shipments/shipments.module.js';
import { WebhooksModule } from './webhooks/webhooks.module.js';

/** Where the SQLite database lives when no DATABASE_URL is given. */
export function sqliteFile(env: NodeJS.ProcessEnv = process.env): string {
  return resolve(env.SQLITE_FILE ?? 'apps/example/data/example.sqlite');
}

/**
 * The database: SQLite in a file next to the app by default; `DATABASE_URL` (postgres:// or
 * mysql://) switches to a server. Migrations run at boot.
 */
export function databaseOptions(env: NodeJS.ProcessEnv = process.env): TypeOrmModuleOptions {
  const common = {
    entities: [Order, Contract, Shipment, ...GENEVA_DRIVE_ENTITIES],
    migrations: [CreateExampleOrders1700000000000, CreateExampleContracts1700000000001, CreateExampleShipments1700000000002, ...GENEVA_DRIVE_MIGRATIONS],
    migrationsRun: true,
  };
  const url = env.DATABASE_URL;
  if (url?.startsWith('postgres')) return { ...common, type: 'postgres', url };
  if (url?.startsWith('mysql') || url?.startsWith('mariadb')) return { ...common, type: 'mysql', url: url.replace(/^mariadb/, 'mysql'), timezone: 'Z' };
  if (url) throw new Error(`DATABASE_URL must start with postgres://, mysql:// or mariadb://, got ${url.split(':')[0]}:`);
  return { ...common, type: 'better-sqlite3', database: sqliteFile(env), enableWAL: true, timeout: 5000 };
}

/**
 * The queue: in-process by default; `REDIS_URL` switches to Bull. `WORKER=0` makes a process that
 * runs no steps (a web-only process, the housekeeping command).
 */
export function queueOptions(env: NodeJS.ProcessEnv = process.env): QueueAdapterOptions {
  if (env.REDIS_URL) return { adapter: 'bull', redis: env.REDIS_URL, prefix: env.BULL_PREFIX, concurrency: env.WORKER === '0' ? 0 : Number(env.CONCURRENCY ?? 2) };
  return { adapter: 'local', concurrency: env.WORKER === '0' ? 0 : 1 };
}

/** `GD_MAX_SIGNAL_PAYLOAD`: the largest signal payload in bytes (`off` disables the check); the library's 131072 by default. */
export function maxSignalPayloadSize(env: NodeJS.ProcessEnv = process.env): number | null | undefined {
  const raw = env.GD_MAX_SIGNAL_PAYLOAD?.trim();
  if (!raw) return undefined;
  if (raw === 'off') return null;
  const bytes = Number(raw);
  if (!Number.isInteger(bytes) || bytes <= 0) throw new Error(`GD_MAX_SIGNAL_PAYLOAD must be a positive number of bytes or "off", got "${raw}"`);
  return bytes;
}

export function genevaDriveOptions(env: NodeJS.ProcessEnv = process.env): GenevaDriveModuleOptions {
  return { queue: queueOptions(env), maxSignalPayloadSize: maxSignalPayloadSize(env) };
}

/** The example application. `AppModule.forEnvironment(env)` reads its configuration from `env` (process.env by default). */
@Module({})
export class AppModule {
  static forEnvironment(env: NodeJS.ProcessEnv = process.env): DynamicModule {
    return {
      module: AppModule,
      imports: [
        TypeOrmModule.forRoot(databaseOptions(env)),
        GenevaDriveModule.forRoot(genevaDriveOptions(env)),
        WebhooksModule.forEnvironment(env),
        OrdersModule,
        PaymentsModule,
        ContractsModule,
        ShipmentsModule,
        ...dashboardImports(env),
      ],
      controllers: [HealthController],
    };
  }
}
