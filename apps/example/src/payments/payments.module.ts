import { Module } from '@nestjs/common';
import { OrdersModule } from '../orders/orders.module.js';
import { PaymentWebhooksController } from './payment-webhooks.controller.js';

@Module({
  imports: [OrdersModule],
  controllers: [PaymentWebhooksController],
})
export class PaymentsModule {}
