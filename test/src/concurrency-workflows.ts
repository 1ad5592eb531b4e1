/**
 * Workflows with concurrency keys: the key is the hero's `name` (heroes sharing a name share the
 * key). A body can be held in progress until the test releases it, so that a test decides exactly
 * which executions hold a key when another one's phase 1 asks for a slot.
 */
import { GenevaWorkflow, Step, Workflow, type StepExecution, type WorkflowRecord } from 'geneva-drive';
import type { GenevaDriveTesting } from 'geneva-drive/testing';
import { TestHero } from '../utils/fixtures.js';

interface Hold {
  entered: Promise<void>;
  enter(): void;
  release(): void;
  released: Promise<void>;
}

function hold(): Hold {
  let enter!: () => void;
  let release!: () => void;
  const entered = new Promise<void>((resolve) => (enter = resolve));
  const released = new Promise<void>((resolve) => (release = resolve));
  return { entered, enter, release, released };
}

export const slots = {
  /** Bodies that wait until released, by hero id (the others run through). */
  holds: new Map<number, Hold>(),
  /** The hero ids of the bodies that ran, in the order they started. */
  started: [] as number[],
  /** Hero ids whose key function throws. */
  failingKeys: new Set<number>(),
  /** Holds the body of the hero's next run: the test awaits `entered` and calls `release`. */
  holdNext(heroId: number): Hold {
    const next = hold();
    this.holds.set(heroId, next);
    return next;
  },
  reset(): void {
    this.holds.clear();
    this.started = [];
    this.failingKeys.clear();
  },
};

/**
 * Runs the workflow's current step with its body held in progress (holding its key's slot);
 * resolves once the body runs, with `release`, which lets it end and resolves with its execution.
 */
export async function performHeld(gd: GenevaDriveTesting, entry: { hero: TestHero; workflow: WorkflowRecord }): Promise<{ release(): Promise<StepExecution | null> }> {
  const held = slots.holdNext(entry.hero.id);
  const run = gd.performNextStep(entry.workflow);
  await held.entered;
  return { release: () => (held.release(), run) };
}

function keyOf(workflow: GenevaWorkflow<TestHero>): string {
  if (slots.failingKeys.has(workflow.hero.id)) throw new Error(`no key for ${workflow.hero.name}`);
  return workflow.hero.name;
}

async function body(workflow: GenevaWorkflow<TestHero>): Promise<void> {
  slots.started.push(workflow.hero.id);
  const held = slots.holds.get(workflow.hero.id);
  if (!held) return;
  slots.holds.delete(workflow.hero.id);
  held.enter();
  await held.released;
}

/** One key per hero name, one at a time: `charge` holds it, `receipt` is free. */
@Workflow({ hero: () => TestHero })
export class ChargeWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ concurrency: { key: keyOf, limit: 1 } })
  async charge(): Promise<void> {
    await body(this);
  }

  @Step()
  async receipt(): Promise<void> {}
}

/** ChargeWorkflow's key, with a step priority: 1 (urgent) or 5 (routine). */
@Workflow({ hero: () => TestHero })
export class UrgentChargeWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ concurrency: { key: keyOf, limit: 1 }, jobOptions: { priority: 1 } })
  async charge(): Promise<void> {
    await body(this);
  }
}

@Workflow({ hero: () => TestHero })
export class RoutineChargeWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ concurrency: { key: keyOf, limit: 1 }, jobOptions: { priority: 5 } })
  async charge(): Promise<void> {
    await body(this);
  }
}

/** Two at a time per key, for every step (the workflow's `concurrency`); `notify` has a key of its own. */
@Workflow({ hero: () => TestHero, concurrency: { key: keyOf, limit: 2 } })
export class PairWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async first(): Promise<void> {
    await body(this);
  }

  @Step({ concurrency: { key: (wf: PairWorkflow) => `notify:${keyOf(wf)}`, limit: 1 } })
  async notify(): Promise<void> {}
}

/** Two starts a minute per key (the hero's name). */
@Workflow({ hero: () => TestHero })
export class MailWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ rateLimit: { key: keyOf, limit: 2, per: '1m' } })
  async send(): Promise<void> {
    await body(this);
  }
}

/** One start a minute per key for every step (the workflow's `rateLimit`); `report` holds the one slot of 'reports' as well. */
@Workflow({ hero: () => TestHero, rateLimit: { key: keyOf, limit: 1, per: '1m' } })
export class PacedWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async fetch(): Promise<void> {
    await body(this);
  }

  @Step({ concurrency: { key: () => 'reports', limit: 1 } })
  async report(): Promise<void> {
    await body(this);
  }
}

/** A key function that returns what is not a key. */
@Workflow({ hero: () => TestHero })
export class BadKeyWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ concurrency: { key: (wf: BadKeyWorkflow) => 'k'.repeat(wf.hero.name.length > 3 ? 256 : 0), limit: 1 } })
  async charge(): Promise<void> {}
}

export const CONCURRENCY_WORKFLOWS = [ChargeWorkflow, UrgentChargeWorkflow, RoutineChargeWorkflow, PairWorkflow, BadKeyWorkflow, MailWorkflow, PacedWorkflow];
