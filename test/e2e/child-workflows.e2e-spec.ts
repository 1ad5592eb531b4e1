/**
 * Child workflows: children written with the step's outcome (none from a body that throws, none
 * twice from a step run again), the child_finished signal of each end, fan-in (all, any, n) with
 * children ending before and after the parent parks, canceled children, grandchildren, a parent
 * canceled under both policies, results round-tripping, the refused same-hero child, and the lists.
 * Everything runs on the manual queue, driven step by step.
 */
import { afterAll, beforeAll, beforeEach, expect, it } from '@jest/globals';
import {
  CHILD_FINISHED,
  ChildrenNotMigratedError,
  HousekeepingService,
  InvalidOptionError,
  Signal,
  StepExecution,
  WorkflowAlreadyOngoingError,
  WorkflowRecord,
  WorkflowService,
} from 'geneva-drive';
import { CHILD_WORKFLOWS, FanOutAllWorkflow, FanOutAnyWorkflow, FanOutTwoWorkflow, GrandparentWorkflow, kids, LeafWorkflow } from '../src/child-workflows.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { loggedDuring } from '../utils/logged-statements.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const AT = new Date(Date.UTC(2024, 0, 2));

describeEachDatabase('child workflows', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let hero: TestHero;

  beforeAll(async () => {
    app = await createTestApp(kind, CHILD_WORKFLOWS);
    workflows = app.moduleRef.get(WorkflowService);
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    kids.reset();
    hero = await newHero('parent');
  });

  const newHero = (name: string) => {
    const heroes = app.dataSource.getRepository(TestHero);
    return heroes.save(heroes.create({ name }));
  };
  /** `count` leaf heroes for the fan-out. */
  const leafHeroes = async (count: number) => {
    kids.heroes = [];
    for (let i = 0; i < count; i++) kids.heroes.push(await newHero(`leaf ${i}`));
  };
  const childrenOf = (parent: WorkflowRecord) => app.dataSource.getRepository(WorkflowRecord).find({ where: { parentId: parent.id }, order: { id: 'ASC' } });
  const signalsOf = (workflow: WorkflowRecord) => app.dataSource.getRepository(Signal).find({ where: { workflowId: workflow.id }, order: { createdAt: 'ASC', id: 'ASC' } });
  const stateOf = async (workflow: WorkflowRecord) => (await workflows.find(workflow.id)).state;
  const current = (workflow: WorkflowRecord) => workflows.currentExecution(workflow);
  /** Runs the child's one step. */
  const runChild = (child: WorkflowRecord) => app.gd.performNextStep(child);

  /** A parent of `workflowClass` whose fan-out ran (children started), standing before its fan-in. */
  async function fannedOut(workflowClass = FanOutAllWorkflow, count = 3): Promise<{ parent: WorkflowRecord; children: WorkflowRecord[] }> {
    await leafHeroes(count);
    const parent = await workflows.start(workflowClass, hero);
    await app.gd.performNextStep(parent);
    return { parent, children: await childrenOf(parent) };
  }

  it('starts the children with the step’s outcome: keys by position, a ready child with its first step scheduled and its job enqueued after the commit', async () => {
    const { parent, children } = await fannedOut();
    expect(children.map((child) => [child.type, child.heroId, child.childKey, child.parentStepName, child.onParentCancel, child.state])).toEqual(
      kids.heroes.map((leaf, index) => ['LeafWorkflow', String(leaf.id), String(index), 'fanOut', 'cancel', 'ready']),
    );
    for (const child of children) {
      expect(await current(child)).toMatchObject({ stepName: 'work', state: 'scheduled' });
      expect(app.gd.enqueuedJobs.some((job) => job.hints?.workflowId === child.id)).toBe(true);
    }
    expect((await workflows.find(parent.id)).hasChildren).toBe(true);
    expect(kids.handleIds).toEqual([null, null, null]); // ids come with the commit
    expect(await workflows.parentOf(children[0])).toMatchObject({ id: parent.id });
    expect(await workflows.parentOf(parent)).toBeNull();
  });

  it('starts no child when the body throws after startChild; the retry starts them once', async () => {
    await leafHeroes(2);
    kids.throwAfterStart = true;
    const parent = await workflows.start(FanOutAllWorkflow, hero);
    await expect(app.gd.performNextStep(parent)).rejects.toThrow('the fan-out failed');
    expect(await childrenOf(parent)).toEqual([]);
    expect(await stateOf(parent)).toBe('paused');
    kids.throwAfterStart = false;
    await workflows.resume(parent);
    await app.gd.performNextStep(parent);
    expect((await childrenOf(parent)).map((child) => child.childKey)).toEqual(['0', '1']);
  });

  it('a run recovered as crashed starts none; its successor starts them, under the same keys, once', async () => {
    await leafHeroes(2);
    kids.keys = ['line-a', 'line-b'];
    let reached!: () => void;
    let release!: () => void;
    const atHold = new Promise<void>((resolve) => (reached = resolve));
    kids.hold = { reached, release: new Promise<void>((resolve) => (release = resolve)) };
    const parent = await workflows.start(FanOutAllWorkflow, hero);
    const firstRun = app.gd.performNextStep(parent);
    await atHold;
    // The worker looks dead: housekeeping recovers its execution (a successor is scheduled).
    const running = (await current(parent))!;
    await app.dataSource.getRepository(StepExecution).update({ id: running.id }, { startedAt: new Date(Date.now() - 3 * 3_600_000) });
    await app.moduleRef.get(HousekeepingService).run();
    kids.hold = null;
    release();
    await firstRun; // its outcome is discarded: its children with it
    expect(await childrenOf(parent)).toEqual([]);
    await app.gd.performNextStep(parent); // the successor
    expect((await childrenOf(parent)).map((child) => child.childKey)).toEqual(['line-a', 'line-b']);
    // The step run again once more (an operator moves the workflow back to it): no child twice.
    await workflows.resumeAt(parent, 'fanOut');
    await app.gd.performNextStep(parent);
    expect((await childrenOf(parent)).map((child) => child.childKey)).toEqual(['line-a', 'line-b']);
  });

  it('fan-in all, the children ending after the parent parked: the last end wakes it, the body sees each child and its result, the signals are consumed', async () => {
    const { parent, children } = await fannedOut();
    await app.gd.performNextStep(parent); // fanIn parks
    await app.gd.assertWaitingForSignal(parent, CHILD_FINISHED);
    await runChild(children[0]);
    await runChild(children[1]);
    expect(await current(parent)).toMatchObject({ stepName: 'fanIn', state: 'waiting' });
    await runChild(children[2]);
    expect(await current(parent)).toMatchObject({ stepName: 'fanIn', state: 'scheduled' });
    await app.gd.performNextStep(parent);
    expect(await stateOf(parent)).toBe('finished');
    const seen = kids.seen.get(parent.id)!;
    expect(seen).toEqual(
      children.map((child, index) => ({ id: child.id, workflowClass: 'LeafWorkflow', key: String(index), state: 'finished', result: { name: `leaf ${index}`, at: AT } })),
    );
    expect(seen[0].result).toEqual({ name: 'leaf 0', at: AT });
    expect((seen[0].result as { at: Date }).at).toBeInstanceOf(Date);
    const signals = await signalsOf(parent);
    expect(signals.map((signal) => [signal.name, signal.idempotencyKey, signal.state, signal.claimed, signal.consumed])).toEqual(
      children.map((child) => [CHILD_FINISHED, child.id, 'consumed', 1, 1]),
    );
    expect(signals[0].payload).toEqual({ childId: children[0].id, workflowClass: 'LeafWorkflow', key: '0', state: 'finished', result: { name: 'leaf 0', at: AT } });
  });

  (kind === 'postgres' ? it : it.skip)("PostgreSQL ends a child in one transaction: its parent locked with the step's rows, the end written with the child_finished signal, a parked fan-in counted", async () => {
    const { parent, children } = await fannedOut();
    /** The statements of the child's last transaction, between its START TRANSACTION (whose message carries the lock read) and COMMIT. */
    const endOf = async (child: WorkflowRecord) => {
      const sent = await loggedDuring(app.dataSource, () => runChild(child));
      const begin = sent.map((sql) => sql.startsWith('START TRANSACTION; ')).lastIndexOf(true);
      return [sent[begin].slice('START TRANSACTION; '.length), ...sent.slice(begin + 1, sent.indexOf('COMMIT', begin))];
    };
    const before = await endOf(children[0]); // the parent not parked yet: the signal is buffered
    expect(before).toHaveLength(2);
    expect(before[0]).toMatch(/LEFT JOIN \(SELECT \* FROM "geneva_drive_workflows" WHERE "id" = \$3 FOR UPDATE\) p ON true .* FOR UPDATE OF w, e$/);
    expect(before[1]).toMatch(/UPDATE "geneva_drive_workflows" .*INSERT INTO "geneva_drive_signals"/);
    await app.gd.performNextStep(parent); // fanIn parks: one of three ended
    const parked = await endOf(children[1]); // the parked gate counts its children's ends, reading no child
    expect(parked).toHaveLength(3);
    expect(parked[2]).toMatch(/^SELECT COUNT\(\*\) AS "all", SUM\(CASE WHEN "w"."state" IN \('finished', 'canceled'\) THEN 1 ELSE 0 END\) AS "ended" FROM "geneva_drive_workflows" "w" WHERE/);
    expect((await signalsOf(parent)).map((signal) => [signal.idempotencyKey, signal.state])).toEqual([
      [children[0].id, 'pending'],
      [children[1].id, 'pending'],
    ]);
    expect(await current(parent)).toMatchObject({ stepName: 'fanIn', state: 'waiting' });
  });

  (kind === 'mysql' ? it : it.skip)("MySQL/MariaDB: a child's step that may end it locks its parent before its own rows, in the order a parent's cancel locks them", async () => {
    const { children } = await fannedOut();
    const sent = await loggedDuring(app.dataSource, () => runChild(children[0]));
    const begin = sent.lastIndexOf('START TRANSACTION');
    const [parentLock, stepLock] = sent.slice(begin + 1);
    // The parent (with its parked executions: what signal() locks), then the child's workflow and execution.
    expect(parentLock).toMatch(/^SELECT .* FROM `geneva_drive_workflows` w LEFT JOIN `geneva_drive_step_executions` e USE INDEX .* FOR UPDATE$/);
    expect(stepLock).toMatch(/^SELECT .* FROM `geneva_drive_workflows` w STRAIGHT_JOIN `geneva_drive_step_executions` e ON e.`id` = \? .* FOR UPDATE$/);
    expect(sent.slice(begin).filter((query) => query === parentLock)).toHaveLength(1);
  });

  it('fan-in all, the children ending before the parent parks: their signals are buffered and the gate opens without parking', async () => {
    const { parent, children } = await fannedOut();
    for (const child of children) await runChild(child);
    expect((await signalsOf(parent)).map((signal) => signal.state)).toEqual(['pending', 'pending', 'pending']);
    const ran = await app.gd.performNextStep(parent);
    expect(ran).toMatchObject({ stepName: 'fanIn', state: 'completed' });
    expect(kids.seen.get(parent.id)!.map((child) => child.key)).toEqual(['0', '1', '2']);
    expect(await stateOf(parent)).toBe('finished');
  });

  it('fan-in all, one child before the parent parks and the others after', async () => {
    const { parent, children } = await fannedOut();
    await runChild(children[1]);
    await app.gd.performNextStep(parent); // parks: one of three
    expect(await current(parent)).toMatchObject({ state: 'waiting' });
    await runChild(children[0]);
    await runChild(children[2]);
    await app.gd.performNextStep(parent);
    expect(kids.seen.get(parent.id)!.map((child) => child.key)).toEqual(['0', '1', '2']);
  });

  it('fan-in any: the first end wakes the parent, whose body sees that child; a parent that ended is told of no later end', async () => {
    const { parent, children } = await fannedOut(FanOutAnyWorkflow);
    await app.gd.performNextStep(parent);
    await runChild(children[2]);
    expect(await current(parent)).toMatchObject({ stepName: 'fanIn', state: 'scheduled' });
    await app.gd.performNextStep(parent);
    expect(kids.seen.get(parent.id)!.map((child) => child.key)).toEqual(['2']);
    expect(await stateOf(parent)).toBe('finished');
    await runChild(children[0]);
    expect((await signalsOf(parent)).map((signal) => [signal.idempotencyKey, signal.state])).toEqual([[children[2].id, 'consumed']]);
  });

  it('fan-in n: two ends wake it; a canceled child counts as ended, with state canceled', async () => {
    const { parent, children } = await fannedOut(FanOutTwoWorkflow);
    kids.endings.set(Number(children[0].heroId), 'cancel');
    await runChild(children[0]); // the child cancels itself
    await app.gd.performNextStep(parent); // parks: one of two
    expect(await current(parent)).toMatchObject({ state: 'waiting' });
    await workflows.cancel(children[1]); // an operator cancels another
    await app.gd.performNextStep(parent);
    expect(kids.seen.get(parent.id)!.map((child) => [child.key, child.state, child.result])).toEqual([
      ['0', 'canceled', null],
      ['1', 'canceled', null],
    ]);
  });

  it('a fan-in timeout runs the body with the children that ended so far', async () => {
    const { parent, children } = await fannedOut(FanOutTwoWorkflow);
    await runChild(children[0]);
    await app.gd.performNextStep(parent); // parks, with a deadline
    await app.gd.expireWait(parent);
    await app.gd.performNextStep(parent);
    await app.gd.assertTimedOut(parent, 'fanIn');
    expect(kids.seen.get(parent.id)!.map((child) => child.key)).toEqual(['0']);
  });

  it('grandchildren: each generation waits for its own, and results travel up', async () => {
    await leafHeroes(2);
    const grandparent = await workflows.start(GrandparentWorkflow, hero);
    await app.gd.performNextStep(grandparent);
    const middles = await childrenOf(grandparent);
    expect(middles.map((middle) => middle.type)).toEqual(['MiddleWorkflow', 'MiddleWorkflow']);
    for (const middle of middles) {
      await app.gd.performNextStep(middle); // spawn
      const [leaf] = await childrenOf(middle);
      await runChild(leaf);
      await app.gd.performNextStep(middle); // gather, woken by its leaf before it parked
      expect(await stateOf(middle)).toBe('finished');
    }
    await app.gd.performNextStep(grandparent);
    expect(kids.seen.get(grandparent.id)!.map((middle) => middle.result)).toEqual([
      { leaf: { name: 'leaf 0', at: AT } },
      { leaf: { name: 'leaf 1', at: AT } },
    ]);
  });

  it('canceling a parent cancels its ongoing children and grandchildren in the same transaction; ended children stay as they are', async () => {
    await leafHeroes(2);
    const grandparent = await workflows.start(GrandparentWorkflow, hero);
    await app.gd.performNextStep(grandparent);
    const middles = await childrenOf(grandparent);
    await app.gd.performNextStep(middles[0]); // spawns a leaf
    const [leaf] = await childrenOf(middles[0]);
    await app.gd.performNextStep(grandparent); // gather parks
    await workflows.cancel(grandparent);
    expect(await stateOf(grandparent)).toBe('canceled');
    expect([await stateOf(middles[0]), await stateOf(middles[1]), await stateOf(leaf)]).toEqual(['canceled', 'canceled', 'canceled']);
    expect(await current(leaf)).toBeNull();
    // A canceled parent is told nothing.
    expect(await signalsOf(grandparent)).toEqual([]);
  });

  it("onParentCancel 'abandon' leaves the children running when the parent is canceled", async () => {
    kids.options = { onParentCancel: 'abandon' };
    const { parent, children } = await fannedOut();
    expect(children.map((child) => child.onParentCancel)).toEqual(['abandon', 'abandon', 'abandon']);
    await workflows.cancel(parent);
    expect(await Promise.all(children.map(stateOf))).toEqual(['ready', 'ready', 'ready']);
    await runChild(children[0]);
    expect(await stateOf(children[0])).toBe('finished');
  });

  it('pausing a parent pauses no child; a child ending meanwhile is buffered, and resume delivers it', async () => {
    const { parent, children } = await fannedOut(FanOutAnyWorkflow, 2);
    await app.gd.performNextStep(parent); // parks
    await workflows.pause(parent);
    expect(await Promise.all(children.map(stateOf))).toEqual(['ready', 'ready']);
    await runChild(children[0]);
    expect(await current(parent)).toMatchObject({ state: 'waiting' });
    await workflows.resume(parent);
    expect(await current(parent)).toMatchObject({ state: 'scheduled' });
    await app.gd.performNextStep(parent);
    expect(kids.seen.get(parent.id)!.map((child) => child.key)).toEqual(['0']);
  });

  it('refuses a child of the same class and hero as an ongoing workflow: the step fails under its policy and starts no child', async () => {
    await leafHeroes(2);
    await workflows.start(LeafWorkflow, kids.heroes[1]);
    const parent = await workflows.start(FanOutAllWorkflow, hero);
    const failure = await app.gd.performNextStep(parent).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(WorkflowAlreadyOngoingError);
    expect(failure).toMatchObject({ workflowType: 'LeafWorkflow', heroId: String(kids.heroes[1].id) });
    expect(await childrenOf(parent)).toEqual([]);
    expect(await stateOf(parent)).toBe('paused');
    const [failed] = await workflows.executionHistory(parent);
    expect([failed.state, failed.errorClassName]).toEqual(['failed', 'WorkflowAlreadyOngoingError']);
  });

  it('refuses two children of one class and hero at the call, and a key given twice', async () => {
    kids.heroes = [hero, hero];
    const parent = await workflows.start(FanOutAllWorkflow, hero);
    await expect(app.gd.performNextStep(parent)).rejects.toBeInstanceOf(WorkflowAlreadyOngoingError);
    const other = await newHero('other');
    kids.heroes = [other, await newHero('third')];
    kids.keys = ['same', 'same'];
    hero = await newHero('another parent');
    const second = await workflows.start(FanOutAllWorkflow, hero);
    await expect(app.gd.performNextStep(second)).rejects.toBeInstanceOf(InvalidOptionError);
  });

  it('lists a parent’s children a page at a time', async () => {
    const { parent, children } = await fannedOut(FanOutAllWorkflow, 5);
    const first = await workflows.children(parent, { limit: 2 });
    const second = await workflows.children(parent, { limit: 2, after: first[1].id });
    const third = await workflows.children(parent.id, { limit: 2, after: second[1].id });
    expect([...first, ...second, ...third].map((child) => child.id)).toEqual(children.map((child) => child.id));
    await expect(workflows.children(parent, { limit: 0 })).rejects.toBeInstanceOf(InvalidOptionError);
    expect(await workflows.children(children[0])).toEqual([]);
  });
});

describeEachDatabase('child workflows with uuid keys', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;

  beforeAll(async () => {
    app = await createTestApp(kind, CHILD_WORKFLOWS, { primaryKey: 'uuid' });
    workflows = app.moduleRef.get(WorkflowService);
  });
  afterAll(() => app.close());
  beforeEach(() => kids.reset());

  it('fans out and in: uuid ids for the children, their executions and the parent’s signals', async () => {
    const heroes = app.dataSource.getRepository(TestHero);
    const hero = await heroes.save(heroes.create({ name: 'parent' }));
    kids.heroes = [await heroes.save(heroes.create({ name: 'leaf 0' })), await heroes.save(heroes.create({ name: 'leaf 1' }))];
    const parent = await workflows.start(FanOutAllWorkflow, hero);
    await app.gd.performNextStep(parent);
    const children = await workflows.children(parent);
    expect(children.map((child) => [child.parentId, child.childKey])).toEqual([
      [parent.id, '0'],
      [parent.id, '1'],
    ]);
    for (const child of children) {
      expect(child.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7/);
      await app.gd.performNextStep(child);
    }
    await app.gd.performNextStep(parent);
    expect(kids.seen.get(parent.id)!.map((child) => child.id)).toEqual(children.map((child) => child.id));
    expect((await workflows.find(parent.id)).state).toBe('finished');
  });
});

describeEachDatabase('child workflows without their migration', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;

  beforeAll(async () => {
    app = await createTestApp(kind, CHILD_WORKFLOWS, { withoutChildren: true });
    workflows = app.moduleRef.get(WorkflowService);
  });
  afterAll(() => app.close());
  beforeEach(() => kids.reset());

  it('fails the step that starts a child, naming the migration; a workflow without children runs as before', async () => {
    const heroes = app.dataSource.getRepository(TestHero);
    const hero = await heroes.save(heroes.create({ name: 'parent' }));
    kids.heroes = [await heroes.save(heroes.create({ name: 'leaf 0' }))];
    const parent = await workflows.start(FanOutAllWorkflow, hero);
    await expect(app.gd.performNextStep(parent)).rejects.toBeInstanceOf(ChildrenNotMigratedError);
    await expect(workflows.find(parent.id)).resolves.toMatchObject({ state: 'paused' });
    const [failed] = await workflows.executionHistory(parent);
    expect(failed.errorMessage).toContain('AddGenevaDriveChildWorkflows1730000000006');
    const leaf = await workflows.start(LeafWorkflow, kids.heroes[0]);
    await app.gd.speedrunWorkflow(leaf);
    expect((await workflows.find(leaf.id)).state).toBe('finished');
    expect(await workflows.children(parent)).toEqual([]);
  });
});
