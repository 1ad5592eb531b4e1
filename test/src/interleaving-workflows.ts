/**
 * Workflows of the interleavings spec. Every body records the execution it ran for and the hero it
 * saw (`bodyRuns`), so a check can tell a body run twice, or one that ran on a hero older than the
 * commit its gate acted on.
 */
import { childrenOf, SignalMatcher, Step, Workflow } from 'geneva-drive';
import { GenevaWorkflow } from 'geneva-drive';
import type { DataSource } from 'typeorm';
import { TestHero } from '../utils/fixtures.js';
import { TestEffect } from './transactional-workflows.js';

export interface BodyRun {
  workflowId: string;
  executionId: string;
  step: string;
  heroActive: boolean;
  heroCanceled: boolean;
  signalId: string | null;
  /** A fan-in body: the children it was handed in `this.children` (id and state). */
  children?: Array<{ id: string; state: string }>;
  /** A keyed body: the executions of its key in progress as it ran (its own included). */
  holders?: number;
}

/** Every body run of this process, in order. */
export const bodyRuns: BodyRun[] = [];

function record(workflow: GenevaWorkflow<TestHero>, step: string): void {
  bodyRuns.push({
    workflowId: workflow.record.id,
    executionId: workflow.currentExecution.id,
    step,
    heroActive: Boolean(workflow.hero.active),
    heroCanceled: Boolean(workflow.hero.canceled),
    signalId: workflow.receivedSignal?.id ?? null,
  });
}

/** `a → b (waitFor go) → c`, the steps of GatedWorkflow and NameGatedWorkflow. */
abstract class GatedSteps extends GenevaWorkflow<TestHero> {
  @Step()
  async a() {
    record(this, 'a');
  }

  @Step({ waitFor: 'go' })
  async b() {
    record(this, 'b');
  }

  @Step()
  async c() {
    record(this, 'c');
  }
}

/** `a → b (waitFor go) → c`; the hero's cancellation cancels it at any step's start. */
@Workflow({ hero: () => TestHero, cancelIf: [(wf: GenevaWorkflow<TestHero>) => wf.hero.canceled] })
export class GatedWorkflow extends GatedSteps {}

/**
 * GatedWorkflow's steps without its cancelIf: nothing is decided in Node before a step's body, so
 * each chained step starts in its predecessor's outcome message (PostgreSQL).
 */
@Workflow({ hero: () => TestHero })
export class NameGatedWorkflow extends GatedSteps {}

/** `a → b (waitFor go, only while the hero is active) → c`: the matcher reads the hero. */
@Workflow({ hero: () => TestHero })
export class HeroMatchedWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async a() {
    record(this, 'a');
  }

  @Step({ waitFor: new SignalMatcher('go', (_payload: unknown, wf: GenevaWorkflow<TestHero>) => wf.hero.active) })
  async b() {
    record(this, 'b');
  }

  @Step()
  async c() {
    record(this, 'c');
  }
}

/** `a → b → c`, plain steps: the unlocked phases run them. */
@Workflow({ hero: () => TestHero })
export class PlainWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async a() {
    record(this, 'a');
  }

  @Step()
  async b() {
    record(this, 'b');
  }

  @Step()
  async c() {
    record(this, 'c');
  }
}

/** One step that waits for `go` with a timeout. */
@Workflow({ hero: () => TestHero })
export class DeadlineWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: 'go', timeout: '1h', onTimeout: 'run' })
  async b() {
    record(this, 'b');
  }

  @Step()
  async c() {
    record(this, 'c');
  }
}

/** `a → t (transactional: one effect row per committed run) → b (waitFor go) → c`. */
@Workflow({ hero: () => TestHero })
export class LedgerGatedWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async a() {
    record(this, 'a');
  }

  @Step({ transactional: true })
  async t() {
    record(this, 't');
    await this.manager.getRepository(TestEffect).insert({ workflowId: this.record.id, step: 't' });
  }

  @Step({ waitFor: 'go' })
  async b() {
    record(this, 'b');
  }

  @Step()
  async c() {
    record(this, 'c');
  }
}

/** `a → t (transactional, waitFor go: one effect row per committed run) → c`. */
@Workflow({ hero: () => TestHero })
export class LedgerWaitingWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async a() {
    record(this, 'a');
  }

  @Step({ transactional: true, waitFor: 'go' })
  async t() {
    record(this, 't');
    await this.manager.getRepository(TestEffect).insert({ workflowId: this.record.id, step: 't' });
  }

  @Step()
  async c() {
    record(this, 'c');
  }
}

/** A child of FanParentWorkflow: one step that sets a result. */
@Workflow({ hero: () => TestHero })
export class FanLeafWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async work() {
    record(this, 'work');
    this.setResult({ leaf: this.record.id });
  }
}

/** A child whose only step is transactional: its end (and the child_finished to its parent) commits with its effect row. */
@Workflow({ hero: () => TestHero })
export class LedgerLeafWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ transactional: true })
  async t() {
    record(this, 't');
    await this.manager.getRepository(TestEffect).insert({ workflowId: this.record.id, step: 't' });
    this.setResult({ leaf: this.record.id });
  }
}

/** How many children a fan-out starts. */
export const FAN_OUT = 2;

/**
 * `fanOut` (FAN_OUT leaves of `leaf` on the parent's hero, canceled with it) → `fanIn` (waitFor all
 * of them) → `after`: the fan-in step is not the last, so its skip leaves the parent ongoing.
 */
function fanParent(leaf: typeof FanLeafWorkflow | typeof LedgerLeafWorkflow) {
  @Workflow({ hero: () => TestHero, name: `${leaf.name === FanLeafWorkflow.name ? '' : 'Ledger'}FanParentWorkflow` })
  class FanParent extends GenevaWorkflow<TestHero> {
    @Step()
    async fanOut() {
      record(this, 'fanOut');
      for (let index = 0; index < FAN_OUT; index++) this.startChild(leaf, this.hero, { allowMultiple: true });
    }

    @Step({ waitFor: childrenOf('fanOut') })
    async fanIn() {
      record(this, 'fanIn');
      bodyRuns[bodyRuns.length - 1].children = this.children.map((child) => ({ id: child.id, state: child.state }));
    }

    @Step()
    async after() {
      record(this, 'after');
    }
  }
  return FanParent;
}

export const FanParentWorkflow = fanParent(FanLeafWorkflow);
/** FanParentWorkflow, its children LedgerLeafWorkflow. */
export const LedgerFanParentWorkflow = fanParent(LedgerLeafWorkflow);
export type FanParentClass = typeof FanParentWorkflow;

/** Where a keyed body counts the holders of its key (set by the scenario's setup). */
export const keyedProbe = { dataSource: null as DataSource | null };

/** The concurrency key of KeyedWorkflow's step `a`: one per hero name, one holder at a time. */
export const keyOfHero = (hero: TestHero) => `slot:${hero.name}`;

/** A keyed body: records its run and how many executions held its key as it ran. */
async function holdKey(workflow: GenevaWorkflow<TestHero>): Promise<void> {
  record(workflow, 'a');
  const run = bodyRuns[bodyRuns.length - 1];
  const dataSource = keyedProbe.dataSource!;
  const count = `SELECT COUNT(*) AS n FROM geneva_drive_step_executions WHERE flow_key = ${dataSource.options.type === 'postgres' ? '$1' : '?'} AND state = 'in_progress'`;
  // The probe's own read, not the step's work: a connection the explorer kills under it is read again.
  for (let tries = 1; run.holders === undefined; tries++) {
    try {
      run.holders = Number((await dataSource.query(count, [keyOfHero(workflow.hero)]))[0].n);
    } catch (error) {
      if (tries >= 3) throw error;
    }
  }
}

/** `a` (concurrency key per hero name, limit 1) → `c`. */
@Workflow({ hero: () => TestHero })
export class KeyedWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ concurrency: { key: (wf: KeyedWorkflow) => keyOfHero(wf.hero), limit: 1 } })
  async a() {
    await holdKey(this);
  }

  @Step()
  async c() {
    record(this, 'c');
  }
}

/** `a` alone, keyed as KeyedWorkflow's: the workflow's last step, whose outcome PostgreSQL records in one statement that frees the slot. */
@Workflow({ hero: () => TestHero })
export class KeyedLastWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ concurrency: { key: (wf: KeyedLastWorkflow) => keyOfHero(wf.hero), limit: 1 } })
  async a() {
    await holdKey(this);
  }
}

/** `a` (one start an hour per hero name) → `c`. */
@Workflow({ hero: () => TestHero })
export class RatedWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ rateLimit: { key: (wf: RatedWorkflow) => `rate:${wf.hero.name}`, limit: 1, per: '1h' } })
  async a() {
    record(this, 'a');
  }

  @Step()
  async c() {
    record(this, 'c');
  }
}

export const INTERLEAVING_WORKFLOWS = [
  KeyedWorkflow,
  KeyedLastWorkflow,
  RatedWorkflow,
  GatedWorkflow,
  NameGatedWorkflow,
  HeroMatchedWorkflow,
  PlainWorkflow,
  DeadlineWorkflow,
  LedgerGatedWorkflow,
  LedgerWaitingWorkflow,
  FanLeafWorkflow,
  FanParentWorkflow,
  LedgerLeafWorkflow,
  LedgerFanParentWorkflow,
];
