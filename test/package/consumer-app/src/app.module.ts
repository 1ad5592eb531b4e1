import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { GENEVA_DRIVE_ENTITIES, GENEVA_DRIVE_MIGRATIONS, GenevaDriveModule } from 'geneva-drive';
import { CreateOrders1700000000000 } from './create-orders.migration.js';
import { OrderFulfillmentWorkflow } from './order-fulfillment.workflow.js';
import { Order } from './order.entity.js';
import { OrdersController } from './orders.controller.js';

export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@localhost:5432/shop';

@Module({
  imports: [
    TypeOrmModule.forRoot({
      type: 'postgres',
      url: DATABASE_URL,
      entities: [Order, ...GENEVA_DRIVE_ENTITIES],
      migrations: [CreateOrders1700000000000, ...GENEVA_DRIVE_MIGRATIONS],
      migrationsRun: true,
    }),
    TypeOrmModule.forFeature([Order]),
    GenevaDriveModule.forRoot({ queue: { adapter: 'local' } }),
  ],
  controllers: [OrdersController],
  providers: [OrderFulfillmentWorkflow],
})
export class AppModule {}
