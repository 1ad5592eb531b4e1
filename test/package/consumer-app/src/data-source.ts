import { TypeOrmModule } from '@nestjs/typeorm';
import { GENEVA_DRIVE_ENTITIES, GENEVA_DRIVE_MIGRATIONS, type GenevaDriveCliConfig } from 'geneva-drive';
import { DataSource } from 'typeorm';
import { CreateOrders1700000000000 } from './create-orders.migration.js';
import { OrderFulfillmentWorkflow } from './order-fulfillment.workflow.js';
import { Order } from './order.entity.js';

/**
 * The app's DataSource, for the TypeORM CLI (migrations) and the geneva-drive CLI. It does not import
 * AppModule: a second TypeOrmModule registration of the default DataSource is not what a CLI wants.
 */
export const dataSource = new DataSource({
  type: 'postgres',
  url: process.env.DATABASE_URL ?? 'postgres://postgres@localhost:5432/shop',
  entities: [Order, ...GENEVA_DRIVE_ENTITIES],
  migrations: [CreateOrders1700000000000, ...GENEVA_DRIVE_MIGRATIONS],
});

/** What the geneva-drive CLI needs to wake a parked step: the workflow classes and what they inject. */
export const genevaDrive: GenevaDriveCliConfig = {
  imports: [TypeOrmModule.forFeature([Order])],
  providers: [OrderFulfillmentWorkflow],
};
