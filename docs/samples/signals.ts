/** Manual § Signals. */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import {
  GenevaWorkflow,
  NoOngoingWorkflowError,
  SignalMatcher,
  SignalService,
  Step,
  Workflow,
  WorkflowNotOngoingError,
  WorkflowService,
  type Signal,
  type SignalMatcherLike,
  type WorkflowRecord,
} from 'geneva-drive';
import { DataSource } from 'typeorm';
import { OrderFulfillmentWorkflow } from './defining-workflows.js';
import { Contract, Order, PaymentsService } from './shop.js';

// #region matcher-predicate
/** Only the signature of this contract's own document counts. */
export const DOCUMENT_SIGNED = new SignalMatcher<{ documentId: string }, ContractWorkflow>(
  'document_signed',
  (payload, wf) => payload.documentId === wf.hero.documentId,
);

@Workflow({ hero: () => Contract })
export class ContractWorkflow extends GenevaWorkflow<Contract> {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {
    super();
  }

  @Step()
  async sendForSignature() {
    this.logger.log(`sending document ${this.hero.documentId}`);
  }

  /** Two weeks to countersign, then the contract is given up on. */
  @Step({ waitFor: DOCUMENT_SIGNED, timeout: '14d', onTimeout: 'cancel', skipIf: (wf: ContractWorkflow) => wf.hero.preSigned })
  async awaitCountersignature() {
    await this.dataSource.getRepository(Contract).update(this.hero.id, { countersigned: true });
  }
}
// #endregion matcher-predicate

// #region matcher-constant
/** A payment confirmation only counts when it pays the whole order. */
export const ORDER_PAID = new SignalMatcher<{ amountCents: number }, { hero: Order }>(
  'payment_confirmed',
  (payload, wf) => payload.amountCents >= wf.hero.amountCents,
);
// #endregion matcher-constant

// #region matcher-custom
/** Waits for either of two event names, with a minimum amount. */
export class PaymentSettled implements SignalMatcherLike {
  constructor(private readonly minCents: number) {}

  describe(): string {
    return `payment_confirmed or payment_captured of at least ${this.minCents} cents`;
  }

  matches(signal: Signal<{ amountCents?: number }>): boolean {
    return ['payment_confirmed', 'payment_captured'].includes(signal.name) && (signal.payload.amountCents ?? 0) >= this.minCents;
  }
}

@Workflow({ hero: () => Order })
export class PreorderWorkflow extends GenevaWorkflow<Order> {
  constructor(private readonly payments: PaymentsService) {
    super();
  }

  @Step({ waitFor: ORDER_PAID })
  async captureDeposit() {
    await this.payments.capture(this.hero, this.receivedSignal!.payload.amountCents);
  }

  @Step({ waitFor: new PaymentSettled(100) })
  async captureBalance() {
    this.logger.log(`balance settled by ${this.receivedSignal!.name}`);
  }
}
// #endregion matcher-custom

// #region composing
@Workflow({ hero: () => Order })
export class InstallmentWorkflow extends GenevaWorkflow<Order> {
  /** Not before two days have passed, and only once the first installment is paid. */
  @Step({ wait: '2d', waitFor: 'installment_paid' })
  async confirmFirstInstallment() {
    this.logger.log(`first installment: ${JSON.stringify(this.receivedSignal!.payload)}`);
  }

  /** Waits for the same name again: it needs a second signal, the first one is consumed. */
  @Step({ waitFor: 'installment_paid' })
  async confirmSecondInstallment() {
    this.logger.log(`second installment: signal ${this.receivedSignal!.id}`);
  }
}
// #endregion composing

// #region signal-with-start
@Injectable()
export class GiftCardCheckout {
  constructor(private readonly workflows: WorkflowService) {}

  /** Paid in full by gift card: the confirmation exists before the workflow does. */
  async placePaidOrder(order: Order, giftCardRedemptionId: string): Promise<WorkflowRecord> {
    return this.workflows.start(OrderFulfillmentWorkflow, order, {
      signals: [{ name: 'payment_confirmed', payload: { amountCents: order.amountCents }, idempotencyKey: giftCardRedemptionId }],
    });
  }
}
// #endregion signal-with-start

// #region caller-transaction
@Injectable()
export class PaymentLedger {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly signals: SignalService,
  ) {}

  /** The order's status and the signal commit together; if either fails, neither happened. */
  async recordPayment(workflow: WorkflowRecord, order: Order, eventId: string): Promise<Signal> {
    return this.dataSource.transaction(async (manager) => {
      await manager.update(Order, order.id, { status: 'paid' });
      return this.signals.signal(workflow, 'payment_confirmed', {
        payload: { amountCents: order.amountCents, paidAt: new Date() },
        idempotencyKey: eventId,
        manager,
      });
    });
  }
}
// #endregion caller-transaction

// #region deadline-run
/** The body runs either way: with the signature, or timed out after a week. */
@Workflow({ hero: () => Contract })
export class QuoteWorkflow extends GenevaWorkflow<Contract> {
  @Step({ waitFor: DOCUMENT_SIGNED, timeout: '7d' })
  async awaitAcceptance() {
    if (this.timedOut) return this.logger.log(`quote ${this.hero.documentId} expired unanswered`);
    this.logger.log(`quote accepted on ${this.receivedSignal!.createdAt.toISOString()}`);
  }
}
// #endregion deadline-run

// #region deadline-signal-hero
@Injectable()
export class SignatureWebhook {
  constructor(private readonly signals: SignalService) {}

  /** The e-signature provider knows the contract, not the workflow. */
  async documentSigned(contractId: string, documentId: string, eventId: string): Promise<void> {
    await this.signals.signalHero(ContractWorkflow, contractId, 'document_signed', { payload: { documentId }, idempotencyKey: eventId });
  }
}
// #endregion deadline-signal-hero

// #region deadline
/** The countersignature of this contract's document, or one of its own deadlines. */
export const SIGNED_OR_DEADLINE: SignalMatcherLike<RemindedContractWorkflow> = {
  describe: () => 'document_signed or contract_deadline',
  matches: (signal, wf) => signal.name === 'contract_deadline' || (signal.name === 'document_signed' && signal.payload.documentId === wf.hero.documentId),
};

/** A reminder after a week, the end after two: each deadline is a signal the steps branch on. */
@Workflow({ hero: () => Contract })
export class RemindedContractWorkflow extends GenevaWorkflow<Contract> {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {
    super();
  }

  @Step({ waitFor: SIGNED_OR_DEADLINE })
  async awaitSignatureOrReminder() {
    if (this.receivedSignal!.payload.stage === 'remind') return this.logger.log(`reminding the signer of ${this.hero.documentId}`);
    await this.countersign();
    this.finished();
  }

  @Step({ waitFor: SIGNED_OR_DEADLINE })
  async awaitSignatureOrExpiry() {
    if (this.receivedSignal!.payload.stage === 'expire') this.cancel();
    await this.countersign();
  }

  private async countersign(): Promise<void> {
    await this.dataSource.getRepository(Contract).update(this.hero.id, { countersigned: true });
  }
}

/** The contract's clock: sends each deadline as a signal, once, to the contract's ongoing workflow. */
@Workflow({ hero: () => Contract })
export class ContractDeadlineWorkflow extends GenevaWorkflow<Contract> {
  constructor(private readonly signals: SignalService) {
    super();
  }

  @Step({ wait: '7d' })
  async remind() {
    await this.sendDeadline('remind');
  }

  @Step({ wait: '7d' })
  async expire() {
    await this.sendDeadline('expire');
  }

  private async sendDeadline(stage: 'remind' | 'expire'): Promise<void> {
    try {
      await this.signals.signalHero(RemindedContractWorkflow, this.hero, 'contract_deadline', { payload: { stage }, idempotencyKey: `${stage}-${this.hero.id}` });
    } catch (error) {
      // Already signed, or given up on: nothing to do.
      if (!(error instanceof NoOngoingWorkflowError || error instanceof WorkflowNotOngoingError)) throw error;
    }
  }
}

@Injectable()
export class ContractsService {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly workflows: WorkflowService,
  ) {}

  /** Starts the contract and its clock together. */
  async open(documentId: string): Promise<Contract> {
    return this.dataSource.transaction(async (manager) => {
      const contract = await manager.save(manager.create(Contract, { documentId }));
      await this.workflows.start(RemindedContractWorkflow, contract, { manager });
      await this.workflows.start(ContractDeadlineWorkflow, contract, { manager });
      return contract;
    });
  }
}
// #endregion deadline

// #region typed-definition
/** The carrier's delivery event, defined once: its name and the type of its payload. */
export const ParcelDelivered = new SignalMatcher<{ parcelId: string; signedBy: string }>('parcel_delivered');

@Workflow({ hero: () => Order })
export class ParcelWorkflow extends GenevaWorkflow<Order> {
  @Step({ waitFor: ParcelDelivered })
  async confirmDelivery() {
    const { parcelId, signedBy } = this.receivedSignalOf(ParcelDelivered).payload; // typed: no cast
    this.logger.log(`parcel ${parcelId} signed for by ${signedBy}`);
  }
}

@Injectable()
export class CarrierWebhook {
  constructor(private readonly signals: SignalService) {}

  async delivered(workflowId: string, event: { id: string; parcelId: string; signedBy: string }): Promise<void> {
    // The payload is checked against the definition: a missing or mistyped member does not compile.
    await this.signals.signal(workflowId, ParcelDelivered, { payload: { parcelId: event.parcelId, signedBy: event.signedBy }, idempotencyKey: event.id });
  }
}
// #endregion typed-definition
