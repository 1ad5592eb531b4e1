/** Manual § Defining workflows. */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { addStep, GenevaWorkflow, Step, Workflow, WorkflowService, type WorkflowRecord } from 'geneva-drive';
import { DataSource } from 'typeorm';
import { Customer, Mailer, Order, PaymentsService, ShippingService } from './shop.js';

// #region order-fulfillment
@Workflow({ hero: () => Order, cancelIf: [(wf: OrderFulfillmentWorkflow) => wf.hero.canceled] })
export class OrderFulfillmentWorkflow extends GenevaWorkflow<Order> {
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

  @Step({ wait: '2d', skipIf: (wf: OrderFulfillmentWorkflow) => wf.hero.pickup })
  async ship() {
    await this.shipping.ship(this.hero);
  }
}
// #endregion order-fulfillment

// #region inheritance
/** Same steps, plus gift wrapping right before shipping. Stored under its own type name. */
@Workflow({ name: 'GiftOrderFulfillment', hero: () => Order })
export class GiftOrderFulfillmentWorkflow extends OrderFulfillmentWorkflow {
  @Step({ before: 'ship' })
  async wrapPresent() {
    this.logger.log(`wrapping order ${this.hero.id}`);
  }
}
// steps run: reserveStock, capturePayment, wrapPresent, ship
// #endregion inheritance

// #region conditions
@Workflow({ hero: () => Order, cancelIf: ['isVoided'] })
export class ReceiptWorkflow extends GenevaWorkflow<Order> {
  constructor(private readonly mailer: Mailer) {
    super();
  }

  isVoided(): boolean {
    return this.hero.canceled;
  }

  @Step({ skipIf: (wf: ReceiptWorkflow) => wf.hero.customerEmail === null })
  async emailReceipt() {
    await this.mailer.send(this.hero.customerEmail!, `Receipt for order ${this.hero.id}`);
  }

  @Step({ wait: '30d', skipIf: process.env.SURVEYS_DISABLED === '1' })
  async askForReview() {
    await this.mailer.send(this.hero.customerEmail!, 'How was your order?');
  }
}
// #endregion conditions

// #region polling-ladder
@Workflow({ hero: () => Order })
export class DeliveryTrackingWorkflow extends GenevaWorkflow<Order> {
  constructor(
    private readonly shipping: ShippingService,
    private readonly mailer: Mailer,
  ) {
    super();
  }

  /** One rung of the ladder: done when the carrier says delivered, otherwise on to the next rung. */
  async poll(): Promise<void> {
    if (await this.shipping.isDelivered(this.hero)) this.finished();
  }

  async giveUp(): Promise<void> {
    await this.mailer.send('support@example.com', `Order ${this.hero.id} was never delivered`);
  }
}

const LADDER = ['10m', '30m', '1h', '2h', '4h', '8h', '12h', '1d', '2d', '4d'] as const;
LADDER.forEach((wait, index) => {
  addStep(DeliveryTrackingWorkflow, { name: `poll_${index + 1}`, wait, run: (wf) => wf.poll() });
});
addStep(DeliveryTrackingWorkflow, { name: 'give_up', run: (wf) => wf.giveUp() });
// #endregion polling-ladder

// #region without-hero
/** Erases a customer. The hero row is deleted half way, so later steps run with `hero === null`. */
@Workflow({ name: 'customer-erasure', hero: () => Customer, mayProceedWithoutHero: true, skipUndefinedSteps: true, jobOptions: { priority: 10 } })
export class CustomerErasureWorkflow extends GenevaWorkflow<Customer | null> {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly mailer: Mailer,
  ) {
    super();
  }

  @Step()
  async deleteCustomer() {
    await this.dataSource.getRepository(Customer).delete(this.hero!.id);
  }

  @Step({ wait: '1h', jobOptions: { priority: 1 } })
  async confirmToCompliance() {
    await this.mailer.send('compliance@example.com', `Customer erased (workflow ${this.record.id}, hero present: ${this.hero !== null})`);
  }
}
// #endregion without-hero

// #region starting
@Injectable()
export class CheckoutService {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly workflows: WorkflowService,
  ) {}

  /** Saves the order and starts its fulfilment in one transaction: both commit, or neither does. */
  async placeOrder(sku: string, amountCents: number): Promise<WorkflowRecord> {
    return this.dataSource.transaction(async (manager) => {
      const order = await manager.save(manager.create(Order, { sku, amountCents, customerEmail: null }));
      return this.workflows.start(OrderFulfillmentWorkflow, order, { manager });
    });
  }

  /** The fulfilment in progress for an order, if any. */
  current(order: Order): Promise<WorkflowRecord | null> {
    return this.workflows.findOngoing(OrderFulfillmentWorkflow, order);
  }
}
// #endregion starting
