/** Manual § Exception policies. */
import { ExceptionPolicy, GenevaWorkflow, Step, Workflow } from 'geneva-drive';
import { CarrierTimeoutError, OrderVoidedError, Order, PaymentsService, RateLimitedError, ShippingService } from './shop.js';

// #region step-level
@Workflow({ hero: () => Order })
export class SettlementWorkflow extends GenevaWorkflow<Order> {
  constructor(private readonly payments: PaymentsService) {
    super();
  }

  /** Up to 5 immediate reattempts, then the workflow is canceled. */
  @Step({ onException: 'reattempt', maxReattempts: 5, terminalAction: 'cancel' })
  async capture() {
    await this.payments.capture(this.hero, this.hero.amountCents);
  }

  /** A failure here is not worth stopping for. */
  @Step({ onException: 'skip' })
  async warmCaches() {
    /* ... */
  }

  /** Backoff needs a policy object: 30 s, 1 min, 2 min, ... capped at 1 h, plus up to 20 % jitter. */
  @Step({
    onException: new ExceptionPolicy('reattempt', {
      wait: { strategy: 'exponential', delay: '30s', max: '1h', jitter: 0.2 },
      maxReattempts: 12,
    }),
  })
  async notifyLedger() {
    /* ... */
  }
}
// #endregion step-level

// #region class-level
/** Shared policies are plain values: keep them in constants. */
export const RETRY_CARRIER_TIMEOUTS = new ExceptionPolicy('reattempt', {
  on: [CarrierTimeoutError],
  wait: { strategy: 'linear', delay: '5m', max: '1h' },
  maxReattempts: 20,
});

@Workflow({
  hero: () => Order,
  onException: [
    { action: 'pause' }, // blanket: whatever no other policy claims
    RETRY_CARRIER_TIMEOUTS,
    { action: 'cancel', on: ['OrderVoidedError'] }, // by class name: no import needed
    {
      on: [(error) => error instanceof RateLimitedError],
      handler: (error, wf: ShipmentWorkflow) => wf.reattempt({ wait: (error as RateLimitedError).retryAfterMs }),
    },
  ],
})
export class ShipmentWorkflow extends GenevaWorkflow<Order> {
  constructor(private readonly shipping: ShippingService) {
    super();
  }

  @Step()
  async bookCarrier() {
    await this.shipping.ship(this.hero);
  }

  /** The step's own policy wins over every class-level one. */
  @Step({ onException: 'skip' })
  async printLabel() {
    /* ... */
  }
}
// #endregion class-level

// #region imperative
@Workflow({ hero: () => Order })
export class RefundWorkflow extends GenevaWorkflow<Order> {
  @Step({
    onException: (error: unknown, wf: RefundWorkflow) => {
      if (error instanceof OrderVoidedError) wf.skip(); // nothing left to refund
      if (error instanceof RateLimitedError) wf.reattempt({ wait: error.retryAfterMs });
      // deciding nothing pauses the workflow, with the error recorded
    },
  })
  async refund() {
    /* ... */
  }
}
// #endregion imperative

// #region backoff-function
export const FIBONACCI_MINUTES = new ExceptionPolicy('reattempt', {
  wait: (attempt) => [1, 1, 2, 3, 5, 8, 13][Math.min(attempt, 7) - 1] * 60_000,
  maxReattempts: null, // unlimited
});
// #endregion backoff-function
