/**
 * Fixture workflows of the wait-deadline specs: `Countersign` = send → awaitSignature (waitFor
 * 'signed', timeout) → file, one class per `onTimeout`, plus a step that waits after a delay, a
 * resumable waiter, a waiter whose body fails once and a later waiter of the same signal. Bodies record in `deadlineJournal` what
 * they saw: `awaitSignature(timedOut|<signal id>)`.
 */
import type { Type } from '@nestjs/common';
import { GenevaWorkflow, ResumableStep, Step, StepIteration, Workflow, type StepOptions } from 'geneva-drive';
import { TestHero } from '../utils/fixtures.js';

export const deadlineJournal: string[] = [];
/** How many more times FlakyOnTimeoutWorkflow's body fails, and then pauses its workflow. */
export const deadlinePlan = { bodyFailures: 0, pauses: 0 };

export function resetDeadlineFixtures(): void {
  deadlineJournal.length = 0;
  deadlinePlan.bodyFailures = 0;
  deadlinePlan.pauses = 0;
}

const seen = (wf: GenevaWorkflow<TestHero>, step: string) => deadlineJournal.push(`${step}(${wf.timedOut ? 'timedOut' : (wf.receivedSignal?.id ?? 'none')})`);

function defineCountersign(name: string, awaitOptions: Partial<StepOptions>): Type<GenevaWorkflow<TestHero>> {
  @Workflow({ name, hero: () => TestHero })
  class Countersign extends GenevaWorkflow<TestHero> {
    @Step()
    async send() {
      deadlineJournal.push('send');
    }

    @Step({ waitFor: 'signed', timeout: '14d', ...awaitOptions })
    async awaitSignature() {
      seen(this, 'awaitSignature');
    }

    @Step()
    async file() {
      deadlineJournal.push('file');
    }
  }
  Object.defineProperty(Countersign, 'name', { value: name });
  return Countersign;
}

export const RunOnTimeoutWorkflow = defineCountersign('RunOnTimeoutWorkflow', {});
export const SkipOnTimeoutWorkflow = defineCountersign('SkipOnTimeoutWorkflow', { onTimeout: 'skip' });
export const CancelOnTimeoutWorkflow = defineCountersign('CancelOnTimeoutWorkflow', { onTimeout: 'cancel' });
export const PauseOnTimeoutWorkflow = defineCountersign('PauseOnTimeoutWorkflow', { onTimeout: 'pause' });
/** Waits a day before it parks; the deadline counts from the park. */
export const DelayedDeadlineWorkflow = defineCountersign('DelayedDeadlineWorkflow', { wait: '1d', timeout: '2h' });
/** A short deadline, for the queues to fire by themselves. */
export const ShortDeadlineWorkflow = defineCountersign('ShortDeadlineWorkflow', { timeout: '400ms' });
/** A deadline already passed when its job is enqueued (after the park's commit). */
export const InstantDeadlineWorkflow = defineCountersign('InstantDeadlineWorkflow', { timeout: '1ms' });

/** A `timeout` that runs the body, then a second waiter of the same signal without one: a signal that lost to the deadline is buffered for it. */
@Workflow({ hero: () => TestHero })
export class LaterWaiterWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: 'signed', timeout: '1h' })
  async first() {
    seen(this, 'first');
  }

  @Step({ waitFor: 'signed' })
  async second() {
    seen(this, 'second');
  }
}

/** A resumable waiter with a deadline: three items, one per execution; each continuation still knows it timed out. */
@Workflow({ hero: () => TestHero })
export class ResumableDeadlineWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep({ waitFor: 'signed', timeout: '1h' })
  async sweep(iter: StepIteration<number>) {
    for await (const item of iter.over([1, 2, 3])) deadlineJournal.push(`sweep(${item}, ${this.timedOut ? 'timedOut' : (this.receivedSignal?.id ?? 'none')})`);
  }
}

/** Its body fails `deadlinePlan.bodyFailures` times (reattempted once, then paused), then pauses `deadlinePlan.pauses` times: a step that timed out, run again. */
@Workflow({ hero: () => TestHero })
export class FlakyOnTimeoutWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: 'signed', timeout: '14d', onException: 'reattempt', maxReattempts: 1 })
  async awaitSignature() {
    seen(this, 'awaitSignature');
    if (deadlinePlan.bodyFailures-- > 0) throw new Error('the carrier is down');
    if (deadlinePlan.pauses-- > 0) this.pause();
  }
}

/** Waits for a signal with no deadline: untouched by the migration and the deadline machinery. */
@Workflow({ hero: () => TestHero })
export class NoDeadlineWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: 'signed' })
  async awaitSignature() {
    seen(this, 'awaitSignature');
  }
}

/** For signalHero: several may run per hero (allowMultiple). */
@Workflow({ hero: () => TestHero })
export class HeroAddressedWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: 'signed' })
  async awaitSignature() {
    seen(this, 'awaitSignature');
  }
}

export const DEADLINE_WORKFLOWS = [
  RunOnTimeoutWorkflow,
  SkipOnTimeoutWorkflow,
  CancelOnTimeoutWorkflow,
  PauseOnTimeoutWorkflow,
  DelayedDeadlineWorkflow,
  ShortDeadlineWorkflow,
  InstantDeadlineWorkflow,
  LaterWaiterWorkflow,
  ResumableDeadlineWorkflow,
  FlakyOnTimeoutWorkflow,
  NoDeadlineWorkflow,
  HeroAddressedWorkflow,
];
