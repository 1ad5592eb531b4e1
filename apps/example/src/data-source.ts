/**
 * The example's data source file for the geneva-drive CLI (`npx geneva-drive --data-source
 * apps/example/dist/data-source.js list`): the application's DataSource, and as `genevaDrive` its
 * workflow modules and, with `REDIS_URL`, its Bull queue, so a signal sent from the shell wakes the
 * step in the running workers.
 */
import type { GenevaDriveCliConfig } from 'geneva-drive';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { databaseOptions, queueOptions } from './app.module.js';
import { ContractsModule } from './contracts/contracts.module.js';
import { OrdersModule } from './orders/orders.module.js';
import { PaymentsModule } from './payments/payments.module.js';

export const dataSource = new DataSource({ ...databaseOptions(), migrationsRun: false } as DataSourceOptions);

export const genevaDrive: GenevaDriveCliConfig = {
  imports: [OrdersModule, PaymentsModule, ContractsModule],
  ...(process.env.REDIS_URL ? { queue: queueOptions() } : {}),
};
