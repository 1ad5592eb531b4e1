/**
 * Fixture workflows for the queue specs that run in the jest process (Bull on Redis, the local
 * adapter). Bodies append what ran (workflow id, step, and the application's label when it has one)
 * to `queueJournal`, which the specs reset in beforeEach.
 */
import { Inject, Optional } from '@nestjs/common';
import { GenevaWorkflow, Step, Workflow } from 'geneva-drive';
import { TestHero } from '../utils/fixtures.js';

export interface JournalEntry {
  label: string | undefined;
  workflowId: string;
  step: string;
}

export const queueJournal: JournalEntry[] = [];

/** Optional provider naming the application a body ran in (the restart spec boots two). */
export const APP_LABEL = 'queue-fixtures:app-label';

/** The steps one workflow ran, in order. */
export function journalOf(workflowId: string): string[] {
  return queueJournal.filter((entry) => entry.workflowId === workflowId).map((entry) => entry.step);
}

abstract class JournalingWorkflow extends GenevaWorkflow<TestHero> {
  constructor(@Optional() @Inject(APP_LABEL) private readonly label?: string) {
    super();
  }

  protected note(step: string): void {
    queueJournal.push({ label: this.label, workflowId: this.record.id, step });
  }
}

/** Three steps, the second after a short wait. */
@Workflow({ hero: () => TestHero })
export class QueueThreeStepWorkflow extends JournalingWorkflow {
  @Step()
  async stepOne() {
    this.note('one');
  }

  @Step({ wait: '300ms' })
  async stepTwo() {
    this.note('two');
  }

  @Step()
  async stepThree() {
    this.note('three');
  }
}

export class QueueStepError extends Error {
  override name = 'QueueStepError';
}

/** The first step always throws (default policy: pause); the second must never run. */
@Workflow({ hero: () => TestHero })
export class QueueFailingWorkflow extends JournalingWorkflow {
  // Always a job of the queue, never started where it was enqueued: the Bull spec watches its attempts.
  @Step({ jobOptions: { chain: false } })
  async explode() {
    this.note('explode');
    throw new QueueStepError(`boom in workflow ${this.record.id}`);
  }

  @Step()
  async neverReached() {
    this.note('neverReached');
  }
}

/** The first step is delayed a little: long enough to pause the workflow before it is due. */
@Workflow({ hero: () => TestHero })
export class QueueDelayedWorkflow extends JournalingWorkflow {
  @Step({ wait: '600ms' })
  async delayed() {
    this.note('delayed');
  }

  @Step()
  async last() {
    this.note('last');
  }
}

/** The first step is due in an hour: its job sits in the queue as a delayed job. */
@Workflow({ hero: () => TestHero })
export class QueueParkedWorkflow extends JournalingWorkflow {
  @Step({ wait: '1h' })
  async later() {
    this.note('later');
  }
}

/** The first step waits 1.5 s: time to shut the application down before it fires. */
@Workflow({ hero: () => TestHero })
export class QueueRestartWorkflow extends JournalingWorkflow {
  @Step({ wait: '1500ms' })
  async afterRestart() {
    this.note('afterRestart');
  }

  @Step()
  async last() {
    this.note('last');
  }
}

/** Parks at its second step until a `go` signal wakes it. */
@Workflow({ hero: () => TestHero })
export class QueueSignalWorkflow extends JournalingWorkflow {
  @Step()
  async first() {
    this.note('first');
  }

  @Step({ waitFor: 'go' })
  async awaitGo() {
    this.note('awaitGo');
  }
}

/** The first step takes 600 ms: time to close the application while it runs; the next is due in an hour. */
@Workflow({ hero: () => TestHero })
export class QueueSlowWorkflow extends JournalingWorkflow {
  @Step()
  async slow() {
    this.note('slow:start');
    await new Promise((resolve) => setTimeout(resolve, 600));
    this.note('slow:end');
  }

  @Step({ wait: '1h' })
  async later() {
    this.note('later');
  }
}

/**
 * Holds its one step, while `holdSteps(true)`, until the test releases it (`releaseHeldSteps`): a
 * burst that keeps every slot busy.
 */
let holding = false;
let release = (): void => undefined;
let heldSteps = new Promise<void>((resolve) => (release = resolve));
export function releaseHeldSteps(): void {
  release();
  heldSteps = new Promise<void>((resolve) => (release = resolve));
}
export function holdSteps(on: boolean): void {
  holding = on;
  if (!on) releaseHeldSteps();
}

@Workflow({ hero: () => TestHero })
export class QueueHeldWorkflow extends JournalingWorkflow {
  @Step()
  async held() {
    this.note('held:start');
    if (holding) await heldSteps;
  }
}

export const QUEUE_WORKFLOWS = [QueueThreeStepWorkflow, QueueFailingWorkflow, QueueDelayedWorkflow, QueueParkedWorkflow, QueueRestartWorkflow, QueueSignalWorkflow, QueueHeldWorkflow];
