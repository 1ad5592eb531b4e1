/** Manual § Concurrency keys. */
import { GenevaWorkflow, Step, Workflow } from 'geneva-drive';
import { Order, PaymentsService } from './shop.js';

// #region concurrency-keys
/** One step at a time per customer, whichever of their orders it is for. */
@Workflow({ hero: () => Order, concurrency: { key: (wf: RefundWorkflow) => `customer:${wf.hero.customerEmail}`, limit: 1 } })
export class RefundWorkflow extends GenevaWorkflow<Order> {
  constructor(private readonly payments: PaymentsService) {
    super();
  }

  @Step()
  async reserve() {
    await this.payments.reserve(this.hero);
  }

  /** Its own key instead: at most 5 captures at once across every workflow naming 'provider:payments'. */
  @Step({ concurrency: { key: () => 'provider:payments', limit: 5 } })
  async capture() {
    await this.payments.capture(this.hero, this.hero.amountCents);
  }
}
// #endregion
