/**
 * Workflows that start children and wait for them: a leaf child whose step ends as the spec says,
 * parents fanning out to one leaf per hero of `kids.heroes` and fanning in (all, any, two), a middle
 * generation for grandchildren, and a fan-out that a test stops half way through its body.
 */
import { childrenOf, GenevaWorkflow, Step, Workflow, type ChildWorkflow, type StartChildOptions } from 'geneva-drive';
import { TestHero } from '../utils/fixtures.js';

/** How a leaf's step ends, by hero id (default: completes with a result). */
export type LeafEnding = 'complete' | 'cancel' | 'throw';

export const kids = {
  /** The heroes a fan-out starts one leaf for, in order. */
  heroes: [] as TestHero[],
  /** Options every startChild of a fan-out passes (besides the key). */
  options: {} as StartChildOptions,
  /** Keys given to the fan-out's children, in order (none: the default keys). */
  keys: [] as string[],
  endings: new Map<number, LeafEnding>(),
  /** The fan-out body throws after its startChild calls. */
  throwAfterStart: false,
  /** A fan-out body waits here after its startChild calls while set (a run the test stops half way). */
  hold: null as null | { reached: () => void; release: Promise<void> },
  /** What each fan-in body saw in `this.children`, by workflow id. */
  seen: new Map<string, ChildWorkflow[]>(),
  /** The handles' ids after each startChild, as the body saw them. */
  handleIds: [] as Array<string | null>,
  reset(): void {
    this.heroes = [];
    this.options = {};
    this.keys = [];
    this.endings.clear();
    this.throwAfterStart = false;
    this.hold = null;
    this.seen.clear();
    this.handleIds = [];
  },
};

/** A child whose only step sets a result (with a Date, to show the round trip), or cancels, or throws. */
@Workflow({ hero: () => TestHero })
export class LeafWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async work() {
    const ending = kids.endings.get(this.hero.id) ?? 'complete';
    if (ending === 'cancel') this.cancel();
    if (ending === 'throw') throw new Error(`leaf ${this.hero.id} failed`);
    this.setResult({ name: this.hero.name, at: new Date(Date.UTC(2024, 0, 2)) });
  }
}

/** One leaf per hero of `kids.heroes`, with `kids.options` (and `kids.keys`). */
async function fanOutLeaves(workflow: GenevaWorkflow<TestHero>): Promise<void> {
  kids.heroes.forEach((hero, index) => {
    const handle = workflow.startChild(LeafWorkflow, hero, { ...kids.options, ...(kids.keys[index] === undefined ? {} : { key: kids.keys[index] }) });
    kids.handleIds.push(handle.id);
  });
  if (kids.hold) {
    kids.hold.reached();
    await kids.hold.release;
  }
  if (kids.throwAfterStart) throw new Error('the fan-out failed after starting its children');
}

@Workflow({ hero: () => TestHero })
export class FanOutAllWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async fanOut() {
    await fanOutLeaves(this);
  }

  @Step({ waitFor: childrenOf('fanOut') })
  async fanIn() {
    kids.seen.set(this.record.id, this.children);
  }
}

@Workflow({ hero: () => TestHero })
export class FanOutAnyWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async fanOut() {
    await fanOutLeaves(this);
  }

  @Step({ waitFor: childrenOf('fanOut', { count: 'any' }) })
  async fanIn() {
    kids.seen.set(this.record.id, this.children);
  }
}

@Workflow({ hero: () => TestHero })
export class FanOutTwoWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async fanOut() {
    await fanOutLeaves(this);
  }

  @Step({ waitFor: childrenOf('fanOut', { count: 2 }), timeout: '1h' })
  async fanIn() {
    kids.seen.set(this.record.id, this.children);
  }
}

/** The middle generation: one leaf for its own hero, then its result is the leaf's. */
@Workflow({ hero: () => TestHero })
export class MiddleWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async spawn() {
    this.startChild(LeafWorkflow, this.hero);
  }

  @Step({ waitFor: childrenOf('spawn') })
  async gather() {
    kids.seen.set(this.record.id, this.children);
    this.setResult({ leaf: this.children[0]?.result ?? null });
  }
}

/** One middle workflow per hero of `kids.heroes`, and their results. */
@Workflow({ hero: () => TestHero })
export class GrandparentWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async spawn() {
    for (const hero of kids.heroes) this.startChild(MiddleWorkflow, hero, kids.options);
  }

  @Step({ waitFor: childrenOf('spawn') })
  async gather() {
    kids.seen.set(this.record.id, this.children);
  }
}

export const CHILD_WORKFLOWS = [LeafWorkflow, FanOutAllWorkflow, FanOutAnyWorkflow, FanOutTwoWorkflow, MiddleWorkflow, GrandparentWorkflow];
