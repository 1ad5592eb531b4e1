/**
 * The workflows of the dead-worker takeover spec (test/e2e/dead-worker-takeover.e2e-spec.ts), loaded
 * by jest and by the compiled victim process (test/src/takeover-process.ts), so the library is
 * imported by relative path. In the victim (GD_TAKEOVER_VICTIM=1) the bodies stop at known points
 * and never return; anywhere else they return at once.
 *
 * TakeoverChainWorkflow: `first` comes from Redis and `hold` is chained inline after it. In the
 * victim, `hold` starts a TakeoverRunningWorkflow, whose step the process starts itself (its second
 * slot is free) and which holds that slot, then a TakeoverHeldWorkflow, whose step the process
 * takes too and keeps waiting for a slot (DueJobStarter) — never reaching phase 1 — and reports.
 */
import { Inject } from '@nestjs/common';
import { GenevaWorkflow, QUEUE_PORT, Step, Workflow, WorkflowService, type QueuePort } from '../../libs/geneva-drive/src/index.js';
import { TestHero } from '../utils/fixtures.js';

export type TakeoverVictimMessage =
  | { type: 'ready' }
  | { type: 'holding'; chain: string; running: string; held: string };

const victim = () => process.env.GD_TAKEOVER_VICTIM === '1';
const forever = () => new Promise<never>(() => undefined);

let runningStarted: () => void = () => undefined;
const running = new Promise<void>((resolve) => (runningStarted = resolve));

@Workflow({ hero: () => TestHero })
export class TakeoverRunningWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async block() {
    if (!victim()) return;
    runningStarted();
    await forever();
  }

  @Step()
  async after() {}
}

@Workflow({ hero: () => TestHero })
export class TakeoverHeldWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async only() {}
}

@Workflow({ hero: () => TestHero })
export class TakeoverChainWorkflow extends GenevaWorkflow<TestHero> {
  constructor(
    private readonly workflows: WorkflowService,
    @Inject(QUEUE_PORT) private readonly queue: QueuePort,
  ) {
    super();
  }

  @Step()
  async first() {}

  @Step()
  async hold() {
    if (!victim()) return;
    const runningWorkflow = await this.workflows.start(TakeoverRunningWorkflow, this.hero);
    await running;
    const held = await this.workflows.start(TakeoverHeldWorkflow, this.hero);
    // Its enqueue runs right after the commit (both slots busy: it waits here for one); the ping,
    // on the connection the process's run ledger writes on, returns once what went before is in Redis.
    await new Promise((resolve) => setImmediate(resolve));
    await this.queue.ping?.();
    process.send?.({ type: 'holding', chain: this.record.id, running: runningWorkflow.id, held: held.id } satisfies TakeoverVictimMessage);
    await forever();
  }
}

/** `later` waits an hour: its job is a delayed one, which a spec can take away as if lost with a dead worker. */
@Workflow({ hero: () => TestHero })
export class TakeoverLaterWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async first() {}

  @Step({ wait: '1h' })
  async later() {}
}

/** `awaited`, chained after `first`, parks with a deadline an hour on: its deadline job is a delayed one. */
@Workflow({ hero: () => TestHero })
export class TakeoverParkedWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async first() {}

  @Step({ waitFor: 'go', timeout: '1h' })
  async awaited() {}
}

export const TAKEOVER_WORKFLOWS = [TakeoverChainWorkflow, TakeoverRunningWorkflow, TakeoverHeldWorkflow, TakeoverLaterWorkflow, TakeoverParkedWorkflow];

/**
 * Short locks, as a deployment may choose them: a dead process's jobs (Bull's lock) and in-process
 * runs (the run ledger's lease, as long as a lock) come back within seconds.
 */
export const TAKEOVER_LOCKS = {
  bull: { settings: { lockDuration: 2_000, lockRenewTime: 500, stalledInterval: 1_000 } },
  bullmq: { worker: { lockDuration: 2_000, stalledInterval: 1_000 } },
};
