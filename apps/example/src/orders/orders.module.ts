import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Order } from './order.entity.js';
import { OrderFulfillmentWorkflow } from './order-fulfillment.workflow.js';
import { OrdersController } from './orders.controller.js';
import { Warehouse } from './warehouse.service.js';

@Module({
  imports: [TypeOrmModule.forFeature([Order])],
  controllers: [OrdersController],
  providers: [Warehouse, OrderFulfillmentWorkflow],
  exports: [TypeOrmModule],
})
export class OrdersModule {}
