/**
 * Fixture workflows for the uuid-key spec: small, about a UuidHero (a hero with a uuid key of its
 * own), recording what ran in `uuidJournal`. Tests steer failures through `uuidPlan`; call
 * `resetUuidFixtures()` in beforeEach.
 */
import { GenevaWorkflow, ResumableStep, Step, StepIteration, Workflow } from 'geneva-drive';
import { UuidHero } from '../utils/fixtures.js';

export const uuidJournal: string[] = [];

/** How many more times each failing body throws before it succeeds. */
export const uuidPlan = { flaky: 0, risky: 0, ping: 0, walk: 0 };

export function resetUuidFixtures(): void {
  uuidJournal.length = 0;
  Object.assign(uuidPlan, { flaky: 0, risky: 0, ping: 0, walk: 0 });
}

export class UuidBoom extends Error {}

function failIfPlanned(key: keyof typeof uuidPlan): void {
  if (uuidPlan[key] > 0) {
    uuidPlan[key]--;
    throw new UuidBoom(`${key} failed`);
  }
}

/** Three plain steps. */
@Workflow({ hero: () => UuidHero })
export class UuidOrderWorkflow extends GenevaWorkflow<UuidHero> {
  @Step() async pick() {
    uuidJournal.push(`pick:${this.hero.name}`);
  }

  @Step() async pack() {
    uuidJournal.push('pack');
  }

  @Step() async ship() {
    uuidJournal.push('ship');
  }
}

/** A step retried on error at most twice, then a last step. */
@Workflow({ hero: () => UuidHero })
export class UuidFlakyWorkflow extends GenevaWorkflow<UuidHero> {
  @Step({ onException: 'reattempt', maxReattempts: 2 })
  async flaky() {
    uuidJournal.push('flaky');
    failIfPlanned('flaky');
  }

  @Step() async done() {
    uuidJournal.push('done');
  }
}

/** A step under the default policy (a failure pauses the workflow), then a last step. */
@Workflow({ hero: () => UuidHero })
export class UuidFragileWorkflow extends GenevaWorkflow<UuidHero> {
  @Step() async risky() {
    uuidJournal.push('risky');
    failIfPlanned('risky');
  }

  @Step() async after() {
    uuidJournal.push('after');
  }
}

/** Three steps that each wait for `ping` and record its payload; the second is retried on error. */
@Workflow({ hero: () => UuidHero })
export class UuidPingWorkflow extends GenevaWorkflow<UuidHero> {
  @Step({ waitFor: 'ping' })
  async first() {
    uuidJournal.push(`first:${this.receivedSignal!.payload.n}`);
  }

  @Step({ waitFor: 'ping', onException: 'reattempt' })
  async second() {
    uuidJournal.push(`second:${this.receivedSignal!.payload.n}`);
    failIfPlanned('ping');
  }

  @Step({ waitFor: 'ping' })
  async third() {
    uuidJournal.push(`third:${this.receivedSignal!.payload.n}`);
  }
}

/** A resumable walk over five items (a failure pauses, resume continues from the cursor), then a last step. */
@Workflow({ hero: () => UuidHero })
export class UuidWalkWorkflow extends GenevaWorkflow<UuidHero> {
  @ResumableStep()
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over([1, 2, 3, 4, 5])) {
      if (item === 3) failIfPlanned('walk');
      uuidJournal.push(`item:${item}`);
    }
  }

  @Step() async after() {
    uuidJournal.push('after');
  }
}

export const UUID_WORKFLOWS = [UuidOrderWorkflow, UuidFlakyWorkflow, UuidFragileWorkflow, UuidPingWorkflow, UuidWalkWorkflow];
