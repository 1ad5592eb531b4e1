/**
 * Fixture workflows of the signal specs (reference PART C: `Invoice` = prepare → awaitPayment
 * (waitFor payment_confirmed) → issueReceipt). Bodies record what they did in `signalJournal` and the
 * signal they saw in `seenSignals`; `signalControls` lets a test change a body, a condition or a
 * matcher without declaring another class. `resetSignalFixtures()` in beforeEach.
 */
import type { Type } from '@nestjs/common';
import { GenevaWorkflow, SignalMatcher, SignalService, Step, Workflow, type Signal, type SignalMatcherLike, type StepExecution, type StepOptions } from 'geneva-drive';
import { TestHero } from '../utils/fixtures.js';

/** What the bodies did, in order (`prepared`, `captured(700)`, `receipt`, ...). */
export const signalJournal: string[] = [];
/** Every signal a body saw: step, signal id and payload. */
export const seenSignals: Array<{ step: string; signalId: string | null; payload: unknown }> = [];
/** `receivedSignal` as the hooks saw it: `before:awaitPayment:<id|null>` and so on. */
export const hookLog: string[] = [];

export interface SignalControls {
  /** Extra behaviour of awaitPayment's body, after it recorded the signal (throw, skip(), pause()...). */
  awaitBody?: (wf: GenevaWorkflow<TestHero>) => unknown;
  /** awaitPayment's skipIf; a function runs when it is evaluated (returning a promise holds the prepare transaction open). */
  skipAwait?: boolean | (() => boolean | Promise<boolean>);
  /** TwoWaitersWorkflow.first's skipIf. */
  skipFirst?: boolean;
  /** The payment matcher of MatcherInvoiceWorkflow throws. */
  matcherThrows?: boolean;
  /** Calls of that matcher. */
  matcherCalls: number;
}

export const signalControls: SignalControls = { matcherCalls: 0 };

export function resetSignalFixtures(): void {
  signalJournal.length = 0;
  seenSignals.length = 0;
  hookLog.length = 0;
  for (const key of Object.keys(signalControls) as Array<keyof SignalControls>) delete signalControls[key];
  signalControls.matcherCalls = 0;
}

/** Builds one Invoice-shaped workflow class; `awaitOptions` are merged into awaitPayment's @Step. */
function defineInvoice(name: string, awaitOptions: Partial<StepOptions> = {}): Type<GenevaWorkflow<TestHero>> {
  @Workflow({ name, hero: () => TestHero, cancelIf: [(wf: GenevaWorkflow<TestHero>) => wf.hero.canceled] })
  class Invoice extends GenevaWorkflow<TestHero> {
    @Step()
    async prepare() {
      signalJournal.push('prepared');
    }

    @Step({
      waitFor: 'payment_confirmed',
      skipIf: () => (typeof signalControls.skipAwait === 'function' ? signalControls.skipAwait() : (signalControls.skipAwait ?? false)),
      ...awaitOptions,
    })
    async awaitPayment() {
      const signal = this.receivedSignal;
      seenSignals.push({ step: 'awaitPayment', signalId: signal?.id ?? null, payload: signal?.payload });
      signalJournal.push(`captured(${String(signal?.payload?.amountCents)})`);
      await signalControls.awaitBody?.(this);
    }

    @Step()
    async issueReceipt() {
      seenSignals.push({ step: 'issueReceipt', signalId: this.receivedSignal?.id ?? null, payload: this.receivedSignal?.payload });
      signalJournal.push('receipt');
    }

    override beforeStepExecution(execution: StepExecution) {
      hookLog.push(`before:${execution.stepName}:${this.receivedSignal?.id ?? 'null'}`);
    }

    override async aroundStepExecution(execution: StepExecution, run: () => Promise<void>) {
      hookLog.push(`around:${execution.stepName}:${this.receivedSignal?.id ?? 'null'}`);
      return run();
    }

    override afterStepExecution(execution: StepExecution) {
      hookLog.push(`after:${execution.stepName}:${this.receivedSignal?.id ?? 'null'}`);
    }
  }
  Object.defineProperty(Invoice, 'name', { value: name });
  return Invoice;
}

export const InvoiceWorkflow = defineInvoice('InvoiceWorkflow');
/** awaitPayment has `onException: 'skip'`. */
export const SkipOnErrorInvoiceWorkflow = defineInvoice('SkipOnErrorInvoiceWorkflow', { onException: 'skip' });
/** awaitPayment has `onException: 'reattempt'`. */
export const ReattemptOnErrorInvoiceWorkflow = defineInvoice('ReattemptOnErrorInvoiceWorkflow', { onException: 'reattempt' });
/** awaitPayment's exception handler calls `finished()`. */
export const FinishOnErrorInvoiceWorkflow = defineInvoice('FinishOnErrorInvoiceWorkflow', {
  onException: (_error: unknown, wf: GenevaWorkflow<TestHero>) => wf.finished(),
});
/** awaitPayment has `wait: '2d'` as well as `waitFor`. */
export const DelayedInvoiceWorkflow = defineInvoice('DelayedInvoiceWorkflow', { wait: '2d' });
/** awaitPayment's matcher counts its calls and throws while `signalControls.matcherThrows`. */
export const MatcherInvoiceWorkflow = defineInvoice('MatcherInvoiceWorkflow', {
  waitFor: new SignalMatcher('payment_confirmed', () => {
    signalControls.matcherCalls++;
    if (signalControls.matcherThrows) throw new Error('matcher exploded');
    return true;
  }),
});

export const ALL_INVOICES = [
  InvoiceWorkflow,
  SkipOnErrorInvoiceWorkflow,
  ReattemptOnErrorInvoiceWorkflow,
  FinishOnErrorInvoiceWorkflow,
  DelayedInvoiceWorkflow,
  MatcherInvoiceWorkflow,
];

/** AT-07: the very first step waits. */
@Workflow({ hero: () => TestHero })
export class FirstStepWaitsWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: 'go' })
  async awaitGo() {
    signalJournal.push(`go(${String(this.receivedSignal?.payload?.n)})`);
  }

  @Step()
  async done() {
    signalJournal.push('done');
  }
}

/** AT-50 / SIG-51: two sequential steps wait for the same name. */
@Workflow({ hero: () => TestHero })
export class TwoWaitersWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: 'ping', skipIf: () => signalControls.skipFirst ?? false })
  async first() {
    seenSignals.push({ step: 'first', signalId: this.receivedSignal!.id, payload: this.receivedSignal!.payload });
  }

  @Step({ waitFor: 'ping' })
  async second() {
    seenSignals.push({ step: 'second', signalId: this.receivedSignal!.id, payload: this.receivedSignal!.payload });
  }
}

/** Two steps waiting for two names: a signal for the second, sent while the first is parked, is buffered. */
@Workflow({ hero: () => TestHero })
export class PingThenPongWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: 'ping' })
  async ping() {
    seenSignals.push({ step: 'ping', signalId: this.receivedSignal!.id, payload: this.receivedSignal!.payload });
  }

  @Step({ waitFor: 'pong' })
  async pong() {
    seenSignals.push({ step: 'pong', signalId: this.receivedSignal!.id, payload: this.receivedSignal!.payload });
  }
}

/** The matcher reads the hero of the workflow the signal was sent to (hero.name stands for an email). */
export const PAID_BY_HERO = new SignalMatcher<{ email: string }, GenevaWorkflow<TestHero>>('paid', (payload, wf) => payload.email === wf.hero.name);

/** AT-09: SignalMatcher with a payload predicate using wf.hero. */
@Workflow({ hero: () => TestHero })
export class EmailMatcherWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: PAID_BY_HERO })
  async awaitPaid() {
    seenSignals.push({ step: 'awaitPaid', signalId: this.receivedSignal!.id, payload: this.receivedSignal!.payload });
  }
}

/** AT-10: a custom matcher object owning the whole decision (either of two names, a minimum amount). */
export class PaymentSettled implements SignalMatcherLike {
  constructor(private readonly minCents: number) {}

  describe(): string {
    return `payment settled >= ${this.minCents}`;
  }

  matches(signal: Signal<{ amountCents?: number }>): boolean {
    return ['a', 'b'].includes(signal.name) && Number(signal.payload?.amountCents ?? 0) >= this.minCents;
  }
}

@Workflow({ hero: () => TestHero })
export class CustomMatcherWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: new PaymentSettled(1000) })
  async awaitSettled() {
    seenSignals.push({ step: 'awaitSettled', signalId: this.receivedSignal!.id, payload: this.receivedSignal!.payload });
  }
}

/** AT-63 / SIG-12: a step signals its own workflow; a later step waits for that signal. */
@Workflow({ hero: () => TestHero })
export class SelfSignalWorkflow extends GenevaWorkflow<TestHero> {
  constructor(private readonly signals: SignalService) {
    super();
  }

  @Step()
  async sendPing() {
    const sent = await this.signals.signal(this.record, 'ping', { payload: { from: 'self' } });
    signalJournal.push(`sent(${sent.state})`);
  }

  @Step({ waitFor: 'ping' })
  async awaitPing() {
    signalJournal.push(`got(${String(this.receivedSignal?.payload?.from)})`);
  }
}

/** A workflow without any signal, for the missing-migration mode. */
@Workflow({ hero: () => TestHero })
export class PlainTwoStepWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async one() {
    signalJournal.push(`one:${this.receivedSignal === null ? 'no-signal' : 'signal'}`);
  }

  @Step()
  async two() {
    signalJournal.push('two');
  }
}

/** A signal definition: its name and its payload's type, shared by the sender and the step. */
export const PAYMENT_CONFIRMED = new SignalMatcher<{ amountCents: number }>('payment_confirmed');

/** `capture` reads the payload typed through the definition; `misread` asks for a signal it never got. */
@Workflow({ hero: () => TestHero })
export class TypedPaymentWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: PAYMENT_CONFIRMED })
  async capture() {
    const { id, payload } = this.receivedSignalOf(PAYMENT_CONFIRMED);
    seenSignals.push({ step: 'capture', signalId: id, payload: { cents: payload.amountCents.toFixed(0) } });
  }

  @Step()
  async misread() {
    this.receivedSignalOf(PAYMENT_CONFIRMED);
  }
}
