import { BadRequestException, Body, ConflictException, Controller, HttpCode, NotFoundException, PayloadTooLargeException, Post, ServiceUnavailableException, UseGuards } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { InvalidSignalError, SignalOutcomeUnknownError, SignalPayloadTooLargeError, SignalService, UnencodableValueError, WorkflowNotOngoingError, WorkflowService } from 'geneva-drive';
import { Repository } from 'typeorm';
import { OrderFulfillmentWorkflow } from '../orders/order-fulfillment.workflow.js';
import { Order } from '../orders/order.entity.js';
import { WebhookSignatureGuard } from '../webhooks/webhook-signature.guard.js';
import { PaymentWebhookDto } from './payment-webhook.dto.js';

/**
 * The payment provider's webhook, signed by the provider (WebhookSignatureGuard: a call without a
 * valid, fresh signature is refused 401 before its body is looked at). The provider's event id is the idempotency key, so its retries
 * are answered 200 without delivering the event twice. An invalid body never gets here: the global
 * ValidationPipe (configureApp) answers 400, and so does what geneva-drive refuses as a signal (a
 * payload nested too deep, say).
 */
@Controller('webhooks/payments')
export class PaymentWebhooksController {
  constructor(
    @InjectRepository(Order) private readonly orders: Repository<Order>,
    private readonly workflows: WorkflowService,
    private readonly signals: SignalService,
  ) {}

  @Post()
  @HttpCode(200)
  @UseGuards(WebhookSignatureGuard)
  async paymentConfirmed(@Body() event: PaymentWebhookDto) {
    const order = await this.orders.findOneBy({ id: event.orderId });
    if (!order) throw new NotFoundException(`Order ${event.orderId} not found`);
    const [workflow] = await this.workflows.findForHero(OrderFulfillmentWorkflow, order);
    if (!workflow) throw new NotFoundException(`Order ${event.orderId} has no fulfilment workflow`);
    try {
      const signal = await this.signals.signal(workflow, 'payment_confirmed', {
        payload: { amountCents: event.amountCents, metadata: event.metadata },
        idempotencyKey: event.eventId,
      });
      return { signalId: signal.id, state: signal.state, duplicate: signal.duplicateDelivery };
    } catch (error) {
      if (error instanceof WorkflowNotOngoingError) throw new ConflictException(error.message);
      if (error instanceof SignalPayloadTooLargeError) throw new PayloadTooLargeException(error.message);
      if (error instanceof SignalOutcomeUnknownError) throw new ServiceUnavailableException(error.message);
      if (error instanceof InvalidSignalError || error instanceof UnencodableValueError) throw new BadRequestException(error.message);
      throw error;
    }
  }
}
