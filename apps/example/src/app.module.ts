import { Module } from '@nestjs/common';
import { TypeOrmModule, type TypeOrmModuleOptions } from '@nestjs/typeorm';
import { GENEVA_DRIVE_ENTITIES, GENEVA_DRIVE_MIGRATIONS, GenevaDriveModule, type QueueAdapterOptions } from 'geneva-drive';
import { resolve } from 'node:path';
import { CreateExampleOrders1700000000000 } from './orders/create-orders.migration.js';
import { Order } from './orders/order.entity.js';
import { OrderFulfillmentWorkflow } from './orders/order-fulfillment.workflow.js';
import { OrdersController } from './orders/orders.controller.js';
import { PaymentWebhooksController } from './payments/payment-webhooks.controller.js';

/**
 * The database: SQLite in a file next to the app by default; `DATABASE_URL` (postgres:// or
 * mysql://) switches to a server. Migrations run at boot.
 */
export function databaseOptions(env: NodeJS.ProcessEnv = process.env): TypeOrmModuleOptions {
  const common = {
    entities: [Order, ...GENEVA_DRIVE_ENTITIES],
    migrations: [CreateExampleOrders1700000000000, ...GENEVA_DRIVE_MIGRATIONS],
    migrationsRun: true,
  };
  const url = env.DATABASE_URL;
  if (url?.startsWith('postgres')) return { ...common, type: 'postgres', url };
  if (url?.startsWith('mysql') || url?.startsWith('mariadb')) return { ...common, type: 'mysql', url: url.replace(/^mariadb/, 'mysql'), timezone: 'Z' };
  const file = env.SQLITE_FILE ?? resolve('apps/example/data/example.sqlite');
  return { ...common, type: 'better-sqlite3', database: file, enableWAL: true, timeout: 5000 };
}

/**
 * The queue: in-process by default; `REDIS_URL` switches to Bull. `WORKER=0` makes a process that
 * runs no steps (a web-only process, the housekeeping command).
 */
export function queueOptions(env: NodeJS.ProcessEnv = process.env): QueueAdapterOptions {
  if (env.REDIS_URL) return { adapter: 'bull', redis: env.REDIS_URL, concurrency: env.WORKER === '0' ? 0 : Number(env.CONCURRENCY ?? 2) };
  return { adapter: 'local', concurrency: env.WORKER === '0' ? 0 : 1 };
}

@Module({
  imports: [
    TypeOrmModule.forRoot(databaseOptions()),
    TypeOrmModule.forFeature([Order]),
    GenevaDriveModule.forRoot({ queue: queueOptions() }),
  ],
  controllers: [OrdersController, PaymentWebhooksController],
  providers: [OrderFulfillmentWorkflow],
})
export class AppModule {}
