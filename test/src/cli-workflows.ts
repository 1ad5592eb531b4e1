/**
 * The dashboard and CLI specs' workflows: InvoiceFlow parks at awaitPayment until `payment_confirmed`;
 * ShippingFlow declares a removed step. They import the library by relative path, so the CLI's child
 * process (compiled with tsc) can load them too.
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

/** Deployed without its `printLabel` step, which it declares removed (a gravestone between pack and ship). */
@Workflow({ name: 'ShippingFlow', hero: () => TestHero, removedSteps: [{ name: 'printLabel', after: 'pack' }] })
export class ShippingFlow extends GenevaWorkflow<TestHero> {
  @Step()
  async pack() {}

  /** Transactional: the dashboard marks it. */
  @Step({ transactional: true })
  async ship() {}
}
