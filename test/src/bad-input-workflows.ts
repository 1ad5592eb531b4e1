/**
 * Fixture workflows of the bad-input suite: a resumable step that hands a chosen cursor on to its
 * successor (which records the cursor it resumed with), and a step that fails with a chosen error,
 * so execution metadata carries its message.
 */
import { GenevaWorkflow, ResumableStep, Step, StepIteration, Workflow } from 'geneva-drive';
import { TestHero } from '../utils/fixtures.js';

export const cursorProbe: { value: unknown; resumedWith: unknown[] } = { value: null, resumedWith: [] };

@Workflow({ hero: () => TestHero })
export class CursorValueWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep({ onException: 'pause' })
  async walk(iter: StepIteration<unknown>) {
    if (!iter.resumed) await iter.skipTo(cursorProbe.value, { wait: '1h' });
    cursorProbe.resumedWith.push(iter.cursor);
  }
}

export const failureProbe: { error: unknown } = { error: null };

@Workflow({ hero: () => TestHero })
export class FailingWithMessageWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ onException: 'pause' })
  async fail() {
    throw failureProbe.error;
  }
}
