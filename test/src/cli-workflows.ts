/**
 * The dashboard and CLI specs' workflow: parks at awaitPayment until `payment_confirmed`. It imports the
 * library by relative path, so the CLI's child process (compiled with tsc) can load it too.
 */
import { GenevaWorkflow, Step, Workflow } from '../../libs/geneva-drive/src/index.js';
import { TestHero } from '../utils/fixtures.js';

@Workflow({ name: 'InvoiceFlow', hero: () => TestHero })
export class InvoiceFlow extends GenevaWorkflow<TestHero> {
  @Step()
  async prepare() {}

  @Step({ waitFor: 'payment_confirmed' })
  async awaitPayment() {}

  @Step()
  async issueReceipt() {}
}
