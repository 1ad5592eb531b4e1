import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Order } from '../orders/order.entity.js';
import { Shipment } from './shipment.entity.js';
import { ShipmentsController } from './shipments.controller.js';
import { OrderShipmentsWorkflow, ShipmentWorkflow } from './shipment.workflows.js';

/** Orders shipped in several parcels: a child workflow per parcel, fanned in by the order's. */
@Module({
  imports: [TypeOrmModule.forFeature([Order, Shipment])],
  controllers: [ShipmentsController],
  providers: [OrderShipmentsWorkflow, ShipmentWorkflow],
})
export class ShipmentsModule {}
