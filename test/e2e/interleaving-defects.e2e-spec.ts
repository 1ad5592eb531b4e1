/**
 * Single schedules, pinned down with the schedule explorer (test/utils/explorer), of interleavings
 * that once broke a guarantee. Each names the phases of its schedule; the invariants and the
 * scenario's own rule are checked afterwards, as the interleavings proof checks every schedule.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { WorkflowRecord, WorkflowService, type StepJob } from 'geneva-drive';
import { scenarioNamed } from '../src/interleaving-scenarios.js';
import { bodyRuns, INTERLEAVING_WORKFLOWS, PlainWorkflow } from '../src/interleaving-workflows.js';
import { enabledDatabases } from '../utils/databases.js';
import { ExplorerHarness, type Scenario } from '../utils/explorer/harness.js';
import { scriptedChooser, type Phase } from '../utils/explorer/schedule-explorer.js';
import { TestHero } from '../utils/fixtures.js';

/** A COMMIT alone, or ending a message that carries the transaction's last writes (PostgreSQL). */
const COMMIT = /(^|;)\s*COMMIT\s*$/i;

/** One start() of a plain workflow. */
const LOST_START: Scenario<{ hero: TestHero }> = {
  name: 'a start whose answer is lost',
  faults: 1,
  lostAnswerLeavesStepToSweep: true,
  setup: async (h) => ({ hero: await h.app.dataSource.getRepository(TestHero).save({ name: 'order' }) }),
  operations: (h, at) => [{ name: 'start', run: () => h.get(WorkflowService).start(PlainWorkflow, at.hero) }],
  check: async (h) => {
    const count = await h.app.dataSource.getRepository(WorkflowRecord).count();
    return count === 1 ? [] : [`${count} workflows written by one start()`];
  },
};

/** Step a of a plain workflow run without chaining: its outcome schedules b, whose job goes through the queue. */
const LOST_OUTCOME: Scenario<{ job: StepJob; workflow: WorkflowRecord }> = {
  name: 'a plain step whose outcome loses its answer',
  faults: 1,
  setup: async (h) => {
    const order = await h.app.dataSource.getRepository(TestHero).save({ name: 'order' });
    const workflow = await h.get(WorkflowService).start(PlainWorkflow, order);
    const [job] = h.newJobs();
    return { job, workflow };
  },
  operations: (h, at) => [{ name: 'job', run: () => h.runJob(at.job, { chain: false }) }],
  check: async (h, at) => {
    const { state } = await h.get(WorkflowService).find(at.workflow.id);
    return state === 'finished' ? [] : [`workflow ${at.workflow.id} ended ${state}, not finished`];
  },
};
const END = /^\s*(COMMIT|ROLLBACK)/i;

for (const kind of ['postgres', 'mysql'] as const) {
  const title = `interleavings once broken [${kind}]`;
  if (!enabledDatabases().includes(kind)) {
    describe.skip(`${title} (not reachable)`, () => it('needs the server', () => undefined));
    continue;
  }

  describe(title, () => {
    let h: ExplorerHarness;
    let late: ExplorerHarness;
    beforeAll(async () => {
      h = await ExplorerHarness.create(kind, INTERLEAVING_WORKFLOWS);
      late = await ExplorerHarness.create(kind, INTERLEAVING_WORKFLOWS, { enqueueAfterCommit: false, prepare: false });
      h.onReset = late.onReset = () => (bodyRuns.length = 0);
    });
    afterAll(async () => {
      await h?.close();
      await late?.close();
    });

    const expectClean = async (harness: ExplorerHarness, named: string | Scenario<any>, ...phases: Phase[]) => {
      const scenario = typeof named === 'string' ? scenarioNamed(named) : named;
      const { run, violations } = await harness.runOnce(scenario, scriptedChooser(...phases));
      if (violations.length > 0) throw new Error(harness.report(scenario, 'pinned schedule', run, violations));
      return run;
    };

    // The webhook updates the order and signals, in one transaction, while the step's job waits for
    // the workflow lock the webhook holds: once it has the lock, phase 1 must see the order as committed.
    it('a job waiting for the lock of a webhook that canceled the order does not run the step on it (cancelIf)', async () => {
      const run = await expectClean(h, 'signal with a hero write × the waitFor gate, cancelIf on the hero', { op: 'webhook', until: COMMIT }, { op: 'job' }, { op: 'webhook' });
      expect(run.trace.some((line) => line.op === 'job' && line.blocked)).toBe(true);
    });

    it('a job waiting for the lock of a webhook that made the order match attaches its signal (matcher on the hero)', async () => {
      const run = await expectClean(h, 'signal with a hero write × the waitFor gate, matcher on the hero', { op: 'webhook', until: COMMIT }, { op: 'job' }, { op: 'webhook' });
      expect(run.trace.some((line) => line.op === 'job' && line.blocked)).toBe(true);
    });

    // MySQL/MariaDB: signalHero's lookup of the hero's workflows ran as a plain read before any lock,
    // which fixed the transaction's read view there: its matcher then read the order as it was before
    // the webhook's commit it had waited for.
    it("signalHero waiting for a webhook's workflow lock reads the order as the webhook committed it", async () => {
      const run = await expectClean(h, 'signalHero × a hero write under the workflow lock', { op: 'webhook', until: COMMIT }, { op: 'signalHero' }, { op: 'webhook' });
      expect(run.trace.some((line) => line.op === 'signalHero' && line.blocked)).toBe(true);
    });

    // enqueueAfterCommit: false — the job is in the queue before the transaction that started the
    // workflow commits, and its first lookup finds nothing.
    it('a job that starts before the commit that enqueued it finds its workflow on a later lookup', async () => {
      const run = await expectClean(late, 'a start in a caller transaction × its job, enqueued before the commit', { op: 'start', until: COMMIT }, { op: 'job', through: END }, { op: 'start' });
      expect(run.outcomes.job.error).toBeUndefined();
    });

    it('a job of a workflow that no longer exists is ignored, not failed', async () => {
      const order = await h.app.dataSource.getRepository(TestHero).save({ name: 'order' });
      const workflow = await h.get(WorkflowService).start(PlainWorkflow, order);
      const [job] = h.newJobs();
      await h.app.dataSource.getRepository(WorkflowRecord).delete({ id: workflow.id });
      await expect(h.runJob(job)).resolves.toBeUndefined();
    });

    // The keyless sender's connection is killed right after it took the workflow lock: what it sends
    // next must not run on another connection, outside its transaction, without the lock.
    it('a signal whose connection dies after the lock wakes nothing outside its transaction', async () => {
      const run = await expectClean(
        h,
        'a keyless and a keyed signal to a parked step, with a connection killed',
        { op: 'keyless', through: /FOR UPDATE/i, fault: 'kill' },
        { op: 'keyed', until: COMMIT },
        { op: 'keyless', until: COMMIT },
        { op: 'keyed' },
      );
      expect(run.trace.some((line) => line.fault === 'kill')).toBe(true);
    });

    // The operator's connection dies after the last statement of its transaction: COMMIT is never
    // sent, so the outcome is known (rolled back) and the call runs again instead of giving up.
    it('an operator call whose connection dies before its COMMIT runs again', async () => {
      const run = await expectClean(h, 'signal × resume, with a connection killed', { op: 'resume', through: /FROM .geneva_drive_signals./, fault: 'kill' }, { op: 'resume' });
      expect(run.outcomes.resume.error).toBeUndefined();
    });

    // The operator's COMMIT goes through, its answer is lost: the caller hears the outcome is unknown,
    // and the step that resume scheduled does not wait for the stuck-scheduled sweep.
    it('an operator call whose COMMIT answer is lost still sends the job it wrote', async () => {
      const run = await expectClean(h, 'signal × resume, with a connection killed', { op: 'signal' }, { op: 'resume', through: COMMIT, fault: 'lose-answer' });
      expect((run.outcomes.resume.error as Error).name).toBe('CommitOutcomeUnknownError');
    });

    // A step's outcome is written, its answer lost: the next step's job died with it.
    it("an outcome whose answer is lost sends the next step's job when it finds the outcome recorded", async () => {
      // The first write that commits starts step a (PostgreSQL: a guarded statement; MySQL: a transaction), the second records its outcome.
      const write = /^\s*(COMMIT|WITH l AS)/i;
      const run = await expectClean(h, LOST_OUTCOME, { op: 'job', through: write }, { op: 'job', through: write, fault: 'lose-answer' }, { op: 'job' });
      expect(run.trace.some((line) => line.fault === 'lose-answer')).toBe(true);
    });

    // A child's end wakes its parked parent in its transaction; its COMMIT's answer lost, the retry
    // finds the child's end recorded, and the parent's wake-up, written by that commit, is sent all
    // the same (its job is the lost commit's, not the retry's).
    it("a child's end whose COMMIT answer is lost still sends the wake-up of its parent", async () => {
      // MySQL: the child's phase 1 commits a transaction of its own before its end's.
      const before = kind === 'mysql' ? [{ op: 'child', through: COMMIT }] : [];
      const run = await expectClean(h, "a child's end × the fan-in gate, with a connection killed", { op: 'gate' }, ...before, { op: 'child', through: COMMIT, fault: 'lose-answer' });
      expect(run.trace.some((line) => line.fault === 'lose-answer')).toBe(true);
    });

    // PostgreSQL sends a transactional step's end and its COMMIT as one message: its answer lost, so
    // are the ids of the rows it wrote, the next step's among them. Finding the outcome recorded, the
    // step sends that step's job.
    (kind === 'postgres' ? it : it.skip)("a transactional step's end sent with its COMMIT, the answer lost, still sends the next step's job", async () => {
      const endWithCommit = /^PREPARE (\w+) AS .*; EXECUTE \1\(.*\); DEALLOCATE \1; COMMIT$/s;
      // Its job run without chaining: a step started inline would end t with the locked end instead.
      const scenario = scenarioNamed('a transactional step × signal, with a connection killed');
      const unchained: Scenario<any> = {
        ...scenario,
        operations: (harness, at) => scenario.operations(harness, at).map((op) => (op.name === 'job' ? { ...op, run: () => harness.runJob(at.job, { chain: false }) } : op)),
      };
      const run = await expectClean(h, unchained, { op: 'job', through: endWithCommit, fault: 'lose-answer' }, { op: 'signal' });
      expect(run.trace.some((line) => line.fault === 'lose-answer' && endWithCommit.test(line.sql))).toBe(true);
    });

    // start()'s write commits and its answer is lost (PostgreSQL: its one statement; MySQL: COMMIT):
    // the engine cannot know, does not start a second workflow, and says so. The first step's job,
    // lost with the answer, is the stuck-scheduled sweep's (the harness runs it before its checks).
    it('a start() whose COMMIT answer is lost throws CommitOutcomeUnknownError, its workflow written once', async () => {
      const run = await expectClean(h, LOST_START, { op: 'start', through: /^\s*(COMMIT|WITH w AS)/i, fault: 'lose-answer' });
      expect((run.outcomes.start.error as Error).name).toBe('CommitOutcomeUnknownError');
    });

    // The keyed sender's COMMIT goes through but its answer is lost: signal() finds out by itself.
    it('a signal whose COMMIT answer is lost reads back that it committed and sends its wake-up', async () => {
      const run = await expectClean(h, 'a keyless and a keyed signal to a parked step, with a connection killed', { op: 'keyed', through: COMMIT, fault: 'lose-answer' }, { op: 'keyed' });
      expect(run.outcomes.keyed.error).toBeUndefined();
    });

    it('a keyless signal whose COMMIT answer is lost returns its row, recorded once', async () => {
      const run = await expectClean(h, 'a keyless and a keyed signal to a parked step, with a connection killed', { op: 'keyless', through: COMMIT, fault: 'lose-answer' }, { op: 'keyless' });
      expect(run.outcomes.keyless.error).toBeUndefined();
    });
  });
}
