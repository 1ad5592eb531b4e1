import { Body, Controller, Get, NotFoundException, Param, Post } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Max } from 'class-validator';
import { SignalService, WorkflowService } from 'geneva-drive';
import { Repository } from 'typeorm';
import { Order } from '../orders/order.entity.js';
import { IsIntegerFrom, ParseIdPipe } from '../validation.js';
import { Shipment } from './shipment.entity.js';
import { OrderShipmentsWorkflow, PARCEL_DELIVERED, ShipmentWorkflow } from './shipment.workflows.js';

class ShipOrderDto {
  @IsIntegerFrom(1)
  @Max(20)
  parcels: number;
}

@Controller()
export class ShipmentsController {
  constructor(
    @InjectRepository(Order) private readonly orders: Repository<Order>,
    @InjectRepository(Shipment) private readonly shipments: Repository<Shipment>,
    private readonly workflows: WorkflowService,
    private readonly signals: SignalService,
  ) {}

  /** Splits an order into `parcels` shipments and starts its OrderShipmentsWorkflow, in one transaction. */
  @Post('orders/:id/shipments')
  async ship(@Param('id', ParseIdPipe) id: number, @Body() body: ShipOrderDto) {
    return this.orders.manager.transaction(async (manager) => {
      const order = await manager.findOneBy(Order, { id });
      if (!order) throw new NotFoundException(`Order ${id} not found`);
      const shipments = await manager.save(Array.from({ length: body.parcels }, () => manager.create(Shipment, { orderId: order.id })));
      const workflow = await this.workflows.start(OrderShipmentsWorkflow, order, { manager });
      return { workflowId: workflow.id, shipments: shipments.map((shipment) => shipment.id) };
    });
  }

  /** The order's shipments workflow, its result, and its children (the shipments' workflows) with their states and results. */
  @Get('orders/:id/shipments')
  async list(@Param('id', ParseIdPipe) id: number) {
    const order = await this.orders.findOneBy({ id });
    if (!order) throw new NotFoundException(`Order ${id} not found`);
    const [parent] = await this.workflows.findForHero(OrderShipmentsWorkflow, order);
    if (!parent) throw new NotFoundException(`Order ${id} is not shipped in parcels`);
    const children = await this.workflows.children(parent, { limit: 100 });
    return {
      order,
      workflow: { id: parent.id, state: parent.state, result: parent.result ?? null },
      shipments: children.map((child) => ({ workflowId: child.id, key: child.childKey, shipmentId: Number(child.heroId), state: child.state, result: child.result ?? null })),
    };
  }

  /** The carrier's delivery scan of a parcel: a signal to its shipment's workflow. */
  @Post('shipments/:id/delivered')
  async delivered(@Param('id', ParseIdPipe) id: number) {
    const shipment = await this.shipments.findOneBy({ id });
    if (!shipment) throw new NotFoundException(`Shipment ${id} not found`);
    const [workflow] = await this.workflows.findForHero(ShipmentWorkflow, shipment);
    if (!workflow) throw new NotFoundException(`Shipment ${id} has no workflow yet`);
    const signal = await this.signals.signal(workflow, PARCEL_DELIVERED, { idempotencyKey: `delivered-${id}` });
    return { signalId: signal.id, state: signal.state };
  }
}
