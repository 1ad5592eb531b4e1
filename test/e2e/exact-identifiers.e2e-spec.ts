/**
 * Identity strings compare exactly on every database: idempotency keys, signal names, workflow type
 * names, hero ids and step names that differ only by case, an accent, a trailing space or Unicode
 * normalisation are different identities — distinct rows, never a redelivery of one another, never
 * found for one another — through `signal()`, `start()` and the lookups, while an exact redelivery
 * is still deduplicated. (MySQL/MariaDB's default collations would merge every one of them.)
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import {
  HousekeepingService,
  SignalService,
  WorkflowAlreadyOngoingError,
  WorkflowNotOngoingError,
  UnknownSignalNameError,
  WorkflowService,
  type WorkflowRecord,
} from 'geneva-drive';
import {
  CAFE_NFC,
  CAFE_NFD,
  createKeyedHeroTable,
  heroJournal,
  KeyedHero,
  NAMED_WORKFLOWS,
  SpelledStepsWorkflow,
  spellingsOf,
  STEP_SPELLINGS,
  stepJournal,
} from '../src/identifier-workflows.js';
import { InvoiceWorkflow, PlainTwoStepWorkflow, resetSignalFixtures } from '../src/signal-workflows.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';
import { saveHero } from '../src/dashboard-app.js';

/** Pairs of idempotency keys that are different events (provider event ids are mixed-case). */
const KEY_PAIRS: Array<[variant: string, first: string, second: string]> = [
  ['case', 'evt_1NqXaB', 'evt_1NqXab'],
  ['accent', 'cafe', CAFE_NFC],
  ['trailing space', 'k', 'k '],
  ['normalisation (NFC, NFD)', CAFE_NFC, CAFE_NFD],
];

/** Spellings of "café" as signal names; each is a signal of its own. */
const NAME_SPELLINGS = spellingsOf(CAFE_NFC);

describeEachDatabase('exact identity strings', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let signals: SignalService;
  let hero: TestHero;

  const newHero = (name: string) => saveHero(app.dataSource, name);

  beforeAll(async () => {
    app = await createTestApp(kind, [...NAMED_WORKFLOWS.map((named) => named.workflowClass), SpelledStepsWorkflow, InvoiceWorkflow, PlainTwoStepWorkflow], {
      entities: [KeyedHero],
    });
    workflows = app.moduleRef.get(WorkflowService);
    signals = app.moduleRef.get(SignalService);
    await createKeyedHeroTable(app.dataSource);
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    resetSignalFixtures();
    stepJournal.length = 0;
    heroJournal.length = 0;
    hero = await newHero('Ada');
    await app.dataSource.getRepository(KeyedHero).clear();
  });

  const keyedHero = (id: string) => {
    const heroes = app.dataSource.getRepository(KeyedHero);
    return heroes.save(heroes.create({ id }));
  };

  describe('idempotency keys', () => {
    it.each(KEY_PAIRS)('keeps keys that differ by %s apart, and still deduplicates each exact redelivery', async (_variant, first, second) => {
      const wf = await workflows.start(PlainTwoStepWorkflow, hero);
      const a = await signals.signal(wf, 'paid', { idempotencyKey: first, allowUnknownName: true });
      const b = await signals.signal(wf, 'paid', { idempotencyKey: second, allowUnknownName: true });
      expect(b.duplicateDelivery).toBe(false);
      expect(b.id).not.toBe(a.id);

      const againB = await signals.signal(wf, 'paid', { idempotencyKey: second, allowUnknownName: true });
      const againA = await signals.signal(wf, 'paid', { idempotencyKey: first, allowUnknownName: true });
      expect(againB).toMatchObject({ id: b.id, idempotencyKey: second, duplicateDelivery: true });
      expect(againA).toMatchObject({ id: a.id, idempotencyKey: first, duplicateDelivery: true });

      const listed = await signals.list(wf);
      expect(listed.map((signal) => [signal.id, signal.idempotencyKey])).toEqual([
        [a.id, first],
        [b.id, second],
      ]);
    });

    it.each(KEY_PAIRS)('after the workflow ended, a key that differs by %s is not taken for a redelivery', async (_variant, first, second) => {
      const wf = await workflows.start(PlainTwoStepWorkflow, hero);
      const a = await signals.signal(wf, 'paid', { idempotencyKey: first, allowUnknownName: true });
      await workflows.cancel(wf);

      await expect(signals.signal(wf, 'paid', { idempotencyKey: second, allowUnknownName: true })).rejects.toThrow(WorkflowNotOngoingError);
      expect(await signals.signal(wf, 'paid', { idempotencyKey: first, allowUnknownName: true })).toMatchObject({ id: a.id, duplicateDelivery: true });
      expect(await signals.list(wf)).toHaveLength(1);
    });
  });

  describe('signal names', () => {
    it('records every spelling of a name as a signal of its own under one key, and deduplicates each exactly', async () => {
      const wf = await workflows.start(PlainTwoStepWorkflow, hero);
      const sent: Array<[string, string]> = [];
      for (const [, name] of NAME_SPELLINGS) {
        const signal = await signals.signal(wf, name, { idempotencyKey: 'evt_1', allowUnknownName: true });
        expect(signal.duplicateDelivery).toBe(false);
        sent.push([signal.id, name]);
      }
      for (const [id, name] of sent) {
        expect(await signals.signal(wf, name, { idempotencyKey: 'evt_1', allowUnknownName: true })).toMatchObject({ id, name, duplicateDelivery: true });
      }
      expect((await signals.list(wf)).map((signal) => [signal.id, signal.name])).toEqual(sent);
    });

    it.each([
      ['case', 'PAYMENT_CONFIRMED'],
      ['accent', 'paymént_confirmed'],
      ['trailing space', 'payment_confirmed '],
    ])('a step waiting for payment_confirmed is not woken, nor later fed, by a name that differs by %s', async (_variant, name) => {
      const parked = await workflows.start(InvoiceWorkflow, hero);
      await app.gd.performNextStep(parked); // prepare
      await app.gd.performNextStep(parked); // awaitPayment parks
      // Refused as a name no step waits for; sent anyway (allowUnknownName), it is kept apart.
      await expect(signals.signal(parked, name)).rejects.toThrow(UnknownSignalNameError);
      await signals.signal(parked, name, { allowUnknownName: true });
      await app.gd.assertWaitingForSignal(parked, 'payment_confirmed');

      // Buffered before the step parks: the step must not take it either.
      const early = await workflows.start(InvoiceWorkflow, await newHero('Bob'));
      await signals.signal(early, name, { allowUnknownName: true });
      await app.gd.performNextStep(early);
      await app.gd.performNextStep(early);
      await app.gd.assertWaitingForSignal(early, 'payment_confirmed');
      await app.gd.assertSignalState(early, name, 'pending');
    });
  });

  describe('workflow type names', () => {
    it('gives each spelling of a type name its own ongoing workflow for one hero, finds and counts each by its own name', async () => {
      const one = await keyedHero('h1');
      const started = new Map<string, WorkflowRecord>();
      for (const { name, workflowClass } of NAMED_WORKFLOWS) started.set(name, await workflows.start(workflowClass, one));

      for (const { variant, name, workflowClass } of NAMED_WORKFLOWS) {
        const id = started.get(name)!.id;
        expect({ variant, found: (await workflows.findOngoing(workflowClass, one))?.id }).toEqual({ variant, found: id });
        expect({ variant, found: (await workflows.findForHero(workflowClass, one)).map((wf) => [wf.id, wf.type]) }).toEqual({ variant, found: [[id, name]] });
        expect({ variant, found: (await workflows.findByState('ongoing', workflowClass)).map((wf) => wf.id) }).toEqual({ variant, found: [id] });
      }

      // Each parks at its step, and the waiting gauge counts them per exact type name.
      for (const wf of started.values()) await app.gd.performNextStep(wf);
      const summary = await app.moduleRef.get(HousekeepingService).run();
      const perName = Object.fromEntries(NAMED_WORKFLOWS.map(({ name }) => [name, 1]));
      expect(summary.gauges?.['geneva_drive.waiting_step_executions']).toEqual({ total: NAMED_WORKFLOWS.length, byWorkflow: perName });
    });
  });

  describe('hero ids', () => {
    const HERO_IDS = spellingsOf('Hérö-1');

    it('gives heroes whose ids differ only by case, accent, trailing space or normalisation each an ongoing workflow', async () => {
      const { workflowClass } = NAMED_WORKFLOWS[0];
      const started = new Map<string, string>();
      const heroes = new Map<string, KeyedHero>();
      for (const [, id] of HERO_IDS) heroes.set(id, await keyedHero(id));
      for (const [id, one] of heroes) started.set(id, (await workflows.start(workflowClass, one)).id);
      // The exact same hero still has only one ongoing workflow.
      await expect(workflows.start(workflowClass, heroes.get(HERO_IDS[0][1])!)).rejects.toThrow(WorkflowAlreadyOngoingError);

      for (const [variant, id] of HERO_IDS) {
        const found = await workflows.findOngoing(workflowClass, heroes.get(id)!);
        expect({ variant, found: found && [found.id, found.heroId] }).toEqual({ variant, found: [started.get(id), id] });
        expect({ variant, found: (await workflows.findForHero(workflowClass, heroes.get(id)!)).map((wf) => wf.id) }).toEqual({ variant, found: [started.get(id)] });
        // Its step runs with its own hero.
        await app.gd.performNextStep(found!); // parks
        await signals.signal(found!, 'go');
        await app.gd.performNextStep(found!);
        expect({ variant, ran: heroJournal.at(-1) }).toEqual({ variant, ran: `${NAMED_WORKFLOWS[0].name}:${id}` });
      }
    });
  });

  describe('step names', () => {
    it('tells steps whose names differ only by case, accent, trailing space or normalisation apart', async () => {
      const wf = await workflows.start(SpelledStepsWorkflow, hero);
      const names = STEP_SPELLINGS.map(([, name]) => name);
      for (const [index, name] of names.entries()) {
        await app.gd.performNextStep(wf);
        await app.gd.assertStepExecuted(wf, name);
        for (const later of names.slice(index + 1)) {
          await expect(app.gd.assertStepExecuted(wf, later)).rejects.toThrow(`Expected step "${later}" to have a completed execution`);
        }
      }
      expect(stepJournal).toEqual(names);
      expect((await workflows.executionHistory(wf)).map((execution) => execution.stepName)).toEqual(names);
      await app.gd.assertWorkflowState(wf, 'finished');
    });
  });
});
