import { InjectRepository } from '@nestjs/typeorm';
import { GenevaWorkflow, Step, Workflow } from 'geneva-drive';
import { Repository } from 'typeorm';
import { Order } from './order.entity.js';

@Workflow({ hero: () => Order })
export class OrderFulfillmentWorkflow extends GenevaWorkflow<Order> {
  constructor(@InjectRepository(Order) private readonly orders: Repository<Order>) {
    super();
  }

  @Step()
  async reserveStock() {
    await this.orders.update(this.hero.id, { status: 'reserved' });
  }

  @Step({ waitFor: 'payment_confirmed' })
  async capturePayment() {
    const { amountCents } = this.receivedSignal!.payload as { amountCents: number };
    await this.orders.update(this.hero.id, { status: `paid ${amountCents}` });
  }

  @Step()
  async ship() {
    await this.orders.update(this.hero.id, { status: 'shipped' });
  }
}
