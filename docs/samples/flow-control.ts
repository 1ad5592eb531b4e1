/** Manual § Flow control. */
import { GenevaWorkflow, isFlowControl, Step, Workflow } from 'geneva-drive';
import { Mailer, Order, PaymentsService } from './shop.js';

// #region flow-control
@Workflow({ hero: () => Order })
export class InvoiceWorkflow extends GenevaWorkflow<Order> {
  constructor(
    private readonly payments: PaymentsService,
    private readonly mailer: Mailer,
  ) {
    super();
  }

  @Step()
  async checkCard() {
    if (this.hero.canceled) this.cancel(); // the workflow ends here, canceled
    if (!(await this.payments.hasCard(this.hero))) this.pause(); // a human adds a card, then resumes
  }

  @Step()
  async charge() {
    const result = await this.payments.charge(this.hero);
    if (result === 'soft_decline') this.reattempt({ wait: '6h' }); // run this step again later
    if (result === 'already_paid') this.finished(); // done: the remaining steps never run
  }

  @Step()
  async sendReceipt() {
    if (this.hero.customerEmail === null) this.skip(); // nothing to do: on to the next step
    await this.mailer.send(this.hero.customerEmail!, `Receipt for order ${this.hero.id}`);
  }
}
// #endregion flow-control

// #region try-catch
@Workflow({ hero: () => Order })
export class ShippingNoticeWorkflow extends GenevaWorkflow<Order> {
  constructor(private readonly mailer: Mailer) {
    super();
  }

  @Step()
  async notifyCustomer() {
    try {
      if (this.hero.customerEmail === null) this.skip();
      await this.mailer.send(this.hero.customerEmail!, `Order ${this.hero.id} is on its way`);
    } catch (error) {
      if (isFlowControl(error)) throw error; // not an error: let skip() unwind the step
      this.logger.warn(`mail failed, trying again in 10 minutes: ${String(error)}`);
      this.reattempt({ wait: '10m' });
    }
  }
}
// #endregion try-catch
