import { GenevaWorkflow, SignalMatcher, Step, Workflow } from 'geneva-drive';
import { DataSource } from 'typeorm';
import { Order } from './order.entity.js';
import { Warehouse } from './warehouse.service.js';

/** Payment confirmations count only when they pay the whole order. */
export const PAYMENT_CONFIRMED = new SignalMatcher<{ amountCents: number }, OrderFulfillmentWorkflow>(
  'payment_confirmed',
  (payload, wf) => payload.amountCents >= wf.hero.amountCents,
);

@Workflow({ hero: () => Order })
export class OrderFulfillmentWorkflow extends GenevaWorkflow<Order> {
  constructor(
    private readonly dataSource: DataSource,
    private readonly warehouse: Warehouse,
  ) {
    super();
  }

  @Step()
  async reserveStock() {
    await this.warehouse.reserve(this.hero);
    await this.setStatus('reserved');
  }

  @Step({ waitFor: PAYMENT_CONFIRMED })
  async capturePayment() {
    this.logger.log(`captured ${this.receivedSignal!.payload.amountCents} cents`);
    await this.setStatus('paid');
  }

  @Step({ wait: '2s', skipIf: (wf: OrderFulfillmentWorkflow) => wf.hero.pickup })
  async ship() {
    await this.setStatus('shipped');
  }

  private async setStatus(status: Order['status']) {
    await this.dataSource.getRepository(Order).update(this.hero.id, { status });
  }
}
