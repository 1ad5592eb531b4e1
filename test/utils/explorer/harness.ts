/**
 * Explores a scenario: a set-up that brings the database to the state under test, two or three
 * engine operations to interleave, and the checks to make afterwards. Every schedule starts from a
 * fresh set-up; after the operations, the jobs they left in the (manual) queue run to the end, then
 * the invariants (invariants.ts) and the scenario's own checks are read from the database.
 *
 * A failure names the scenario, the database and the schedule, and prints the run statement by
 * statement; `GD_EXPLORE_REPLAY='<schedule>'` (with `GD_EXPLORE_SCENARIO='<name>'`) runs that schedule
 * alone.
 */
import type { StepJob } from 'geneva-drive';
import { ExecutorService, HousekeepingService, QUEUE_PORT, type ExecuteOptions, type QueuePort } from 'geneva-drive';
import { isDeadlineJob } from '../../../libs/geneva-drive/src/queue/deadline-job.js';
import { TestEffect } from '../../src/transactional-workflows.js';
import { createTestApp, informationLine, type TestApp } from '../../src/test-app.js';
import type { DatabaseKind } from '../databases.js';
import { checkInvariants } from './invariants.js';
import { DepthFirst, formatChoices, formatTrace, parseChoices, ScheduleExplorer, seededChooser, type Chooser, type Operation, type Run } from './schedule-explorer.js';

export interface Scenario<Context> {
  name: string;
  /** Connection faults a schedule may inject (at most). @default 0 */
  faults?: number;
  /**
   * The hero may change after a signal was delivered, outside any delivery to the step: a matcher
   * that rejected the signal then is not asked again (by design), so the lost-event invariant does
   * not apply and the scenario's own check says what must hold.
   */
  heroChangesAfterDelivery?: boolean;
  /**
   * A lost answer may leave a due step with no job, for the stuck-scheduled sweep: `start()`'s
   * (CommitOutcomeUnknownError; the new workflow's id is in the lost answer). Checked after the sweep.
   */
  lostAnswerLeavesStepToSweep?: boolean;
  /**
   * Two operations lock the same rows in opposite orders: the database picks the deadlock victim
   * (PostgreSQL: whichever session's deadlock_timeout runs out first), so a schedule's prefix may not
   * meet the same choices again and the depth-first enumeration cannot replay it; seeded samples only.
   */
  deadlocks?: boolean;
  /** Brings a fresh database to the state under test (statements run freely). */
  setup(h: ExplorerHarness): Promise<Context>;
  operations(h: ExplorerHarness, context: Context): Operation[];
  /** The scenario's own checks, after the invariants: violations as sentences. */
  check?(h: ExplorerHarness, context: Context, run: Run): Promise<string[]>;
}

/** How many schedules: every one up to `exhaustive`, else `samples` seeded random ones. */
export interface Budget {
  exhaustive: number;
  samples: number;
  seed: number;
}

/**
 * GD_PROOF_SCALE=full (`npm run test:proofs`) enumerates every schedule of a scenario, or, when there
 * are more than 300, runs 500 seeded random ones besides; `npm test` runs a bounded seeded sample
 * (GD_EXPLORE_SAMPLES): 16 on PostgreSQL, 10 on MySQL/MariaDB, whose lock waits are read at most
 * every 110 ms (InnoDB's transaction table), so that the whole exploration stays within about three
 * minutes of the test run.
 */
export function explorationBudget(seed: number, kind: DatabaseKind): Budget {
  if (process.env.GD_PROOF_SCALE === 'full') return { exhaustive: 300, samples: 500, seed };
  return { exhaustive: 0, samples: Number(process.env.GD_EXPLORE_SAMPLES ?? (kind === 'mysql' ? 10 : 16)), seed };
}

export class ExplorerHarness {
  private taken = 0;

  private readonly jobWaiters: Array<(job: StepJob) => void> = [];
  /** What the spec keeps beside the database (its records of body runs), forgotten before each run. */
  onReset: () => void = () => undefined;

  private constructor(
    readonly app: TestApp,
    readonly explorer: ScheduleExplorer,
  ) {
    const queue = this.get(QUEUE_PORT as never) as QueuePort;
    const enqueue = queue.enqueue.bind(queue);
    queue.enqueue = async (job: StepJob) => {
      const added = await enqueue(job);
      for (const waiter of this.jobWaiters.splice(0)) waiter(job);
      return added;
    };
  }

  /** The next job enqueued (inside an operation: waited for without counting as running). */
  nextJob(): Promise<StepJob> {
    return this.explorer.idle(new Promise((resolve) => this.jobWaiters.push(resolve)));
  }

  static async create(kind: DatabaseKind, providers: Function[], options: Parameters<typeof createTestApp>[2] = {}): Promise<ExplorerHarness> {
    // A chain's time budget would make the statements a schedule meets depend on the machine's
    // speed: only its step count bounds it here.
    const app = await createTestApp(kind, providers as never, {
      stuckInProgressThreshold: '1ms',
      stuckScheduledThreshold: '1ms',
      chainSteps: { maxSteps: 10, maxDuration: '1h' },
      ...options,
      // The effect rows of transactional steps (test/src/transactional-workflows.ts).
      entities: [TestEffect, ...(options.entities ?? [])],
    });
    return new ExplorerHarness(app, await ScheduleExplorer.attach(app.dataSource));
  }

  get<T>(token: abstract new (...args: never[]) => T): T {
    return this.app.moduleRef.get(token as never, { strict: false });
  }

  async close(): Promise<void> {
    await this.explorer.close();
    await this.app.close();
  }

  /** The jobs enqueued since the last call (deadline jobs included). */
  newJobs(): StepJob[] {
    const jobs = this.app.gd.enqueuedJobs.slice(this.taken);
    this.taken = this.app.gd.enqueuedJobs.length;
    return jobs;
  }

  /**
   * Runs a step job as a queue worker would (chaining on). Inside an operation its statements are
   * scheduled: the executor's own async scope, which would leave the operation's, is skipped here.
   */
  runJob(job: StepJob, options: ExecuteOptions = {}): Promise<void> {
    const executor = this.get(ExecutorService) as unknown as { executeJob(id: string, o: ExecuteOptions): Promise<void> };
    return executor.executeJob(job.executionId, { jobId: job.jobId ?? job.executionId, hints: job.hints, chain: true, ...options });
  }

  /** Runs every step job in the queue, and those they enqueue, until none is left; what they threw. */
  async drain(): Promise<string[]> {
    const thrown: string[] = [];
    for (let round = 0; round < 100; round++) {
      const jobs = this.newJobs().filter((job) => !isDeadlineJob(job.jobId));
      if (jobs.length === 0) return thrown;
      for (const job of jobs) await this.runJob(job).catch((error: unknown) => thrown.push(`the queued job ${job.jobId ?? job.executionId} threw ${String(error)}`));
    }
    throw new Error('The queue never ran dry: 100 rounds of jobs');
  }

  /** Explores `scenario` within `budget`; throws on the first schedule that breaks something. */
  async explore<Context>(scenario: Scenario<Context>, budget: Budget): Promise<{ runs: number; exhaustive: boolean }> {
    const replay = process.env.GD_EXPLORE_REPLAY;
    if (replay !== undefined) {
      if (process.env.GD_EXPLORE_SCENARIO !== scenario.name) return { runs: 0, exhaustive: false };
      await this.once(scenario, seededChooser(budget.seed, parseChoices(replay)), `replayed schedule`);
      return { runs: 1, exhaustive: false };
    }
    let runs = 0;
    if (!scenario.faults && !scenario.deadlocks) {
      const dfs = new DepthFirst();
      while (runs < budget.exhaustive) {
        runs++;
        await this.once(scenario, dfs.chooser(), `schedule ${runs} of the depth-first enumeration`);
        if (!dfs.advance()) {
          informationLine(`${scenario.name}: all ${runs} schedules explored`);
          return { runs, exhaustive: true };
        }
      }
    }
    for (let sample = 0; sample < budget.samples; sample++) {
      runs++;
      await this.once(scenario, seededChooser(budget.seed + sample), `seed ${budget.seed + sample}`);
    }
    informationLine(`${scenario.name}: ${runs} schedules explored (sampled)`);
    return { runs, exhaustive: false };
  }

  /** Runs `scenario` once under `choose`: what happened, and the violations found afterwards. */
  async runOnce<Context>(scenario: Scenario<Context>, choose: Chooser): Promise<{ run: Run; context: Context; violations: string[] }> {
    await this.app.reset();
    this.onReset();
    this.taken = this.app.gd.enqueuedJobs.length;
    const context = await scenario.setup(this);
    this.newJobs();
    const run = await this.explorer.run(scenario.operations(this, context), choose, scenario.faults ?? 0);
    const thrown = await this.drain();
    const lostEvents = !scenario.heroChangesAfterDelivery;
    const lostAnswer = run.choices.some((choice) => choice.fault === 'lose-answer');
    const violations = new Set(
      await checkInvariants(this.app.moduleRef, this.app.dataSource, { lostEvents, stranded: !lostAnswer, unsent: !(lostAnswer && scenario.lostAnswerLeavesStepToSweep) }),
    );
    if (lostAnswer) {
      // A step whose start committed while its answer was lost is left in progress, unrun, for
      // stuck-in-progress recovery: the engine's documented bound, applied here before looking again.
      await this.get(HousekeepingService).run();
      thrown.push(...(await this.drain()));
      for (const violation of await checkInvariants(this.app.moduleRef, this.app.dataSource, { lostEvents, stranded: true, unsent: true })) violations.add(violation);
    }
    for (const violation of [...thrown, ...((await scenario.check?.(this, context, run)) ?? [])]) violations.add(violation);
    return { run, context, violations: [...violations] };
  }

  /** The run, and its violations in a message that names the schedule and prints it statement by statement. */
  report(scenario: { name: string }, label: string, run: Run, violations: string[]): string {
    const outcomes = Object.entries(run.outcomes).map(([op, outcome]) => `  ${op}: ${outcome.error !== undefined ? `threw ${String(outcome.error)}` : 'returned'}`);
    return (
      `${scenario.name} [${this.explorer.kind}], ${label}: ${violations.length} violation(s)\n` +
      violations.map((violation) => `  - ${violation}`).join('\n') +
      `\nreplay: GD_EXPLORE_SCENARIO='${scenario.name}' GD_EXPLORE_REPLAY='${formatChoices(run.choices)}'\n` +
      `operations:\n${outcomes.join('\n')}\n${formatTrace(run.trace)}`
    );
  }

  private async once<Context>(scenario: Scenario<Context>, choose: Chooser, label: string): Promise<Run> {
    const { run, violations } = await this.runOnce(scenario, choose);
    if (violations.length > 0) throw new Error(this.report(scenario, label, run, violations));
    return run;
  }
}
