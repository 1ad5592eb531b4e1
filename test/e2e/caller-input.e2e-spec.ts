/**
 * What callers hand the API, on every database: a malformed workflow id is "not found" (the same
 * typed error everywhere, never a database cast error or a prefix match), plain-object heroes are
 * accepted when the workflow declares the hero class, and start() refuses a hero without a row,
 * unknown options and anything that is not a workflow class — writing nothing.
 */
import { afterAll, beforeAll, beforeEach, expect, it } from '@jest/globals';
import {
  GenevaWorkflow,
  InvalidHeroError,
  InvalidOptionError,
  Signal,
  SignalService,
  Step,
  StepExecution,
  UnknownWorkflowError,
  Workflow,
  WorkflowNotFoundError,
  WorkflowRecord,
  WorkflowService,
  type PrimaryKeyType,
} from 'geneva-drive';
import { uuidv7 } from '../../libs/geneva-drive/src/migrations/primary-keys.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero, UuidHero } from '../utils/fixtures.js';

const journal: string[] = [];

@Workflow({ hero: () => TestHero })
class GreetWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: 'go' })
  async greet() {
    journal.push(`hello ${this.hero.name}`);
  }
}

/** Declares no hero class: its heroes must be entity instances. */
@Workflow()
class UndeclaredHeroWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async only() {}
}

@Workflow({ hero: () => UuidHero })
class UuidHeroWorkflow extends GenevaWorkflow<UuidHero> {
  @Step()
  async only() {
    journal.push(`uuid ${this.hero.name}`);
  }
}

class NotAWorkflow {}

const WORKFLOWS = [GreetWorkflow, UndeclaredHeroWorkflow, UuidHeroWorkflow];

async function rowCounts(app: TestApp): Promise<number[]> {
  return Promise.all([WorkflowRecord, StepExecution, Signal].map((entity) => app.dataSource.getRepository(entity).count()));
}

for (const primaryKey of ['bigint', 'uuid'] as PrimaryKeyType[]) {
  describeEachDatabase(`lookups by a malformed id (${primaryKey} keys)`, (kind) => {
    let app: TestApp;
    let existing: WorkflowRecord;
    beforeAll(async () => {
      app = await createTestApp(kind, WORKFLOWS, { primaryKey });
      const heroes = app.dataSource.getRepository(TestHero);
      existing = await app.moduleRef.get(WorkflowService).start(GreetWorkflow, await heroes.save(heroes.create({ name: 'Ada' })));
    });
    afterAll(() => app.close());

    // '<id>x' would match the existing row on MySQL (it compares '7x' with 7 as numbers).
    const malformed = () => [
      'abc',
      `${existing.id}x`,
      ' ',
      '',
      '99999999999999999999',
      primaryKey === 'bigint' ? uuidv7() : '42',
      primaryKey === 'uuid' ? existing.id.slice(0, -1) : '-1',
    ];

    it('find, signal and every operator action throw WorkflowNotFoundError, and write nothing', async () => {
      const workflows = app.moduleRef.get(WorkflowService);
      const signals = app.moduleRef.get(SignalService);
      const before = await rowCounts(app);
      for (const id of malformed()) {
        await expect(workflows.find(id)).rejects.toThrow(WorkflowNotFoundError);
        await expect(workflows.find(id)).rejects.toThrow(`Workflow ${id} does not exist`);
        await expect(signals.signal(id, 'go')).rejects.toThrow(WorkflowNotFoundError);
        await expect(signals.signal(id, 'go', { idempotencyKey: 'k' })).rejects.toThrow(WorkflowNotFoundError);
        for (const action of ['pause', 'resume', 'skip', 'cancel'] as const) await expect(workflows[action](id)).rejects.toThrow(WorkflowNotFoundError);
      }
      expect(await rowCounts(app)).toEqual(before);
      expect((await workflows.find(existing.id)).state).toBe('ready');
    });

    it('the history, current execution and signals of a malformed id are empty, as for an unknown one', async () => {
      const workflows = app.moduleRef.get(WorkflowService);
      for (const id of malformed()) {
        expect(await workflows.executionHistory(id)).toEqual([]);
        expect(await workflows.currentExecution(id)).toBeNull();
        expect(await app.moduleRef.get(SignalService).list(id)).toEqual([]);
      }
      expect(await workflows.executionHistory(existing.id)).toHaveLength(1);
    });
  });
}

describeEachDatabase('heroes and start() input', (kind) => {
  let app: TestApp;
  beforeAll(async () => {
    app = await createTestApp(kind, WORKFLOWS);
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    journal.length = 0;
  });

  it('a plain object from repository.save({...}) is the hero when the workflow declares its class', async () => {
    const plain = await app.dataSource.getRepository(TestHero).save({ name: 'Plain' });
    expect(Object.getPrototypeOf(plain)).toBe(Object.prototype);
    const workflows = app.moduleRef.get(WorkflowService);
    const wf = await workflows.start(GreetWorkflow, plain);
    expect(wf).toMatchObject({ heroType: 'TestHero', heroId: String(plain.id) });
    expect((await workflows.findOngoing(GreetWorkflow, plain))?.id).toBe(wf.id);
    expect((await workflows.findForHero(GreetWorkflow, plain)).map((w) => w.id)).toEqual([wf.id]);
    await app.moduleRef.get(SignalService).signal(wf, 'go');
    expect((await app.gd.speedrunWorkflow(wf)).state).toBe('finished');
    expect(journal).toEqual(['hello Plain']);

    const uuidPlain = await app.dataSource.getRepository(UuidHero).save({ id: uuidv7(), name: 'Grace' });
    expect((await app.gd.speedrunWorkflow(await workflows.start(UuidHeroWorkflow, uuidPlain))).state).toBe('finished');
    expect(journal).toEqual(['hello Plain', 'uuid Grace']);
  });

  it('refuses, writing nothing: plain objects it cannot place, heroes without a row, unknown options, non-workflow classes', async () => {
    const workflows = app.moduleRef.get(WorkflowService);
    const heroes = app.dataSource.getRepository(TestHero);
    const saved = await heroes.save(heroes.create({ name: 'Saved' }));
    const gone = await heroes.save(heroes.create({ name: 'Gone' }));
    await heroes.delete(gone.id);
    const plain = await heroes.save({ name: 'Plain' });

    const refusals: Array<[Promise<unknown>, Function, string | RegExp]> = [
      [workflows.start(UndeclaredHeroWorkflow, plain), InvalidHeroError, /plain object, not an entity instance: make it with repository\.create\(\.\.\.\)/],
      [workflows.start(GreetWorkflow, { name: 'no key' }), InvalidHeroError, /the plain object carries no TestHero\.id: save it first/],
      [workflows.start(GreetWorkflow, { id: 'abc', name: 'bad key' }), InvalidHeroError, /TestHero's id "abc" is not a valid value of its integer column/],
      [workflows.start(GreetWorkflow, heroes.create({ id: 987_654, name: 'unsaved' })), InvalidHeroError, 'Cannot start GreetWorkflow: TestHero 987654 has no row: save it first'],
      [workflows.start(GreetWorkflow, gone), InvalidHeroError, `Cannot start GreetWorkflow: TestHero ${gone.id} has no row`],
      [workflows.start(GreetWorkflow, { id: 987_655 }), InvalidHeroError, 'TestHero 987655 has no row'],
      [
        workflows.start(GreetWorkflow, saved, { allowMultipel: true } as never),
        InvalidOptionError,
        'WorkflowService.start: unknown option "allowMultipel" (the options are allowMultiple, signals, manager)',
      ],
      [workflows.start(GreetWorkflow, saved, null as never), InvalidOptionError, 'WorkflowService.start: the options must be an object, got null'],
      [workflows.start(null as never, saved), UnknownWorkflowError, /^Expected a workflow class, got null: pass a class decorated with @Workflow\(\)/],
      [workflows.start(NotAWorkflow as never, saved), UnknownWorkflowError, 'Unknown workflow "NotAWorkflow"'],
    ];
    for (const [attempt, type, message] of refusals) {
      await expect(attempt).rejects.toThrow(type as never);
      await expect(attempt).rejects.toThrow(message);
    }
    expect(await rowCounts(app)).toEqual([0, 0, 0]);
  });

  it('a hero saved in the caller’s transaction has a row for start() with that manager', async () => {
    const workflows = app.moduleRef.get(WorkflowService);
    const wf = await app.dataSource.transaction(async (manager) => {
      const hero = await manager.save(manager.create(TestHero, { name: 'In tx' }));
      return workflows.start(GreetWorkflow, hero, { manager });
    });
    expect((await workflows.find(wf.id)).state).toBe('ready');
  });
});
