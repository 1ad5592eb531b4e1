/**
 * Workflows of the interleavings spec. Every body records the execution it ran for and the hero it
 * saw (`bodyRuns`), so a check can tell a body run twice, or one that ran on a hero older than the
 * commit its gate acted on.
 */
import { SignalMatcher, Step, Workflow } from 'geneva-drive';
import { GenevaWorkflow } from 'geneva-drive';
import { TestHero } from '../utils/fixtures.js';
import { TestEffect } from './transactional-workflows.js';

export interface BodyRun {
  workflowId: string;
  executionId: string;
  step: string;
  heroActive: boolean;
  heroCanceled: boolean;
  signalId: string | null;
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

/** `a → b (waitFor go) → c`; the hero's cancellation cancels it at any step's start. */
@Workflow({ hero: () => TestHero, cancelIf: [(wf: GenevaWorkflow<TestHero>) => wf.hero.canceled] })
export class GatedWorkflow extends GenevaWorkflow<TestHero> {
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

export const INTERLEAVING_WORKFLOWS = [GatedWorkflow, HeroMatchedWorkflow, PlainWorkflow, DeadlineWorkflow, LedgerGatedWorkflow, LedgerWaitingWorkflow];
