import { GenevaWorkflow, ResumableStep, Step, StepIteration, Workflow } from 'geneva-drive';
import { TestHero } from '../utils/fixtures.js';

export const seen: unknown[] = [];
export const ITEMS = ['a', 'b', 'c', 'd', 'e'];

@Workflow({ hero: () => TestHero })
export class ArrayWalkWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async before() { seen.push('before'); }

  @ResumableStep()
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over(ITEMS)) seen.push(item);
  }

  @Step() async after() { seen.push('after'); }
}

@Workflow({ hero: () => TestHero })
export class PausingWalkWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep()
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over(ITEMS)) {
      seen.push(item);
      if (item === 'c' && !iter.resumed) this.pause();
    }
  }
}

@Workflow({ hero: () => TestHero })
export class FailingWalkWorkflow extends GenevaWorkflow<TestHero> {
  static failOn: string | null = 'c';
  @ResumableStep({ onException: 'reattempt' })
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over(ITEMS)) {
      if (item === FailingWalkWorkflow.failOn) {
        FailingWalkWorkflow.failOn = null;
        throw new Error(`failed on ${item}`);
      }
      seen.push(item);
    }
  }
}

@Workflow({ hero: () => TestHero })
export class SkipToWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep()
  async pages(iter: StepIteration<number>) {
    let page = iter.cursor ?? 1;
    for (; page <= 6; page++) {
      seen.push(page);
      if (page === 2) await iter.skipTo(5, { wait: '1h' });
      await iter.set(page + 1);
    }
  }
}
