/** Workflows of the step-chaining spec: which steps start inline, and what a failed inline start does. */
import { GenevaWorkflow, SignalMatcher, Step, Workflow } from 'geneva-drive';
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

/** `prepare`, then a gate for the first `go` whose payload is `{ pick: true }`: chained in, its gate reads the buffered signals. */
@Workflow({ name: 'ChainGate', hero: () => TestHero })
export class ChainGateWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async prepare() {
    chainJournal.push(`${this.record.id}:prepare`);
  }
  @Step({ waitFor: new SignalMatcher('go', (payload: { pick?: boolean; n: number }) => payload.pick === true) }) async pick() {
    chainJournal.push(`${this.record.id}:pick:${(this.receivedSignal!.payload as { n: number }).n}`);
  }
}

/** Two gates for `go` in a row: the second, chained in after the first consumed its signal, must wait for another. */
@Workflow({ name: 'ChainTwoGates', hero: () => TestHero })
export class ChainTwoGatesWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: 'go' }) async first() {
    chainJournal.push(`${this.record.id}:first:${(this.receivedSignal!.payload as { n: number }).n}`);
  }
  @Step({ waitFor: 'go' }) async second() {
    chainJournal.push(`${this.record.id}:second:${(this.receivedSignal!.payload as { n: number }).n}`);
  }
}

export const CHAIN_WORKFLOWS = [ChainFiveStepsWorkflow, ChainBrokenStartWorkflow, ChainGateWorkflow, ChainTwoGatesWorkflow];
