import { Body, Controller, Get, NotFoundException, Param, Post } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { IsBoolean, IsNotEmpty, IsOptional, IsString, MaxLength } from 'class-validator';
import { WorkflowService } from 'geneva-drive';
import { Repository } from 'typeorm';
import { workflowTimeline } from '../timeline.js';
import { IsIntegerFrom, ParseIdPipe } from '../validation.js';
import { OrderFulfillmentWorkflow } from './order-fulfillment.workflow.js';
import { Order } from './order.entity.js';

class CreateOrderDto {
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  sku: string;

  @IsIntegerFrom(1)
  amountCents: number;

  @IsOptional()
  @IsBoolean()
  pickup?: boolean;
}

@Controller('orders')
export class OrdersController {
  constructor(
    @InjectRepository(Order) private readonly orders: Repository<Order>,
    private readonly workflows: WorkflowService,
  ) {}

  /** Creates an order and starts its fulfilment in the same transaction. */
  @Post()
  async create(@Body() body: CreateOrderDto) {
    return this.orders.manager.transaction(async (manager) => {
      const order = await manager.save(manager.create(Order, { sku: body.sku, amountCents: body.amountCents, pickup: body.pickup ?? false }));
      const workflow = await this.workflows.start(OrderFulfillmentWorkflow, order, { manager });
      return { order, workflowId: workflow.id };
    });
  }

  /** The order's workflow: its state, its step executions and its latest signals, oldest first (see workflowTimeline). */
  @Get(':id/timeline')
  async timeline(@Param('id', ParseIdPipe) id: number) {
    const order = await this.orders.findOneBy({ id });
    if (!order) throw new NotFoundException(`Order ${id} not found`);
    const [record] = await this.workflows.findForHero(OrderFulfillmentWorkflow, order);
    if (!record) throw new NotFoundException(`Order ${id} has no workflow`);
    const timeline = await workflowTimeline(this.workflows, this.orders.manager, record);
    // The order as of after its workflow: a step's writes to it commit before the step's end, so a
    // step shown ended is shown with them (read first, it could miss the writes of a step that ended meanwhile).
    return { order: (await this.orders.findOneBy({ id })) ?? order, ...timeline };
  }
}
