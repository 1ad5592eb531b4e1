/** Manual § Deploying changes to a workflow. */
import { Injectable, Logger } from '@nestjs/common';
import { GenevaWorkflow, Step, Workflow, WorkflowService } from 'geneva-drive';
import { Order, PaymentsService, ShippingService } from './shop.js';

// #region gravestone
/**
 * `sendFax` stood between reserveStock and capturePayment. It is gone from the code; its name stays
 * as a gravestone until no workflow in flight stands at it.
 */
@Workflow({ name: 'invoice-dispatch', hero: () => Order, removedSteps: [{ name: 'sendFax', after: 'reserveStock' }] })
export class InvoiceDispatchWorkflow extends GenevaWorkflow<Order> {
  constructor(
    private readonly payments: PaymentsService,
    private readonly shipping: ShippingService,
  ) {
    super();
  }

  @Step()
  async reserveStock() {
    await this.payments.reserve(this.hero);
  }

  @Step({ waitFor: 'payment_confirmed' })
  async capturePayment() {
    await this.payments.capture(this.hero, this.receivedSignal!.payload.amountCents);
  }

  @Step()
  async ship() {
    await this.shipping.ship(this.hero);
  }
}
// #endregion gravestone

// #region rename
@Workflow({ name: 'parcel-return', hero: () => Order })
export class ParcelReturnWorkflow extends GenevaWorkflow<Order> {
  /** Renamed from `refundCustomer` in the code; the database keeps the old name. */
  @Step({ name: 'refundCustomer' })
  async refund() {
    this.logger.log(`refunding order ${this.hero.id}`);
  }
}
// #endregion rename

// #region in-flight
@Injectable()
export class GravestoneCheck {
  private readonly logger = new Logger(GravestoneCheck.name);

  constructor(private readonly workflows: WorkflowService) {}

  /** True once no ongoing workflow stands at a gravestone of the class: the gravestones can go. */
  async canRemoveGravestones(): Promise<boolean> {
    const inFlight = await this.workflows.removedStepsInFlight(InvoiceDispatchWorkflow);
    for (const { stepName, workflows } of inFlight) this.logger.log(`${workflows} workflow(s) still at removed step ${stepName}`);
    return inFlight.length === 0;
  }
}
// #endregion in-flight

// #region resume-at
/** A workflow stranded on a step deleted without a gravestone goes on at `ship`. */
export async function moveToShipping(workflows: WorkflowService, workflowId: string): Promise<void> {
  await workflows.resumeAt(workflowId, 'ship');
}
// #endregion resume-at
