import { InjectRepository } from '@nestjs/typeorm';
import { GenevaWorkflow, SignalMatcher, Step, Workflow } from 'geneva-drive';
import { Repository } from 'typeorm';
import { Order } from './order.entity.js';

/** The payment event: its name and the type of its payload, for the webhook that sends it and the step that waits for it. */
export const PaymentConfirmed = new SignalMatcher<{ amountCents: number }>('payment_confirmed');

@Workflow({ hero: () => Order })
export class OrderFulfillmentWorkflow extends GenevaWorkflow<Order> {
  constructor(@InjectRepository(Order) private readonly orders: Repository<Order>) {
    super();
  }

  @Step()
  async reserveStock() {
    await this.orders.update(this.hero.id, { status: 'reserved' });
  }

  @Step({ waitFor: PaymentConfirmed })
  async capturePayment() {
    const { amountCents } = this.receivedSignalOf(PaymentConfirmed).payload;
    await this.orders.update(this.hero.id, { status: `paid ${amountCents}` });
  }

  @Step()
  async ship() {
    await this.orders.update(this.hero.id, { status: 'shipped' });
  }
}
