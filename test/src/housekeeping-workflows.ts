/**
 * Fixture workflows of the housekeeping specs. Step bodies record what ran in `hkJournal` (reset in
 * beforeEach), so a test can tell that a recovered step really ran, and how many times.
 */
import { GenevaWorkflow, Step, Workflow } from 'geneva-drive';
import { TestHero } from '../utils/fixtures.js';

export const hkJournal: string[] = [];

/** Two plain steps. */
@Workflow({ hero: () => TestHero })
export class ChoreWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async sweep() {
    hkJournal.push(`sweep ${this.hero.name}`);
  }

  @Step()
  async mop() {
    hkJournal.push(`mop ${this.hero.name}`);
  }
}

/** Parks on `delivered`, records the payload it received, then archives. */
@Workflow({ hero: () => TestHero })
export class DeliveryWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: 'delivered' })
  async awaitDelivery() {
    hkJournal.push(`delivered ${this.receivedSignal?.payload.parcel}`);
  }

  @Step()
  async archive() {
    hkJournal.push('archived');
  }
}

/** A second parking workflow type, for the per-type gauges. */
@Workflow({ hero: () => TestHero })
export class ApprovalWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: 'approved' })
  async awaitApproval() {
    hkJournal.push(`approved by ${this.receivedSignal?.payload.by}`);
  }
}

/**
 * Its step blocks until the test releases it: a worker that is still (or no longer) running while
 * housekeeping decides the execution is stuck.
 */
@Workflow({ hero: () => TestHero })
export class SlowWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async crunch() {
    hkJournal.push('crunch started');
    slowStep.started?.();
    await slowStep.release;
    hkJournal.push('crunch finished');
  }

  @Step()
  async report() {
    hkJournal.push('report');
  }
}

/** The gate of SlowWorkflow's step: `arm()` before running it, then `started` / `finish()`. */
export const slowStep: { started?: () => void; release: Promise<void>; arm(): { started: Promise<void>; finish: () => void } } = {
  release: Promise.resolve(),
  arm() {
    let finish!: () => void;
    const started = new Promise<void>((resolve) => (this.started = resolve));
    this.release = new Promise<void>((resolve) => (finish = resolve));
    return { started, finish };
  },
};

/** Its step allows one recovery in a row, and throws (and is reattempted) when `brittle.throwNext` is set. */
@Workflow({ hero: () => TestHero })
export class BrittleWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ onException: 'reattempt', maxReattempts: 10, maxRecoveries: 1 })
  async brew() {
    if (brittle.throwNext) {
      brittle.throwNext = false;
      throw new Error('brew failed');
    }
    hkJournal.push('brew');
  }
}

export const brittle = { throwNext: false };

export const HOUSEKEEPING_WORKFLOWS = [ChoreWorkflow, DeliveryWorkflow, ApprovalWorkflow, SlowWorkflow, BrittleWorkflow];
