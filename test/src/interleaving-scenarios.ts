/**
 * The scenarios of the schedule explorer (test/utils/explorer): pairs of engine operations that meet
 * on one workflow, each with the state it starts from and the rule it must keep besides the
 * invariants. The interleavings proof explores them; the defect specs pin single schedules of them.
 */
import { CHILD_FINISHED, CommitOutcomeUnknownError, HousekeepingService, Signal, SignalService, StepExecution, WorkflowService, type StepJob, type WorkflowRecord } from 'geneva-drive';
import type { Run } from '../utils/explorer/schedule-explorer.js';
import { WaitDeadline } from '../../libs/geneva-drive/src/execution/wait-deadline.js';
import { deadlineJobId } from '../../libs/geneva-drive/src/queue/deadline-job.js';
import type { ExplorerHarness, Scenario } from '../utils/explorer/harness.js';
import { TestHero } from '../utils/fixtures.js';
import {
  bodyRuns,
  DeadlineWorkflow,
  FAN_OUT,
  FanParentWorkflow,
  GatedWorkflow,
  NameGatedWorkflow,
  HeroMatchedWorkflow,
  KeyedLastWorkflow,
  KeyedWorkflow,
  RatedWorkflow,
  keyedProbe,
  keyOfHero,
  LedgerFanParentWorkflow,
  LedgerGatedWorkflow,
  LedgerWaitingWorkflow,
  PlainWorkflow,
} from './interleaving-workflows.js';
import { ensureEffectTable, TestEffect } from './transactional-workflows.js';

export interface Parked {
  workflow: WorkflowRecord;
  hero: TestHero;
  job?: StepJob;
}

const signals = (h: ExplorerHarness) => h.get(SignalService);
const workflows = (h: ExplorerHarness) => h.get(WorkflowService);

async function hero(h: ExplorerHarness, values: Partial<TestHero> = {}): Promise<TestHero> {
  return h.app.dataSource.getRepository(TestHero).save({ name: 'order', active: true, canceled: false, ...values });
}

/** Starts `workflowClass` and runs its first step `a` without chaining: `b`'s job is left in the queue. */
async function atStepB(h: ExplorerHarness, workflowClass: Function, heroValues: Partial<TestHero> = {}): Promise<Parked> {
  const order = await hero(h, heroValues);
  const workflow = await workflows(h).start(workflowClass as never, order);
  const [first] = h.newJobs();
  await h.runJob(first, { chain: false });
  const [job] = h.newJobs();
  return { workflow, hero: order, job };
}

/** Brings the workflow to `b` parked (waiting for `go`). */
async function parkedAtB(h: ExplorerHarness, workflowClass: Function = GatedWorkflow): Promise<Parked> {
  const at = await atStepB(h, workflowClass);
  await h.runJob(at.job!, { chain: false });
  h.newJobs();
  return { workflow: at.workflow, hero: at.hero };
}

/** The body runs of this workflow's step. */
function runsOf(workflow: WorkflowRecord, step: string) {
  return bodyRuns.filter((run) => run.workflowId === workflow.id && run.step === step);
}

/** The step ran once; a `waitFor` step (`b`) with its signal in hand, unless its deadline passed. */
function bodyRanOnce(workflow: WorkflowRecord, step: string): string[] {
  const runs = runsOf(workflow, step);
  if (runs.length !== 1) return [`step ${step} of workflow ${workflow.id} ran ${runs.length} times, not once`];
  const waited = step === 'b' && workflow.type !== DeadlineWorkflow.name;
  return waited && runs[0].signalId === null ? [`step ${step} of workflow ${workflow.id} ran without the signal it waited for`] : [];
}

/**
 * The step ran at least once, and once more only for each of its executions a takeover recovered: a
 * run taken over while it ran the step (chained into it after the step it was taken over for) runs it again.
 */
async function ranOncePerRecovery(h: ExplorerHarness, workflow: WorkflowRecord, step: string): Promise<string[]> {
  const runs = runsOf(workflow, step).length;
  const recovered = (await workflows(h).executionHistory(workflow.id)).filter((execution) => execution.stepName === step && execution.outcome === 'recovered').length;
  return runs >= 1 && runs <= 1 + recovered ? [] : [`step ${step} of workflow ${workflow.id} ran ${runs} times, with ${recovered} of its executions recovered`];
}

async function finalState(h: ExplorerHarness, workflow: WorkflowRecord, expected: string[]): Promise<string[]> {
  const { state } = await workflows(h).find(workflow.id);
  return expected.includes(state) ? [] : [`workflow ${workflow.id} ended ${state}, not ${expected.join(' or ')}`];
}

/** Two KeyedWorkflows whose heroes share a name, hence the key of step `a`; their first jobs, in start order. */
interface Keyed {
  workflows: WorkflowRecord[];
  jobs: StepJob[];
  key: string;
}

async function keyedPair(h: ExplorerHarness, workflowClass: typeof KeyedWorkflow | typeof KeyedLastWorkflow = KeyedWorkflow): Promise<Keyed> {
  keyedProbe.dataSource = h.app.dataSource;
  const list: WorkflowRecord[] = [];
  for (let i = 0; i < 2; i++) list.push(await workflows(h).start(workflowClass, await hero(h, { name: 'account' })));
  const jobs = h.newJobs();
  const ordered = list.map((workflow) => jobs.find((job) => job.hints?.workflowId === workflow.id)!);
  return { workflows: list, jobs: ordered, key: keyOfHero({ name: 'account' } as TestHero) };
}

/**
 * The key's rules, once the queue ran dry: both workflows finished, each keyed body ran once and saw
 * only itself holding the key, and the key's row counts no holder and no waiter.
 */
async function slotsHold(h: ExplorerHarness, at: Keyed, recovered = false): Promise<string[]> {
  const violations: string[] = [];
  for (const workflow of at.workflows) {
    violations.push(...(await finalState(h, workflow, ['finished'])));
    if (workflow.type !== KeyedLastWorkflow.name) violations.push(...(recovered ? await ranOncePerRecovery(h, workflow, 'c') : bodyRanOnce(workflow, 'c')));
    // A run recovered while its body ran (its worker looked dead) runs again: at least once.
    if (!recovered) violations.push(...bodyRanOnce(workflow, 'a'));
    else if (runsOf(workflow, 'a').length === 0) violations.push(`step a of workflow ${workflow.id} never ran`);
    for (const run of runsOf(workflow, 'a')) if (run.holders !== 1) violations.push(`step a of workflow ${workflow.id} ran with ${run.holders} executions holding its key`);
  }
  // As the rows record it (limit 1): no execution's [started_at, finished_at) begins before the
  // last one's ends. A start is stamped once its slot is taken, an end before its slot is freed.
  const executions = (await Promise.all(at.workflows.map((workflow) => workflows(h).executionHistory(workflow.id))))
    .flat()
    .filter((execution) => execution.flowKey === at.key && execution.startedAt !== null)
    .sort((x, y) => x.startedAt!.getTime() - y.startedAt!.getTime());
  for (const [index, execution] of executions.entries()) {
    const previous = executions[index - 1];
    if (previous && (previous.finishedAt === null || previous.finishedAt > execution.startedAt!)) {
      violations.push(`execution ${execution.id} is recorded started at ${execution.startedAt!.toISOString()}, before ${previous.id}, holding the key, ended (${previous.finishedAt?.toISOString()})`);
    }
  }
  const p = h.app.dataSource.options.type === 'postgres' ? '$1' : '?';
  const [row] = await h.app.dataSource.query(`SELECT holding, waiters FROM geneva_drive_flow_keys WHERE flow_key = ${p}`, [at.key]);
  if (!row || Number(row.holding) !== 0 || String(row.waiters) !== '[]') violations.push(`the key's row is ${JSON.stringify(row)}, not free with no waiter`);
  return violations;
}

/**
 * Two RatedWorkflows on one key (one start an hour), their first jobs run at once: one starts, and
 * every other execution of `a` (the other workflow's; a recovered one's successor, after a start
 * whose answer was lost: a start counts once made) is scheduled for a later window, an hour or more
 * after that start, with its delayed job, whichever came first; the key's window holds that start
 * and the last promise. (A delayed job, run early by the drain, does nothing.)
 */
async function ratesHold(h: ExplorerHarness, at: Keyed): Promise<string[]> {
  const violations: string[] = [];
  const histories = await Promise.all(at.workflows.map((workflow) => workflows(h).executionHistory(workflow)));
  const started = histories.flat().filter((execution) => execution.stepName === 'a' && execution.startedAt !== null);
  const waiting = histories.flat().filter((execution) => execution.stepName === 'a' && execution.state === 'scheduled');
  if (started.length !== 1 || waiting.length < 1) return [`${started.length} executions of a started and ${waiting.length} wait, not one start and the rest waiting`];
  const start = started[0].startedAt!.getTime();
  const promised = waiting.map((execution) => execution.scheduledFor.getTime()).sort((x, y) => x - y);
  for (const execution of waiting) {
    const due = execution.scheduledFor.getTime();
    if (due < start + 3_600_000) violations.push(`execution ${execution.id} is scheduled for ${execution.scheduledFor.toISOString()}, within the hour after the start (${new Date(start).toISOString()})`);
    if (!h.app.gd.enqueuedJobs.some((job) => job.executionId === execution.id && job.jobId?.startsWith(`${execution.id}-rate-`) && job.runAt?.getTime() === due)) violations.push(`execution ${execution.id} has no delayed job for ${execution.scheduledFor.toISOString()}`);
  }
  for (const workflow of at.workflows) if (runsOf(workflow, 'a').length > 1) violations.push(`step a of workflow ${workflow.id} ran ${runsOf(workflow, 'a').length} times`);
  const p = h.app.dataSource.options.type === 'postgres' ? '$1' : '?';
  const [row] = await h.app.dataSource.query(`SELECT rate_window FROM geneva_drive_flow_keys WHERE flow_key = ${p}`, [at.key]);
  const window = row ? (JSON.parse(String(row.rate_window)) as { s: number[]; c: number[] }) : null;
  // Limit 1: the window keeps the latest start, and the latest claim, the last promise made.
  if (JSON.stringify(window) !== JSON.stringify({ s: [start], c: [promised[promised.length - 1]] })) violations.push(`the key's window is ${JSON.stringify(window)}`);
  return violations;
}

/** Starts LedgerGatedWorkflow and runs `a`: the transactional step `t`'s job is left in the queue. */
async function atTransactionalStep(h: ExplorerHarness): Promise<Parked> {
  await ensureEffectTable(h.app.dataSource);
  return atStepB(h, LedgerGatedWorkflow);
}

interface ParkedWithDeadline {
  workflow: WorkflowRecord;
  /** The job whose run parked b (its execution's). */
  job: StepJob;
}

/** Starts DeadlineWorkflow and runs b's job: b parks with its deadline an hour on, the deadline job left out of the queue. */
async function parkedWithDeadline(h: ExplorerHarness): Promise<ParkedWithDeadline> {
  const workflow = await workflows(h).start(DeadlineWorkflow, await hero(h));
  const [job] = h.newJobs();
  await h.runJob(job, { chain: false });
  h.newJobs();
  return { workflow, job };
}

/** What a worker does with the job of a run whose process died (StepJobGate's takeover): recovers the run's execution, whatever its age. */
function takeOver(h: ExplorerHarness, job: StepJob): Promise<void> {
  const housekeeping = h.get(HousekeepingService) as unknown as { takeOverRun(executionId: string, jobId: string): Promise<void> };
  return housekeeping.takeOverRun(job.executionId, job.jobId ?? job.executionId);
}

/** Exactly once: one effect row per completed execution of the transactional step `t`, no more, no fewer. */
async function effectsMatchCompletions(h: ExplorerHarness, workflow: WorkflowRecord): Promise<string[]> {
  const effects = await h.app.dataSource.getRepository(TestEffect).countBy({ workflowId: workflow.id });
  const completed = (await workflows(h).executionHistory(workflow.id)).filter((e) => e.stepName === 't' && e.outcome === 'success').length;
  return effects === completed ? [] : [`step t wrote ${effects} effect rows for ${completed} completed executions`];
}

/** The webhook of a payment: updates the order and signals its workflow, in one transaction. */
function webhook(h: ExplorerHarness, parked: Parked, change: Partial<TestHero>, key?: string) {
  return h.app.dataSource.transaction(async (manager) => {
    await manager.update(TestHero, { id: parked.hero.id }, change);
    await signals(h).signal(parked.workflow.id, 'go', { manager, ...(key ? { idempotencyKey: key } : {}) });
  });
}

/**
 * A parent of FanParentWorkflow (or LedgerFanParentWorkflow) after its fan-out: its first child
 * ended (unless `bothLive`), the other children's jobs and (unless parked) its fan-in job left in
 * the queue.
 */
interface FannedOut {
  workflow: WorkflowRecord;
  /** The children's ids, in id order. */
  children: string[];
  /** The jobs of the children's only step not run yet (the last child's last): each end delivers child_finished to the parent. */
  childJobs: StepJob[];
  /** The parent's fan-in job, when not parked already. */
  gateJob?: StepJob;
  /** Its children are LedgerLeafWorkflow (a transactional step). */
  ledger: boolean;
}

/** Runs the parent's fan-out and the first child (none with `bothLive`); `parked`: the parent's fan-in gate ran too, and parked. */
async function fannedOut(h: ExplorerHarness, parked: boolean, options: { ledger?: boolean; bothLive?: boolean } = {}): Promise<FannedOut> {
  if (options.ledger) await ensureEffectTable(h.app.dataSource);
  const workflow = await workflows(h).start(options.ledger ? LedgerFanParentWorkflow : FanParentWorkflow, await hero(h));
  const [first] = h.newJobs();
  await h.runJob(first, { chain: false });
  const owners = new Map<StepJob, string>();
  for (const job of h.newJobs()) owners.set(job, (await h.app.dataSource.getRepository(StepExecution).findOneByOrFail({ id: job.executionId })).workflowId);
  const jobs = [...owners.keys()];
  const gateJob = jobs.find((job) => owners.get(job) === workflow.id)!;
  const childJobs = jobs.filter((job) => job !== gateJob).sort((x, y) => owners.get(x)!.localeCompare(owners.get(y)!, undefined, { numeric: true }));
  if (!gateJob || childJobs.length !== FAN_OUT) throw new Error(`the fan-out left ${jobs.length} jobs, not the gate's and ${FAN_OUT} children's`);
  if (!options.bothLive) {
    await h.runJob(childJobs[0]);
    h.newJobs();
  }
  if (parked) {
    await h.runJob(gateJob, { chain: false });
    h.newJobs();
    const gate = await workflows(h).currentExecution(workflow.id);
    if (gate?.state !== 'waiting') throw new Error(`the fan-in gate is ${gate?.state}, not parked`);
  }
  return { workflow, children: childJobs.map((job) => owners.get(job)!), childJobs: options.bothLive ? childJobs : childJobs.slice(1), ...(parked ? {} : { gateJob }), ledger: options.ledger === true };
}

/**
 * What must hold of a parent and its children whatever the order: the fan-in body ran at most once,
 * with every child ended; each child's end delivered one child_finished, or none when the parent's
 * cancel canceled it (its cascade tells the canceling parent nothing); no child ongoing under a
 * canceled parent; the parent in one of `states`; no operation threw but a COMMIT whose answer was
 * lost (a deadlock the runner retried is no error; one it let through is).
 */
async function familyHolds(h: ExplorerHarness, at: FannedOut, run: Run, states: string[]): Promise<string[]> {
  const violations: string[] = [];
  const fanIns = runsOf(at.workflow, 'fanIn');
  if (fanIns.length > 1) violations.push(`the fan-in body ran ${fanIns.length} times`);
  for (const fanIn of fanIns) {
    const ended = (fanIn.children ?? []).filter((child) => child.state === 'finished' || child.state === 'canceled');
    if (ended.length !== FAN_OUT) violations.push(`the fan-in body ran with ${ended.length} of ${FAN_OUT} children ended: ${JSON.stringify(fanIn.children)}`);
  }
  const parent = await workflows(h).find(at.workflow.id);
  if (!states.includes(parent.state)) violations.push(`the parent ended ${parent.state}, not ${states.join(' or ')}`);
  const delivered = await h.app.dataSource.getRepository(Signal).findBy({ workflowId: at.workflow.id, name: CHILD_FINISHED });
  for (const id of at.children) {
    const child = await workflows(h).find(id);
    const rows = delivered.filter((signal) => signal.idempotencyKey === id).length;
    const byCascade = parent.state === 'canceled' && child.state === 'canceled';
    // A child whose run waited for housekeeping (a lost answer) may end after its parent: told nothing.
    const afterParent = parent.finishedAt !== null && child.finishedAt !== null && child.finishedAt >= parent.finishedAt;
    if (child.state !== 'finished' && child.state !== 'canceled') violations.push(`child ${id} is ${child.state}, not ended`);
    if (rows > 1 || (rows === 0 && !byCascade && !afterParent) || (rows === 1 && byCascade)) violations.push(`child ${id} ended ${child.state} and its parent (${parent.state}) holds ${rows} child_finished signals for it, not ${byCascade ? 0 : 1}`);
  }
  // A transactional leaf: one effect row per completed run of its step, whoever won its lock waits.
  if (at.ledger) for (const id of at.children) violations.push(...(await effectsMatchCompletions(h, { id } as WorkflowRecord)));
  for (const [op, outcome] of Object.entries(run.outcomes)) {
    if (outcome.error !== undefined && !(outcome.error instanceof CommitOutcomeUnknownError)) violations.push(`${op} threw ${String(outcome.error)}`);
  }
  return violations;
}

export const SCENARIOS: Array<Scenario<any>> = [
  {
    name: 'signal with a hero write × the waitFor gate, cancelIf on the hero',
    setup: (h) => atStepB(h, GatedWorkflow),
    operations: (h, at: Parked) => [
      { name: 'webhook', run: () => webhook(h, at, { canceled: true }) },
      { name: 'job', run: () => h.runJob(at.job!) },
    ],
    // The cancellation commits with the signal: a gate that passed with the signal saw the order canceled.
    check: async (h, at: Parked) => [
      ...(runsOf(at.workflow, 'b').length === 0 ? [] : [`step b ran on order ${at.hero.id}, canceled in the commit that delivered its signal`]),
      ...(await finalState(h, at.workflow, ['canceled'])),
    ],
  },
  {
    name: 'signal with a hero write × the waitFor gate, matcher on the hero',
    setup: (h) => atStepB(h, HeroMatchedWorkflow, { active: false }),
    operations: (h, at: Parked) => [
      { name: 'webhook', run: () => webhook(h, at, { active: true }) },
      { name: 'job', run: () => h.runJob(at.job!) },
    ],
    check: async (h, at: Parked) => [...bodyRanOnce(at.workflow, 'b'), ...(await finalState(h, at.workflow, ['finished']))],
  },
  {
    // The webhook takes the workflow lock (its signal is for nobody) in the transaction that makes
    // the order match: signalHero's matcher, deciding once it has the lock, must see the order so.
    name: 'signalHero × a hero write under the workflow lock',
    heroChangesAfterDelivery: true,
    setup: async (h) => {
      const at = await atStepB(h, HeroMatchedWorkflow, { active: false });
      await h.runJob(at.job!, { chain: false });
      h.newJobs();
      return at;
    },
    operations: (h, at: Parked) => [
      {
        name: 'webhook',
        run: () =>
          h.app.dataSource.transaction(async (manager) => {
            await manager.update(TestHero, { id: at.hero.id }, { active: true });
            await signals(h).signal(at.workflow.id, 'note', { manager, allowUnknownName: true });
          }),
      },
      { name: 'signalHero', run: () => signals(h).signalHero(HeroMatchedWorkflow, at.hero, 'go') },
    ],
    // Delivered after the webhook's commit, the signal must find the order matching and wake b;
    // delivered before, it is buffered (a later change of the order does not deliver it again).
    check: async (h, at: Parked, run) => {
      const committed = run.trace.findIndex((line) => line.op === 'webhook' && /^\s*COMMIT/i.test(line.sql));
      const matched = run.trace.findIndex((line) => line.op === 'signalHero' && /test_heroes/.test(line.sql));
      if (committed === -1 || matched === -1 || matched < committed) return [];
      return [...bodyRanOnce(at.workflow, 'b'), ...(await finalState(h, at.workflow, ['finished']))];
    },
  },
  {
    name: 'signal × the waitFor gate',
    setup: (h) => atStepB(h, GatedWorkflow),
    operations: (h, at: Parked) => [
      { name: 'signal', run: () => signals(h).signal(at.workflow.id, 'go') },
      { name: 'job', run: () => h.runJob(at.job!) },
    ],
    check: async (h, at: Parked) => [...bodyRanOnce(at.workflow, 'b'), ...(await finalState(h, at.workflow, ['finished']))],
  },
  {
    name: 'signal × a chained finalize and prepare',
    setup: async (h) => {
      const workflow = await workflows(h).start(GatedWorkflow, await hero(h));
      const [job] = h.newJobs();
      return { workflow, job };
    },
    operations: (h, at: Parked) => [
      { name: 'signal', run: () => signals(h).signal(at.workflow.id, 'go') },
      { name: 'job', run: () => h.runJob(at.job!) },
    ],
    check: async (h, at: Parked) => [...bodyRanOnce(at.workflow, 'b'), ...(await finalState(h, at.workflow, ['finished']))],
  },
  {
    name: 'signal × a finalize starting a name-only gate in its message',
    setup: async (h) => {
      const workflow = await workflows(h).start(NameGatedWorkflow, await hero(h));
      const [job] = h.newJobs();
      return { workflow, job };
    },
    operations: (h, at: Parked) => [
      { name: 'signal', run: () => signals(h).signal(at.workflow.id, 'go') },
      { name: 'job', run: () => h.runJob(at.job!) },
    ],
    check: async (h, at: Parked, run) => [
      // A signal never moves the rows a's outcome is guarded on: unless a fault cut it, the job starts b in that outcome's message (PostgreSQL).
      ...(h.app.dataSource.options.type !== 'postgres' || run.trace.some((line) => line.fault) || run.trace.some((line) => line.op === 'job' && /^WITH l AS \(.*; WITH h AS \(.*\), d AS \(SELECT /s.test(line.sql)) ? [] : ['the job did not start b in the message of a’s outcome']),
      ...bodyRanOnce(at.workflow, 'b'),
      ...bodyRanOnce(at.workflow, 'c'),
      ...(await finalState(h, at.workflow, ['finished'])),
    ],
  },
  ...(['pause', 'cancel'] as const).map(
    (action): Scenario<Parked> => ({
      name: `${action} × a finalize starting a name-only gate in its message, its signal buffered`,
      setup: async (h) => {
        const owner = await hero(h);
        const workflow = await workflows(h).start(NameGatedWorkflow, owner, { signals: [{ name: 'go' }] });
        const [job] = h.newJobs();
        return { workflow, job, hero: owner };
      },
      operations: (h, at) => [
        { name: action, run: () => workflows(h)[action](at.workflow.id) },
        { name: 'job', run: () => h.runJob(at.job!) },
      ],
      check: async (h, at) => {
        const b = runsOf(at.workflow, 'b');
        return [
          ...(b.length > 1 ? [`step b ran ${b.length} times`] : []),
          ...(b.some((run) => run.signalId === null) ? ['step b ran without its signal'] : []),
          ...(await finalState(h, at.workflow, action === 'pause' ? ['paused', 'finished'] : ['canceled', 'finished'])),
        ];
      },
    }),
  ),
  {
    // Taken over while a runs: a's outcome, refused, starts nothing, and no run is left going (the
    // step the takeover scheduled is its own job's, left in the queue).
    name: 'a finalize starting the next step in its message × a takeover of its run',
    setup: async (h) => {
      const owner = await hero(h);
      const workflow = await workflows(h).start(NameGatedWorkflow, owner, { signals: [{ name: 'go' }] });
      const [job] = h.newJobs();
      return { workflow, job, hero: owner };
    },
    operations: (h, at: Parked) => [
      { name: 'job', run: () => h.runJob(at.job!) },
      { name: 'takeover', run: () => takeOver(h, at.job!) },
    ],
    check: async (h, at: Parked) => {
      const started = (await workflows(h).executionHistory(at.workflow.id)).filter((execution) => execution.state === 'in_progress');
      return [...started.map((execution) => `step ${execution.stepName} of workflow ${at.workflow.id} is in_progress with no run`), ...(await ranOncePerRecovery(h, at.workflow, 'b'))];
    },
  },
  ...(['pause', 'skip', 'cancel'] as const).map(
    (action): Scenario<Parked> => ({
      name: `signal × ${action}`,
      setup: (h) => parkedAtB(h),
      operations: (h, at) => [
        { name: 'signal', run: () => signals(h).signal(at.workflow.id, 'go') },
        { name: action, run: () => workflows(h)[action](at.workflow.id) },
      ],
      check: async (h, at) => {
        const b = runsOf(at.workflow, 'b').length;
        return [
          ...(b > 1 ? [`step b ran ${b} times`] : []),
          ...(action === 'skip' && b > 0 ? ['step b ran although it was skipped'] : []),
          ...(await finalState(h, at.workflow, { pause: ['paused', 'finished'], skip: ['finished'], cancel: ['canceled', 'finished'] }[action])),
        ];
      },
    }),
  ),
  {
    name: 'signal × resume',
    setup: async (h) => {
      const parked = await parkedAtB(h);
      await workflows(h).pause(parked.workflow.id);
      return parked;
    },
    operations: (h, at: Parked) => [
      { name: 'signal', run: () => signals(h).signal(at.workflow.id, 'go') },
      { name: 'resume', run: () => workflows(h).resume(at.workflow.id) },
    ],
    check: async (h, at: Parked) => [...bodyRanOnce(at.workflow, 'b'), ...(await finalState(h, at.workflow, ['finished']))],
  },
  {
    // Moving a parked step to itself runs it again: a signal that woke the old execution stays claimed for the new one.
    name: 'signal × resumeAt the parked step',
    setup: (h) => parkedAtB(h),
    operations: (h, at: Parked) => [
      { name: 'signal', run: () => signals(h).signal(at.workflow.id, 'go') },
      { name: 'resumeAt', run: () => workflows(h).resumeAt(at.workflow.id, 'b') },
    ],
    check: async (h, at: Parked) => [...bodyRanOnce(at.workflow, 'b'), ...bodyRanOnce(at.workflow, 'c'), ...(await finalState(h, at.workflow, ['finished']))],
  },
  {
    // Moving past a parked step: whichever comes first, b never runs and c runs once.
    name: 'signal × resumeAt the next step',
    setup: (h) => parkedAtB(h),
    operations: (h, at: Parked) => [
      { name: 'signal', run: () => signals(h).signal(at.workflow.id, 'go') },
      { name: 'resumeAt', run: () => workflows(h).resumeAt(at.workflow.id, 'c') },
    ],
    check: async (h, at: Parked) => [
      ...(runsOf(at.workflow, 'b').length > 0 ? ['step b ran although the workflow was moved past it'] : []),
      ...bodyRanOnce(at.workflow, 'c'),
      ...(await finalState(h, at.workflow, ['finished'])),
    ],
  },
  {
    // The pause may find the workflow moved (paused at c, kept) or performing c (refused); resumeAt may find it paused or ready.
    name: 'resumeAt × pause',
    setup: (h) => parkedAtB(h),
    operations: (h, at: Parked) => [
      { name: 'resumeAt', run: () => workflows(h).resumeAt(at.workflow.id, 'c') },
      { name: 'pause', run: () => workflows(h).pause(at.workflow.id).catch(() => undefined) },
    ],
    check: async (h, at: Parked, run) => {
      const c = runsOf(at.workflow, 'c').length;
      const { state } = await workflows(h).find(at.workflow.id);
      return [
        // A COMMIT whose answer was lost (the fault variant) is the one error resumeAt may answer.
        ...(run.outcomes.resumeAt.error !== undefined && !(run.outcomes.resumeAt.error instanceof CommitOutcomeUnknownError) ? [`resumeAt threw ${String(run.outcomes.resumeAt.error)}`] : []),
        ...(runsOf(at.workflow, 'b').length > 0 ? ['step b ran although the workflow was moved past it'] : []),
        ...(c > 1 ? [`step c ran ${c} times`] : []),
        ...(state === 'finished' && c !== 1 ? ['finished without running c'] : []),
        ...(await finalState(h, at.workflow, ['paused', 'finished'])),
      ];
    },
  },
  ...(['signal', 'pause', 'takeover'] as const).map(
    (other): Scenario<Parked> => ({
      // The transactional step's effect rows are exactly its completed executions, whoever comes first. A
      // takeover (its worker looked dead: Bull's stalled check) recovers the run whatever its age, the body still running.
      // The job chains: t's transaction starts b (its waitFor gate) before it commits.
      name: `a transactional step × ${other === 'takeover' ? 'a takeover of its run' : other}`,
      setup: (h) => atTransactionalStep(h),
      operations: (h, at) => [
        { name: 'job', run: () => h.runJob(at.job!) },
        {
          name: other,
          run: () =>
            other === 'signal'
              ? signals(h).signal(at.workflow.id, 'go')
              : other === 'pause'
                ? workflows(h).pause(at.workflow.id).catch(() => undefined)
                : takeOver(h, at.job!),
        },
      ],
      check: async (h, at) => [
        ...(await effectsMatchCompletions(h, at.workflow)),
        ...(other === 'signal' ? [...bodyRanOnce(at.workflow, 'b'), ...(await finalState(h, at.workflow, ['finished']))] : []),
        ...(other === 'pause' ? await finalState(h, at.workflow, ['paused', 'ready']) : []),
        ...(other === 'takeover' ? await finalState(h, at.workflow, ['ready']) : []),
      ],
    }),
  ),
  ...(['the waitFor gate', 'chaining'] as const).map(
    (at): Scenario<Parked> => ({
      // The transactional waitFor step attaches the signal in the locked phase 1 or is woken by it; its
      // transaction reads the hero, writes its row and records the outcome: one row, the signal in hand.
      // Chaining: the job is a's, whose finalize chains into t; signal first, t's transaction begins
      // with that finalize's COMMIT (PostgreSQL: one message, one connection), and starts c before its own.
      name: at === 'chaining' ? 'signal × a finalize chaining into a transactional step' : 'signal × a transactional waitFor gate',
      setup: async (h) => {
        await ensureEffectTable(h.app.dataSource);
        if (at !== 'chaining') return atStepB(h, LedgerWaitingWorkflow);
        const order = await hero(h);
        const workflow = await workflows(h).start(LedgerWaitingWorkflow, order);
        const [job] = h.newJobs();
        return { workflow, hero: order, job };
      },
      operations: (h, parked) => [
        { name: 'signal', run: () => signals(h).signal(parked.workflow.id, 'go') },
        { name: 'job', run: () => h.runJob(parked.job!) },
      ],
      check: async (h, parked) => [
        ...(await effectsMatchCompletions(h, parked.workflow)),
        ...runsOf(parked.workflow, 't').flatMap((run) => (run.signalId === null ? ['step t ran without the signal it waited for'] : [])),
        ...(await finalState(h, parked.workflow, ['finished'])),
      ],
    }),
  ),
  {
    name: 'signal × a deadline firing',
    setup: (h) => parkedWithDeadline(h),
    operations: (h, at: ParkedWithDeadline) => [
      { name: 'signal', run: () => signals(h).signal(at.workflow.id, 'go') },
      { name: 'deadline', run: () => h.get(WaitDeadline).fire(at.job.executionId, { force: true }) },
    ],
    check: async (h, at: { workflow: WorkflowRecord }) => [...bodyRanOnce(at.workflow, 'b'), ...(await finalState(h, at.workflow, ['finished']))],
  },
  {
    // The run that parked b is taken over (its worker looked dead, maybe before the deadline job
    // reached the queue): the deadline job enqueued again, which finds b woken and does nothing.
    name: 'signal × a takeover of the run that parked a step with a deadline',
    setup: (h) => parkedWithDeadline(h),
    operations: (h, at: ParkedWithDeadline) => [
      { name: 'signal', run: () => signals(h).signal(at.workflow.id, 'go') },
      { name: 'takeover', run: () => takeOver(h, at.job) },
    ],
    check: async (h, at: { workflow: WorkflowRecord }) => {
      const b = runsOf(at.workflow, 'b');
      return [...bodyRanOnce(at.workflow, 'b'), ...(b.some((run) => run.signalId === null) ? ['step b timed out although its deadline is an hour on'] : []), ...(await finalState(h, at.workflow, ['finished']))];
    },
  },
  {
    // The deadline job's run timed b out to run it (onTimeout 'run') and its worker looked dead before
    // b's job reached the queue: the takeover enqueues b again while b is not started; b's own job,
    // which did reach it, may start b first.
    name: 'a timed-out step’s job × a takeover of the deadline job’s run',
    setup: async (h) => {
      const at = await parkedWithDeadline(h);
      await h.get(WaitDeadline).fire(at.job.executionId, { force: true });
      const [timedOut] = h.newJobs();
      return { ...at, timedOut };
    },
    operations: (h, at: ParkedWithDeadline & { timedOut: StepJob }) => [
      { name: 'job', run: () => h.runJob(at.timedOut) },
      { name: 'takeover', run: () => takeOver(h, { ...at.timedOut, jobId: deadlineJobId(at.timedOut.executionId) }) },
    ],
    check: async (h, at: { workflow: WorkflowRecord }) => [...bodyRanOnce(at.workflow, 'b'), ...(await finalState(h, at.workflow, ['finished']))],
  },
  {
    name: 'signal × housekeeping recovery',
    setup: (h) => parkedAtB(h),
    operations: (h, at: Parked) => [
      { name: 'signal', run: () => signals(h).signal(at.workflow.id, 'go') },
      { name: 'housekeeping', run: () => h.get(HousekeepingService).run() },
    ],
    check: async (h, at: Parked) => [...bodyRanOnce(at.workflow, 'b'), ...(await finalState(h, at.workflow, ['finished']))],
  },
  {
    name: 'two signals with one key',
    setup: (h) => parkedAtB(h),
    operations: (h, at: Parked) => [
      { name: 'first', run: () => signals(h).signal(at.workflow.id, 'go', { idempotencyKey: 'evt-1' }) },
      { name: 'second', run: () => signals(h).signal(at.workflow.id, 'go', { idempotencyKey: 'evt-1' }) },
    ],
    check: async (h, at: Parked) => {
      const rows = await signals(h).list(at.workflow.id);
      return [...(rows.length === 1 ? [] : [`${rows.length} signal rows for one key`]), ...bodyRanOnce(at.workflow, 'b'), ...(await finalState(h, at.workflow, ['finished']))];
    },
  },
  {
    // Chaining starts a woken step in the process that delivered the signal; the same wake-up may
    // also reach a worker from Redis (a backstop, a housekeeping re-enqueue).
    name: 'a woken step started in-process × its duplicate from Redis',
    setup: async (h) => {
      const parked = await parkedAtB(h);
      await signals(h).signal(parked.workflow.id, 'go');
      const [job] = h.newJobs();
      return { ...parked, job };
    },
    operations: (h, at: Parked) => [
      { name: 'local', run: () => h.runJob(at.job!) },
      { name: 'redis', run: () => h.runJob(at.job!) },
    ],
    check: async (h, at: Parked) => [...bodyRanOnce(at.workflow, 'b'), ...(await finalState(h, at.workflow, ['finished']))],
  },
  ...([false, true] as const).map(
    (allowMultiple): Scenario<{ hero: TestHero }> => ({
      name: `start × start for one hero${allowMultiple ? ', allowMultiple' : ''}`,
      setup: async (h) => ({ hero: await hero(h) }),
      operations: (h, at) => [
        { name: 'first', run: () => workflows(h).start(PlainWorkflow, at.hero, { allowMultiple }) },
        { name: 'second', run: () => workflows(h).start(PlainWorkflow, at.hero, { allowMultiple }) },
      ],
      check: async (h, _at, run) => {
        const count = await h.app.dataSource.getRepository('WorkflowRecord').count();
        const failed = Object.values(run.outcomes).filter((outcome) => outcome.error !== undefined);
        const expected = allowMultiple ? 2 : 1;
        return [
          ...(count === expected ? [] : [`${count} workflows for one hero, not ${expected}`]),
          ...failed.filter((outcome) => allowMultiple || (outcome.error as Error).name !== 'WorkflowAlreadyOngoingError').map((outcome) => `a start threw ${String(outcome.error)}`),
        ];
      },
    }),
  ),
  {
    name: 'the unlocked phase 1 × a duplicate job × pause',
    setup: async (h) => {
      const workflow = await workflows(h).start(PlainWorkflow, await hero(h));
      const [job] = h.newJobs();
      return { workflow, job };
    },
    operations: (h, at: Parked) => [
      { name: 'job', run: () => h.runJob(at.job!) },
      { name: 'duplicate', run: () => h.runJob(at.job!) },
      { name: 'pause', run: () => workflows(h).pause(at.workflow.id).catch(() => undefined) },
    ],
    check: async (h, at: Parked) => {
      const twice = ['a', 'b', 'c'].filter((step) => new Set(runsOf(at.workflow, step).map((run) => run.executionId)).size !== runsOf(at.workflow, step).length);
      return [...twice.map((step) => `an execution of step ${step} ran its body twice`), ...(await finalState(h, at.workflow, ['paused', 'finished']))];
    },
  },
  {
    name: 'a keyless and a keyed signal to a parked step, with a connection killed',
    faults: 1,
    setup: (h) => parkedAtB(h),
    operations: (h, at: Parked) => [
      { name: 'keyless', run: () => signals(h).signal(at.workflow.id, 'go', { payload: { n: 1 } }) },
      { name: 'keyed', run: () => signals(h).signal(at.workflow.id, 'go', { payload: { n: 2 }, idempotencyKey: 'evt-2' }) },
    ],
    check: async (h, at: Parked, run) => {
      const rows = await signals(h).list(at.workflow.id);
      const keyless = rows.filter((row) => row.idempotencyKey === null);
      const violations = [...bodyRanOnce(at.workflow, 'b'), ...(await finalState(h, at.workflow, ['finished']))];
      // A sender that got an error either wrote nothing or was told that it may have.
      const error = run.outcomes.keyless.error as Error | undefined;
      if (error && keyless.length > 0 && error.name !== 'SignalOutcomeUnknownError') violations.push(`the keyless sender got ${String(error)} although its signal was written`);
      if (run.outcomes.keyed.error !== undefined) violations.push(`the keyed sender got ${String(run.outcomes.keyed.error)}: a keyed signal retries by itself`);
      return violations;
    },
  },
  ...([false, true] as const).flatMap((ledger): Array<Scenario<FannedOut>> => {
    const child = ledger ? "a transactional child's end" : "a child's end";
    return [
      {
        // The child's end locks the child, then the parent, and delivers child_finished: buffered if
        // the gate has not run, waking it if parked, or counted by a gate that holds the parent's lock.
        name: `${child} × the fan-in gate`,
        setup: (h) => fannedOut(h, false, { ledger }),
        operations: (h, at) => [
          { name: 'child', run: () => h.runJob(at.childJobs[0]) },
          { name: 'gate', run: () => h.runJob(at.gateJob!) },
        ],
        check: async (h, at, run) => [
          ...(await familyHolds(h, at, run, ['finished'])),
          ...(runsOf(at.workflow, 'fanIn').length === 1 ? [] : ['the fan-in body did not run']),
          ...bodyRanOnce(at.workflow, 'after'),
        ],
      },
      {
        // Lock order: the child's end holds the child and locks the parent; the cancel holds the
        // parent and locks the children (cascade 'cancel'). The database's deadlock victim runs
        // again: TransactionRunner's retry, or, for a transactional leaf, TransactionalStep's (body
        // included; or the child is found canceled by the cascade, its effect rolled back).
        name: `${child} × cancel of its parent`,
        deadlocks: true,
        setup: (h) => fannedOut(h, true, { ledger }),
        operations: (h, at) => [
          { name: 'child', run: () => h.runJob(at.childJobs[0]) },
          { name: 'cancel', run: () => workflows(h).cancel(at.workflow.id) },
        ],
        check: async (h, at, run) => [
          ...(await familyHolds(h, at, run, ['canceled'])),
          ...(runsOf(at.workflow, 'fanIn').length === 0 ? [] : ['the fan-in body ran in a parent canceled while it waited']),
        ],
      },
    ];
  }),
  {
    // The skip finds the fan-in step parked, or woken and scheduled: skipped either way, the parent
    // goes on to `after`, and the child's end, before or after, is delivered once.
    name: "a child's end × skip of the fan-in step",
    // MySQL/MariaDB: the child's signal insert and the skip's settling meet on the parent's signal rows too.
    deadlocks: true,
    setup: (h) => fannedOut(h, true),
    operations: (h, at: FannedOut) => [
      { name: 'child', run: () => h.runJob(at.childJobs[0]) },
      { name: 'skip', run: () => workflows(h).skip(at.workflow.id) },
    ],
    check: async (h, at: FannedOut, run) => [
      ...(await familyHolds(h, at, run, ['finished'])),
      ...(runsOf(at.workflow, 'fanIn').length === 0 ? [] : ['the fan-in body ran although it was skipped']),
      ...bodyRanOnce(at.workflow, 'after'),
    ],
  },
  {
    // Both children end while the cascade locks them in id order: each end holds its child and waits
    // for the parent; the cancel holds the parent and waits for a child.
    name: "two children's ends × cancel of their parent",
    deadlocks: true,
    setup: (h) => fannedOut(h, true, { bothLive: true }),
    operations: (h, at: FannedOut) => [
      { name: 'first', run: () => h.runJob(at.childJobs[0]) },
      { name: 'second', run: () => h.runJob(at.childJobs[1]) },
      { name: 'cancel', run: () => workflows(h).cancel(at.workflow.id) },
    ],
    check: async (h, at: FannedOut, run) => [
      ...(await familyHolds(h, at, run, ['canceled'])),
      ...(runsOf(at.workflow, 'fanIn').length === 0 ? [] : ['the fan-in body ran in a parent canceled while it waited']),
    ],
  },
  {
    // Phase 1 of each takes the key's slot or queues behind the holder; the holder's end frees it and
    // wakes the waiter in its commit. Never two bodies at once, both run once, the key's row clean.
    name: 'a keyed step × another on its key',
    setup: (h) => keyedPair(h),
    operations: (h, at: Keyed) => at.jobs.map((job, index) => ({ name: `step ${index + 1}`, run: () => h.runJob(job) })),
    check: (h, at) => slotsHold(h, at),
  },
  {
    // A last step's outcome (PostgreSQL: one statement, no transaction) frees the slot and answers
    // the key's row; the waiter it admits is woken once that committed, or, after an answer lost,
    // by the outcome's locked retry, which finds the execution closed.
    name: 'a keyed last step × another on its key',
    setup: (h) => keyedPair(h, KeyedLastWorkflow),
    operations: (h, at: Keyed) => at.jobs.map((job, index) => ({ name: `step ${index + 1}`, run: () => h.runJob(job) })),
    check: (h, at) => slotsHold(h, at),
  },
  {
    // Phase 1 of each reads the key's window under its row lock: one starts, the other is promised
    // the next window, whatever the order; never two starts in it, never a promise without its job.
    name: 'a rate-limited step × another on its key',
    setup: async (h): Promise<Keyed> => {
      const list: WorkflowRecord[] = [];
      for (let i = 0; i < 2; i++) list.push(await workflows(h).start(RatedWorkflow, await hero(h, { name: 'sender' })));
      const jobs = h.newJobs();
      return { workflows: list, jobs: list.map((workflow) => jobs.find((job) => job.hints?.workflowId === workflow.id)!), key: 'rate:sender' };
    },
    operations: (h, at: Keyed) => at.jobs.map((job, index) => ({ name: ['first', 'second'][index], run: () => h.runJob(job) })),
    check: (h, at) => ratesHold(h, at),
  },
  {
    // The pause finds the second workflow queued for the key (its execution stays in the queue until
    // its turn cancels it), about to start, or running. Resumed, it runs once the key is free.
    name: 'a keyed step × another on its key × a takeover of the holder',
    // The takeover (the holder's worker looked dead) recovers its run whatever its age: the slot is
    // freed with the recovery and the waiter woken; the holder's successor queues for the key again.
    setup: (h) => keyedPair(h),
    operations: (h, at: Keyed) => [
      { name: 'holder', run: () => h.runJob(at.jobs[0]) },
      { name: 'other', run: () => h.runJob(at.jobs[1]) },
      { name: 'takeover', run: () => takeOver(h, at.jobs[0]) },
    ],
    check: (h, at) => slotsHold(h, at, true),
  },
  {
    name: 'a keyed step × another on its key × pause of the other',
    setup: (h) => keyedPair(h),
    operations: (h, at: Keyed) => [
      { name: 'holder', run: () => h.runJob(at.jobs[0]) },
      { name: 'other', run: () => h.runJob(at.jobs[1]) },
      { name: 'pause', run: () => workflows(h).pause(at.workflows[1].id).catch(() => undefined) },
    ],
    check: async (h, at) => {
      if ((await workflows(h).find(at.workflows[1].id)).state === 'paused') {
        await workflows(h).resume(at.workflows[1].id);
        const thrown = await h.drain();
        if (thrown.length > 0) return thrown;
      }
      return slotsHold(h, at);
    },
  },
];

/** Scenarios of the list above, with a connection killed at one statement boundary of each schedule. */
export const WITH_FAULTS: Array<Scenario<any>> = [
  'signal × the waitFor gate',
  'signal × a chained finalize and prepare',
  'signal × a finalize starting a name-only gate in its message',
  'pause × a finalize starting a name-only gate in its message, its signal buffered',
  'a finalize starting the next step in its message × a takeover of its run',
  'signal × resume',
  'signal × a takeover of the run that parked a step with a deadline',
  'a timed-out step’s job × a takeover of the deadline job’s run',
  'two signals with one key',
  'the unlocked phase 1 × a duplicate job × pause',
  'a transactional step × signal',
  'a transactional step × pause',
  'a transactional step × a takeover of its run',
  'signal × a transactional waitFor gate',
  'signal × a finalize chaining into a transactional step',
  'signal × resumeAt the parked step',
  'signal × resumeAt the next step',
  'resumeAt × pause',
  "a child's end × the fan-in gate",
  "a child's end × cancel of its parent",
  "a child's end × skip of the fan-in step",
  "a transactional child's end × cancel of its parent",
  'a keyed step × another on its key',
  'a keyed last step × another on its key',
  'a keyed step × another on its key × a takeover of the holder',
  'a rate-limited step × another on its key',
].map((name) => {
  const scenario = SCENARIOS.find((candidate) => candidate.name === name)!;
  return { ...scenario, name: `${name}, with a connection killed`, faults: 1 };
});

/** Scenarios that need module options of their own. */
export const ENQUEUE_IN_TRANSACTION: Array<Scenario<any>> = [
  {
    name: 'a start in a caller transaction × its job, enqueued before the commit',
    setup: async (h) => ({ hero: await hero(h) }),
    operations: (h, at: { hero: TestHero }) => [
      {
        name: 'start',
        run: () => h.app.dataSource.transaction((manager) => workflows(h).start(PlainWorkflow, at.hero, { manager })),
      },
      { name: 'job', run: async () => h.runJob(await h.nextJob()) },
    ],
    check: async (_h, _at, run) => (run.outcomes.job.error === undefined ? [] : [`the job threw ${String(run.outcomes.job.error)}`]),
  },
];


/** The scenario named `name` (of either list). */
export function scenarioNamed(name: string): Scenario<any> {
  const found = [...SCENARIOS, ...WITH_FAULTS, ...ENQUEUE_IN_TRANSACTION].find((scenario) => scenario.name === name);
  if (!found) throw new Error(`No interleaving scenario is named "${name}"`);
  return found;
}
