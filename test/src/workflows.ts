/**
 * Fixture workflows shared by the engine specs. Each records what ran in `journal`, a per-test
 * array reset in beforeEach, so tests can assert what the bodies did.
 */
import { Injectable } from '@nestjs/common';
import { GenevaWorkflow, Step, Workflow } from 'geneva-drive';
import { TestHero } from '../utils/fixtures.js';

export const journal: string[] = [];

export class TransientError extends Error {}
export class FatalError extends Error {}

/** A dependency injected into workflows, to prove Nest DI reaches steps. */
@Injectable()
export class Greeter {
  greet(name: string): string {
    return `hello ${name}`;
  }
}

@Workflow({ hero: () => TestHero })
export class ThreeStepWorkflow extends GenevaWorkflow<TestHero> {
  constructor(private readonly greeter: Greeter) {
    super();
  }

  @Step()
  async stepOne() {
    journal.push(this.greeter.greet(this.hero.name));
  }

  @Step({ wait: '2h' })
  async stepTwo() {
    journal.push('two');
  }

  @Step()
  async stepThree() {
    journal.push('three');
  }
}
