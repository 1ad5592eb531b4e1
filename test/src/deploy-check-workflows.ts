/**
 * The code before a deploy, for the deploy-check specs: the same stored names as the classes of
 * cli-workflows.ts (the code after it), with the steps that deploy deletes — InvoiceFlow's `sendFax`
 * and ShippingFlow's `awaitCourier`, which parks for a signal (both deleted without a gravestone),
 * ShippingFlow's `printLabel` (declared removed after it) — and ArchiveFlow, a class the deploy
 * deletes altogether.
 */
import { GenevaWorkflow, Step, Workflow } from '../../libs/geneva-drive/src/index.js';
import { TestHero } from '../utils/fixtures.js';

@Workflow({ name: 'InvoiceFlow', hero: () => TestHero })
export class InvoiceFlowBeforeDeploy extends GenevaWorkflow<TestHero> {
  @Step()
  async prepare() {}

  @Step()
  async sendFax() {}

  @Step({ waitFor: 'payment_confirmed' })
  async awaitPayment() {}

  @Step()
  async issueReceipt() {}
}

@Workflow({ name: 'ShippingFlow', hero: () => TestHero })
export class ShippingFlowBeforeDeploy extends GenevaWorkflow<TestHero> {
  @Step()
  async pack() {}

  @Step()
  async printLabel() {}

  @Step({ waitFor: 'courier_booked' })
  async awaitCourier() {}

  @Step()
  async ship() {}
}

@Workflow({ name: 'ArchiveFlow', hero: () => TestHero })
export class ArchiveFlow extends GenevaWorkflow<TestHero> {
  @Step()
  async archive() {}
}

/** Every class of the code before the deploy. */
export const BEFORE_DEPLOY = [InvoiceFlowBeforeDeploy, ShippingFlowBeforeDeploy, ArchiveFlow];
