/** Workflows of the step-chaining spec: which steps start inline, and what a failed inline start does. */
import { GenevaWorkflow, Step, Workflow } from 'geneva-drive';
import { TestHero } from '../utils/fixtures.js';

/** Step bodies that ran, in order, with their workflow: `<workflow id>:<step>`. */
export const chainJournal: string[] = [];

@Workflow({ name: 'ChainFiveSteps', hero: () => TestHero })
export class ChainFiveStepsWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async one() {
    chainJournal.push(`${this.record.id}:one`);
  }
  @Step() async two() {
    chainJournal.push(`${this.record.id}:two`);
  }
  @Step({ jobOptions: { chain: false } }) async three() {
    chainJournal.push(`${this.record.id}:three`);
  }
  @Step() async four() {
    chainJournal.push(`${this.record.id}:four`);
  }
  @Step() async five() {
    chainJournal.push(`${this.record.id}:five`);
  }
}

/** Set by the first step: the next instance of the workflow fails to construct (once). */
export const construction = { failNext: false };

@Workflow({ name: 'ChainBrokenStart', hero: () => TestHero })
export class ChainBrokenStartWorkflow extends GenevaWorkflow<TestHero> {
  constructor() {
    super();
    if (construction.failNext) {
      construction.failNext = false;
      throw new Error('this instance cannot be built');
    }
  }

  @Step() async first() {
    chainJournal.push(`${this.record.id}:first`);
    construction.failNext = true;
  }
  @Step() async second() {
    chainJournal.push(`${this.record.id}:second`);
  }
}

export const CHAIN_WORKFLOWS = [ChainFiveStepsWorkflow, ChainBrokenStartWorkflow];
