/** Manual § Rate limits. */
import { GenevaWorkflow, Step, Workflow } from 'geneva-drive';
import { Mailer, Order } from './shop.js';

// #region rate-limits
/** At most 100 e-mails a minute per sending domain, across every process. */
@Workflow({ hero: () => Order })
export class ReceiptWorkflow extends GenevaWorkflow<Order> {
  constructor(private readonly mailer: Mailer) {
    super();
  }

  @Step({ rateLimit: { key: (wf: ReceiptWorkflow) => `mail:${wf.hero.customerEmail?.split('@')[1] ?? 'none'}`, limit: 100, per: '1m' } })
  async sendReceipt() {
    await this.mailer.send(this.hero.customerEmail!, `Receipt for order ${this.hero.id}`);
  }
}
// #endregion
