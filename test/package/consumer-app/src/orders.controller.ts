import { BadRequestException, Body, Controller, Get, HttpCode, NotFoundException, Param, ParseIntPipe, Post } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { InvalidSignalError, SignalService, WorkflowNotFoundError, WorkflowNotOngoingError, WorkflowService } from 'geneva-drive';
import { Repository } from 'typeorm';
import { OrderFulfillmentWorkflow, PaymentConfirmed } from './order-fulfillment.workflow.js';
import { Order } from './order.entity.js';

@Controller()
export class OrdersController {
  constructor(
    @InjectRepository(Order) private readonly orders: Repository<Order>,
    private readonly workflows: WorkflowService,
    private readonly signals: SignalService,
  ) {}

  @Post('orders')
  async create(@Body() body: { sku: string }) {
    const order = await this.orders.save(this.orders.create({ sku: body.sku }));
    const workflow = await this.workflows.start(OrderFulfillmentWorkflow, order);
    return { orderId: order.id, workflowId: workflow.id };
  }

  // The payment provider's webhook. A redelivered event (same id) is delivered once. Providers
  // retry what is not answered 2xx, for days: an event that comes after the workflow ended is
  // answered 200 (there is nothing left to do), and one that can never be a signal 400.
  @Post('webhooks/payments')
  @HttpCode(200)
  async paymentConfirmed(@Body() event: { id: string; workflowId: string; amountCents: number }) {
    try {
      const signal = await this.signals.signal(event.workflowId, PaymentConfirmed, {
        payload: { amountCents: event.amountCents },
        idempotencyKey: event.id,
      });
      return { signalId: signal.id, duplicate: signal.duplicateDelivery };
    } catch (error) {
      if (error instanceof WorkflowNotOngoingError) return { ignored: error.message };
      if (error instanceof WorkflowNotFoundError) throw new NotFoundException(error.message);
      if (error instanceof InvalidSignalError) throw new BadRequestException(error.message);
      throw error;
    }
  }

  @Get('orders/:id')
  async show(@Param('id', ParseIntPipe) id: number) {
    const order = await this.orders.findOneByOrFail({ id });
    const workflow = await this.workflows.findOngoing(OrderFulfillmentWorkflow, order);
    return { status: order.status, workflowState: workflow?.state ?? 'ended' };
  }
}
