/**
 * The example application (apps/example) driven over HTTP with supertest, as main.ts builds it
 * (AppModule.forEnvironment + configureApp), on two set-ups:
 * - SQLite (a fresh file under .tmp/) with the in-process queue — the embedded default;
 * - PostgreSQL (a database created for this suite) with Bull on Redis — skipped, with the reason
 *   printed, only when those servers do not answer.
 * The one test-only change is the Warehouse provider: a gate that can hold reserveStock, so a
 * webhook can deterministically arrive before the payment step parks.
 */
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Logger, type INestApplication } from '@nestjs/common';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { Test } from '@nestjs/testing';
import Bull from 'bull';
import { WorkflowService } from 'geneva-drive';
import { mkdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { AppModule, databaseOptions, genevaDriveOptions, maxSignalPayloadSize, queueOptions } from '../../apps/example/src/app.module.js';
import { configureApp } from '../../apps/example/src/configure-app.js';
import { ContractDeadlineWorkflow } from '../../apps/example/src/contracts/contract.workflow.js';
import { Contract } from '../../apps/example/src/contracts/contract.entity.js';
import { ContractsService } from '../../apps/example/src/contracts/contracts.service.js';
import { Order } from '../../apps/example/src/orders/order.entity.js';
import { Warehouse } from '../../apps/example/src/orders/warehouse.service.js';
import { signWebhook, WEBHOOK_SIGNATURE_HEADER } from '../../apps/example/src/webhooks/webhook-signature.js';
import { enabledDatabases, redisAvailable, redisUrl, workerDatabaseName } from '../utils/databases.js';

const TMP_DIR = fileURLToPath(new URL('../../.tmp/', import.meta.url));
/** The database (PostgreSQL) and SQLite file of this suite: per jest worker and GD_TEST_DB_PREFIX, apart from the engine suites'. */
const DATABASE_NAME = `${workerDatabaseName()}_example`;
const DEFAULT_SIGNAL_LIMIT = 131_072;
const WEBHOOK_SECRET = 'whsec-example-app-suite-0123456789';

interface Timeline {
  workflow: { id: string; type: string; state: string; nextStepName: string | null };
  steps: Array<{ step: string; state: string; outcome: string | null; waitingSince: string | null }>;
  signals: Array<{ name: string; state: string; key: string | null; claimed: number; consumed: number; payload: Record<string, unknown> }>;
}
type OrderTimeline = Timeline & { order: Order };
type ContractTimeline = Timeline & { contract: Contract };

/** reserveStock through a gate: `hold(sku)` makes the reservation of that sku wait for `release(sku)`. */
class GatedWarehouse {
  readonly entered = new Set<string>();
  private readonly gates = new Map<string, { promise: Promise<void>; release: () => void }>();

  hold(sku: string): void {
    let release!: () => void;
    const promise = new Promise<void>((resolve) => (release = resolve));
    this.gates.set(sku, { promise, release });
  }

  release(sku: string): void {
    this.gates.get(sku)?.release();
    this.gates.delete(sku);
  }

  releaseAll(): void {
    for (const sku of [...this.gates.keys()]) this.release(sku);
  }

  async reserve(order: Order): Promise<void> {
    this.entered.add(order.sku);
    await this.gates.get(order.sku)?.promise;
  }
}

interface Backend {
  /** The environment the app is configured from (AppModule.forEnvironment / configureApp), made ready. */
  setUp(): Promise<NodeJS.ProcessEnv>;
  tearDown(): Promise<void>;
  signalLimit: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `read` until `done` holds; fails after `timeoutMs` with the last value seen. */
async function until<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last seen: ${JSON.stringify(value, null, 2)}`);
    await sleep(50);
  }
}

/**
 * Runs `read` with `write` committed as `target[method]` is next called (and before it runs): the
 * moment an endpoint's reads are apart, driven instead of raced.
 */
async function writingDuring<T, K extends string>(target: Record<K, (...args: never[]) => Promise<unknown>>, method: K, write: () => Promise<unknown>, read: () => Promise<T>): Promise<T> {
  const original = target[method].bind(target);
  const spy = jest.spyOn(target, method as never).mockImplementationOnce((async (...args: never[]) => {
    await write();
    return original(...args);
  }) as never);
  try {
    const result = await read();
    expect(spy).toHaveBeenCalledTimes(1);
    return result;
  } finally {
    spy.mockRestore();
  }
}

const stepState = (timeline: Timeline, step: string) => timeline.steps.filter((s) => s.step === step).at(-1)?.state;

function exampleAppSuite(backend: Backend): void {
  let app: INestApplication;
  const warehouse = new GatedWarehouse();
  let counter = 0;
  const sku = () => `SKU-${++counter}`;
  const eventId = () => `evt_${Date.now()}_${++counter}`;

  const http = () => request(app.getHttpServer());
  const orderTimeline = async (orderId: number) => (await http().get(`/orders/${orderId}/timeline`).expect(200)).body as OrderTimeline;
  const contractTimeline = async (id: number) => (await http().get(`/contracts/${id}/timeline`).expect(200)).body as ContractTimeline;
  const createOrder = async (body: { sku?: string; amountCents: number; pickup?: boolean }) =>
    (await http().post('/orders').send({ sku: sku(), ...body }).expect(201)).body as { order: Order; workflowId: string };
  /** A webhook call as the provider makes it: the raw body, signed with the shared secret. */
  const webhook = (path: string, body: Record<string, unknown> | string) => {
    const raw = typeof body === 'string' ? body : JSON.stringify(body);
    return http().post(path).set('content-type', 'application/json').set(WEBHOOK_SIGNATURE_HEADER, signWebhook(WEBHOOK_SECRET, raw)).send(raw);
  };
  const pay = (body: Record<string, unknown> | string) => webhook('/webhooks/payments', body);
  const parkedOn = (orderId: number, step: string) =>
    until(`order ${orderId}'s ${step} to park`, () => orderTimeline(orderId), (t) => stepState(t, step) === 'waiting');

  beforeAll(async () => {
    const env = { ...(await backend.setUp()), WEBHOOK_SECRET };
    // The application's levels, set before its module is declared: declaring it already logs (the dashboard left unmounted).
    Logger.overrideLogger(['error', 'warn']);
    const moduleRef = await Test.createTestingModule({ imports: [AppModule.forEnvironment(env)] })
      .overrideProvider(Warehouse)
      .useValue(warehouse)
      .compile();
    app = configureApp(moduleRef.createNestApplication<NestExpressApplication>({ logger: ['error', 'warn'] }), env);
    await app.init();
  });

  afterAll(async () => {
    warehouse.releaseAll();
    await app?.close();
    await backend.tearDown();
  });

  it('boots with its migrations run and answers GET /health', async () => {
    const { body } = await http().get('/health').expect(200);
    expect(body.status).toBe('ok');
  });

  it('fulfils an order once its payment webhook arrives; the provider’s retry is answered 200 and recorded once', async () => {
    const { order, workflowId } = await createOrder({ amountCents: 12_500 });
    expect(order).toMatchObject({ amountCents: 12_500, pickup: false });
    await parkedOn(order.id, 'capturePayment');

    const event = { eventId: eventId(), orderId: order.id, amountCents: 12_500 };
    const first = await pay(event).expect(200);
    expect(first.body).toMatchObject({ state: 'claimed', duplicate: false });
    const retry = await pay(event).expect(200);
    expect(retry.body).toMatchObject({ signalId: first.body.signalId, duplicate: true });

    const done = await until('the workflow to finish', () => orderTimeline(order.id), (t) => t.workflow.state === 'finished');
    expect(done.workflow).toMatchObject({ id: workflowId, type: 'OrderFulfillmentWorkflow' });
    expect(done.order.status).toBe('shipped');
    expect(done.steps.map((s) => [s.step, s.state, s.outcome])).toEqual([
      ['reserveStock', 'completed', 'success'],
      ['capturePayment', 'completed', 'success'],
      ['ship', 'completed', 'success'],
    ]);
    expect(done.signals).toEqual([
      expect.objectContaining({ name: 'payment_confirmed', state: 'consumed', key: event.eventId, claimed: 1, consumed: 1, payload: { amountCents: 12_500 } }),
    ]);

    // After the end: the same event is still a harmless duplicate; a new one is refused with 409.
    expect((await pay(event).expect(200)).body).toMatchObject({ signalId: first.body.signalId, duplicate: true });
    const late = await pay({ ...event, eventId: eventId() }).expect(409);
    expect(late.body.message).toContain('finished');
    expect((await orderTimeline(order.id)).signals).toHaveLength(1);
  });

  it('records a payment that does not cover the order without waking the step; the full payment does', async () => {
    const { order } = await createOrder({ amountCents: 10_000, pickup: true });
    await parkedOn(order.id, 'capturePayment');

    const partial = await pay({ eventId: eventId(), orderId: order.id, amountCents: 4_000 }).expect(200);
    expect(partial.body).toMatchObject({ state: 'pending', duplicate: false });
    await sleep(300);
    expect(stepState(await orderTimeline(order.id), 'capturePayment')).toBe('waiting');

    const full = await pay({ eventId: eventId(), orderId: order.id, amountCents: 10_000, metadata: { card: 'visa', attempt: 2 } }).expect(200);
    expect(full.body.state).toBe('claimed');
    const paid = await until('the payment to be captured', () => orderTimeline(order.id), (t) => stepState(t, 'capturePayment') === 'completed');
    expect(paid.signals.map((s) => [s.state, s.payload])).toEqual([
      ['pending', { amountCents: 4_000 }],
      ['consumed', { amountCents: 10_000, metadata: { card: 'visa', attempt: 2 } }],
    ]);
  });

  it('buffers a webhook that arrives before the payment step parks, and the step consumes it without parking', async () => {
    const held = sku();
    warehouse.hold(held);
    try {
      const { order } = await createOrder({ sku: held, amountCents: 2_000, pickup: true });
      await until('reserveStock to start', async () => warehouse.entered.has(held), Boolean);
      const before = await orderTimeline(order.id);
      expect(before.steps.map((s) => [s.step, s.state])).toEqual([['reserveStock', 'in_progress']]);

      const early = await pay({ eventId: eventId(), orderId: order.id, amountCents: 2_000 }).expect(200);
      expect(early.body).toMatchObject({ state: 'pending', duplicate: false });

      warehouse.release(held);
      const paid = await until('the payment to be captured', () => orderTimeline(order.id), (t) => stepState(t, 'capturePayment') === 'completed');
      expect(paid.steps.filter((s) => s.step === 'capturePayment')).toHaveLength(1); // it found the buffered signal at its gate
      expect(paid.signals).toEqual([expect.objectContaining({ state: 'consumed', claimed: 1, consumed: 1 })]);
      expect(paid.order.status).toBe('paid');
    } finally {
      warehouse.release(held);
    }
  });

  it("a timeline shows the order as of after its workflow: a write made while the workflow is read is in the answer", async () => {
    const held = sku();
    warehouse.hold(held);
    try {
      const { order } = await createOrder({ sku: held, amountCents: 700, pickup: true });
      await until('reserveStock to start', async () => warehouse.entered.has(held), Boolean);
      // A step's write to its order, landing between the endpoint's lookup of the order and its read
      // of the workflow (as a step that ends meanwhile would land): the answer must not predate it.
      const timeline = await writingDuring(app.get(WorkflowService), 'findForHero', () => app.get(DataSource).getRepository(Order).update(order.id, { status: 'reserved' }), () => orderTimeline(order.id));
      expect(timeline.order.status).toBe('reserved');
    } finally {
      warehouse.release(held);
    }
  });

  it('answers 404 for an unknown order', async () => {
    const missing = await pay({ eventId: eventId(), orderId: 999_999, amountCents: 100 }).expect(404);
    expect(missing.body.message).toContain('999999');
    await http().get('/orders/999999/timeline').expect(404);
  });

  it('answers 400 for invalid bodies, before anything is recorded', async () => {
    const { order } = await createOrder({ amountCents: 500, pickup: true });
    const valid = { eventId: eventId(), orderId: order.id, amountCents: 500 };
    const invalid: Array<[Record<string, unknown>, string]> = [
      [{}, 'eventId'],
      [{ ...valid, eventId: '' }, 'eventId'],
      [{ ...valid, orderId: 0 }, 'orderId'],
      [{ ...valid, amountCents: -1 }, 'amountCents'],
      [{ ...valid, amountCents: '500' }, 'amountCents'],
      [{ ...valid, metadata: 'not an object' }, 'metadata'],
      [{ ...valid, currency: 'EUR' }, 'currency'], // unknown properties are refused
    ];
    for (const [body, field] of invalid) {
      const response = await pay(body).expect(400);
      expect(JSON.stringify(response.body.message)).toContain(field);
    }
    await pay('{"eventId": ').expect(400);
    await http().post('/orders').send({ sku: '', amountCents: 0 }).expect(400);
    await http().get('/orders/abc/timeline').expect(400);
    expect((await orderTimeline(order.id)).signals).toEqual([]);
  });

  it('answers 400 with a message for hostile bodies, and records nothing for them', async () => {
    const { order } = await createOrder({ amountCents: 600, pickup: true });
    const valid = { eventId: eventId(), orderId: order.id, amountCents: 600 };
    /** Metadata objects nested `depth` deep, as JSON text (supertest's own serialiser gives up on deep values). */
    const deep = (depth: number) => `${'{"d":'.repeat(depth - 1)}{"leaf":1}${'}'.repeat(depth - 1)}`;
    const withMetadata = (metadataJson: string) => JSON.stringify(valid).replace(/}$/, `,"metadata":${metadataJson}}`);
    const hostile: Array<[string, Record<string, unknown> | string, string]> = [
      ['an eventId over 255 characters', { ...valid, eventId: 'e'.repeat(256) }, 'eventId must be shorter than or equal to 255 characters'],
      ['an eventId with a NUL', { ...valid, eventId: 'evt_\u00001' }, 'eventId must be printable ASCII without spaces'],
      ['a whitespace-only eventId', { ...valid, eventId: '   ' }, 'eventId must be printable ASCII without spaces'],
      ['an eventId with a lone surrogate', { ...valid, eventId: 'evt_\uD800' }, 'eventId must be printable ASCII without spaces'],
      ['an orderId beyond the integer range', { ...valid, orderId: 2_147_483_648 }, 'orderId must not be greater than 2147483647'],
      ['an orderId of 1e308', { ...valid, orderId: 1e308 }, 'orderId must not be greater than 2147483647'],
      ['an amountCents of 1e308', { ...valid, amountCents: 1e308 }, 'amountCents must not be greater than 2147483647'],
      ['metadata 5,000 deep', withMetadata(deep(5_000)), 'JSON body nested deeper than 256 levels'],
      ['metadata 100 deep: geneva-drive refuses the payload', withMetadata(deep(100)), 'Signal payload cannot be stored: it nests deeper than 100 objects and arrays'],
    ];
    for (const [what, body, message] of hostile) {
      const response = await pay(body);
      expect({ what, status: response.status }).toEqual({ what, status: 400 });
      expect(JSON.stringify(response.body.message)).toContain(message);
      expect((await orderTimeline(order.id)).signals).toEqual([]);
    }
    await http().get('/orders/2147483648/timeline').expect(400);
    await http().get('/contracts/99999999999/timeline').expect(400);
    await http().post('/orders').send({ sku: 's', amountCents: 1e308 }).expect(400);
  });

  it('stores metadata jsonb cannot hold as it is (NUL, lone surrogates) and reads it back exactly', async () => {
    const { order } = await createOrder({ amountCents: 800, pickup: true });
    const metadata = JSON.parse('{"note": "a\\u0000b", "half": "\\ud800", "\\u0000key": ["\\udfff"], "deep": ' + '['.repeat(90) + ']'.repeat(90) + '}');
    const body = JSON.stringify({ eventId: eventId(), orderId: order.id, amountCents: 1, metadata });
    const first = await pay(body).expect(200);
    expect(first.body).toMatchObject({ state: 'pending', duplicate: false });
    const [signal] = (await orderTimeline(order.id)).signals;
    const stored = signal.payload.metadata as Record<string, unknown>;
    expect(stored).toEqual(metadata);
    const retry = await pay(body).expect(200);
    expect(retry.body).toMatchObject({ signalId: first.body.signalId, duplicate: true });
    expect((await orderTimeline(order.id)).signals).toHaveLength(1);
  });

  it(`answers 413 for a payload over maxSignalPayloadSize (${backend.signalLimit} bytes here) — the body parser lets it through to geneva-drive’s own check`, async () => {
    const { order } = await createOrder({ amountCents: 700, pickup: true });
    const oversized = await pay({ eventId: eventId(), orderId: order.id, amountCents: 1, metadata: { blob: 'x'.repeat(backend.signalLimit + 1_000) } }).expect(413);
    expect(oversized.body.message).toContain('maxSignalPayloadSize');
    expect((await orderTimeline(order.id)).signals).toEqual([]); // nothing was recorded

    // Just under the limit (and over express's default 100 kB body limit when the signal limit is the default) goes through.
    const large = await pay({ eventId: eventId(), orderId: order.id, amountCents: 1, metadata: { blob: 'y'.repeat(backend.signalLimit - 1_000) } }).expect(200);
    expect(large.body.state).toBe('pending'); // 1 cent does not pay for the order
  });

  it('refuses webhook calls that are unsigned, signed with another secret, stale or from the future, or whose body was changed; nothing is recorded', async () => {
    const { order } = await createOrder({ amountCents: 600, pickup: true });
    const raw = JSON.stringify({ eventId: eventId(), orderId: order.id, amountCents: 600 });
    const post = (signature?: string, body = raw) => {
      const call = http().post('/webhooks/payments').set('content-type', 'application/json');
      return (signature === undefined ? call : call.set(WEBHOOK_SIGNATURE_HEADER, signature)).send(body);
    };
    const minutes = (n: number) => new Date(Date.now() + n * 60_000);
    const refused: Array<[string, string | undefined]> = [
      ['no signature', undefined],
      ['a malformed header', 'sha256=abc'],
      ['another secret', signWebhook('someone-else-s-secret', raw)],
      ['a call signed ten minutes ago (a replay)', signWebhook(WEBHOOK_SECRET, raw, minutes(-10))],
      ['a call dated ten minutes ahead', signWebhook(WEBHOOK_SECRET, raw, minutes(10))],
      ['a signature of another body', signWebhook(WEBHOOK_SECRET, raw.replace('600', '60000'))],
      ['a 20-byte mac', `t=${Math.floor(Date.now() / 1000)},v1=${'ab'.repeat(20)}`],
    ];
    for (const [what, signature] of refused) {
      const response = await post(signature);
      expect({ what, status: response.status }).toEqual({ what, status: 401 });
    }
    // The signature covers the bytes received: the same JSON with other spacing is another body.
    await post(signWebhook(WEBHOOK_SECRET, raw), JSON.stringify(JSON.parse(raw), null, 1)).expect(401);
    expect((await orderTimeline(order.id)).signals).toEqual([]);
    await post(signWebhook(WEBHOOK_SECRET, raw, minutes(-4))).expect(200);
    expect((await orderTimeline(order.id)).signals).toHaveLength(1);
  });

  it('caps the timeline: the latest 20 signals, and the size of a large payload instead of the payload', async () => {
    const { order } = await createOrder({ amountCents: 900_000, pickup: true });
    const events = Array.from({ length: 25 }, () => eventId());
    for (const [i, id] of events.entries()) await pay({ eventId: id, orderId: order.id, amountCents: 1, metadata: i === 24 ? { blob: 'b'.repeat(6_000) } : { i } }).expect(200);
    const timeline = (await http().get(`/orders/${order.id}/timeline`).expect(200)).body as OrderTimeline & { signalsOmitted: number };
    expect(timeline.signals.map((signal) => signal.key)).toEqual(events.slice(5));
    expect(timeline.signalsOmitted).toBe(5);
    expect(timeline.signals[0].payload).toEqual({ amountCents: 1, metadata: { i: 5 } });
    expect(timeline.signals[19]).toEqual(expect.objectContaining({ payloadOmitted: { bytes: expect.any(Number) } }));
    expect(timeline.signals[19]).not.toHaveProperty('payload');
  });

  describe('contracts: a shared matcher and the deadline signal', () => {
    const openContract = async (documentId: string) =>
      (await http().post('/contracts').send({ documentId }).expect(201)).body as { contract: Contract; workflowId: string; deadlineWorkflowId: string };
    const parked = (id: number) =>
      until(`contract ${id}'s awaitSignature to park`, () => contractTimeline(id), (t) => stepState(t, 'awaitSignature') === 'waiting');

    it('a timeline shows the contract as of after its workflow, as the order timeline does', async () => {
      const { contract } = await openContract(`DOC-${++counter}`);
      await parked(contract.id);
      const timeline = await writingDuring(app.get(ContractsService), 'workflowOf', () => app.get(DataSource).getRepository(Contract).update(contract.id, { signedBy: 'written meanwhile' }), () => contractTimeline(contract.id));
      expect(timeline.contract.signedBy).toBe('written meanwhile');
    });

    it('expires the contract when the deadline arrives first: the step reads timedOut and cancels; a second deadline is a duplicate', async () => {
      const documentId = `DOC-${++counter}`;
      const { contract, workflowId, deadlineWorkflowId } = await openContract(documentId);
      await parked(contract.id);

      // The deadline clock is a workflow of its own, waiting SIGNATURE_DEADLINE (14 days) to fire.
      const workflows = app.get(WorkflowService);
      const entity = await app.get(DataSource).getRepository(Contract).findOneByOrFail({ id: contract.id });
      const [clock] = await workflows.findForHero(ContractDeadlineWorkflow, entity);
      expect(clock.id).toBe(deadlineWorkflowId);
      const timer = (await workflows.currentExecution(clock))!;
      expect(timer.stepName).toBe('sendDeadline');
      expect(timer.scheduledFor.getTime()).toBeGreaterThan(Date.now() + 13 * 86_400_000);

      // A signature of another document (an outdated version) does not pass DOCUMENT_SIGNED: recorded, wakes nothing.
      const stale = await webhook('/webhooks/signatures', { eventId: eventId(), contractId: contract.id, documentId: `${documentId}-v0` }).expect(200);
      expect(stale.body).toMatchObject({ state: 'pending', duplicate: false });

      // The application sends the deadline now (as an operator would).
      const deadline = await http().post(`/contracts/${contract.id}/deadline`).expect(200);
      expect(deadline.body).toMatchObject({ state: 'claimed', key: `deadline-${workflowId}`, duplicate: false });

      const ended = await until('the contract workflow to be canceled', () => contractTimeline(contract.id), (t) => t.workflow.state === 'canceled');
      expect(ended.contract.status).toBe('expired');
      expect(ended.steps.map((s) => [s.step, s.state])).toEqual([
        ['sendForSignature', 'completed'],
        ['awaitSignature', 'canceled'],
      ]);
      expect(ended.signals.map((s) => [s.key, s.state, s.payload])).toEqual([
        [stale.body.key, 'pending', { documentId: `${documentId}-v0` }],
        [`deadline-${workflowId}`, 'claimed', { documentId, timedOut: true }], // a cancel does not settle its signal
      ]);

      const again = await http().post(`/contracts/${contract.id}/deadline`).expect(200);
      expect(again.body).toMatchObject({ signalId: deadline.body.signalId, duplicate: true });
      await webhook('/webhooks/signatures', { eventId: eventId(), contractId: contract.id, documentId }).expect(409);
    });

    it('signs the contract when the signature arrives first; a later deadline is refused with 409', async () => {
      const documentId = `DOC-${++counter}`;
      const { contract } = await openContract(documentId);
      const signed = await webhook('/webhooks/signatures', { eventId: eventId(), contractId: contract.id, documentId, signer: 'Ada Lovelace' }).expect(200);
      expect(signed.body.duplicate).toBe(false);

      const done = await until('the contract workflow to finish', () => contractTimeline(contract.id), (t) => t.workflow.state === 'finished');
      expect(done.contract).toMatchObject({ status: 'signed', signedBy: 'Ada Lovelace' });
      expect(done.steps.map((s) => [s.step, s.state])).toEqual([
        ['sendForSignature', 'completed'],
        ['awaitSignature', 'completed'],
        ['sendSignedCopy', 'completed'],
      ]);
      expect(done.signals).toEqual([expect.objectContaining({ state: 'consumed', payload: { documentId, signer: 'Ada Lovelace' } })]);

      await http().post(`/contracts/${contract.id}/deadline`).expect(409);
    });

    it('answers 404 for an unknown contract and 400 for invalid bodies', async () => {
      await http().post('/contracts/999999/deadline').expect(404);
      await http().get('/contracts/999999/timeline').expect(404);
      await webhook('/webhooks/signatures', { eventId: eventId(), contractId: 999_999, documentId: 'DOC' }).expect(404);
      await http().post('/contracts').send({}).expect(400);
      await webhook('/webhooks/signatures', { eventId: eventId(), contractId: 1 }).expect(400);
      await webhook('/webhooks/signatures', { eventId: ' ', contractId: 1, documentId: 'DOC' }).expect(400);
      await webhook('/webhooks/signatures', { eventId: eventId(), contractId: 2_147_483_648, documentId: 'DOC' }).expect(400);
    });
  });

  describe('shipments: an order shipped in parcels, one child workflow each, fanned in', () => {
    interface ShipmentsView {
      order: Order & { status: string };
      workflow: { id: string; state: string; result: { parcels: number; delivered: number } | null };
      shipments: Array<{ workflowId: string; key: string; shipmentId: number; state: string; result: { shipmentId: number; deliveredAt: string } | null }>;
    }
    const shipmentsOf = async (orderId: number) => (await http().get(`/orders/${orderId}/shipments`).expect(200)).body as ShipmentsView;

    it('starts one shipment workflow per parcel and delivers the order once every parcel is delivered, in whatever order', async () => {
      const { order } = await createOrder({ amountCents: 3_000 });
      const started = (await http().post(`/orders/${order.id}/shipments`).send({ parcels: 3 }).expect(201)).body as { workflowId: string; shipments: number[] };
      expect(started.shipments).toHaveLength(3);
      const fannedOut = await until('three parcels dispatched', () => shipmentsOf(order.id), (v) => v.shipments.length === 3 && v.order.status === 'shipped');
      expect(fannedOut.shipments.map((s) => s.key).sort()).toEqual(started.shipments.map((id) => `shipment-${id}`).sort());
      expect(fannedOut.workflow).toMatchObject({ id: started.workflowId, result: null });

      // The last parcel first; a scan the carrier sends twice is recorded once.
      const [first, second, third] = started.shipments;
      await http().post(`/shipments/${third}/delivered`).expect(201);
      const scan = (await http().post(`/shipments/${first}/delivered`).expect(201)).body as { signalId: string };
      expect((await http().post(`/shipments/${first}/delivered`).expect(201)).body).toMatchObject({ signalId: scan.signalId });
      const partly = await until('two parcels delivered', () => shipmentsOf(order.id), (v) => v.shipments.filter((s) => s.state === 'finished').length === 2);
      expect(partly.workflow.state).not.toBe('finished');
      expect(partly.order.status).toBe('shipped');

      await http().post(`/shipments/${second}/delivered`).expect(201);
      const done = await until('the order delivered', () => shipmentsOf(order.id), (v) => v.workflow.state === 'finished');
      expect(done.order.status).toBe('delivered');
      expect(done.workflow.result).toEqual({ parcels: 3, delivered: 3 });
      expect(done.shipments.map((s) => [s.shipmentId, s.state, s.result?.shipmentId]).sort()).toEqual(started.shipments.map((id) => [id, 'finished', id]).sort());
    });

    it('answers 404 for an unknown order or shipment and 400 for a bad parcel count', async () => {
      await http().post('/orders/999999/shipments').send({ parcels: 2 }).expect(404);
      await http().get('/orders/999999/shipments').expect(404);
      await http().post('/shipments/999999/delivered').expect(404);
      const { order } = await createOrder({ amountCents: 1_000, pickup: true });
      await http().post(`/orders/${order.id}/shipments`).send({ parcels: 0 }).expect(400);
      await http().post(`/orders/${order.id}/shipments`).send({ parcels: 21 }).expect(400);
      await http().get(`/orders/${order.id}/shipments`).expect(404);
    });
  });
}

describe('example app configuration (the environment main.ts reads)', () => {
  it('defaults to SQLite and the local queue; DATABASE_URL and REDIS_URL switch to servers and Bull', () => {
    expect(databaseOptions({ SQLITE_FILE: '/tmp/x.sqlite' })).toMatchObject({ type: 'better-sqlite3', database: '/tmp/x.sqlite', migrationsRun: true });
    expect(databaseOptions({ DATABASE_URL: 'postgres://db/app' })).toMatchObject({ type: 'postgres', url: 'postgres://db/app' });
    expect(databaseOptions({ DATABASE_URL: 'mariadb://db/app' })).toMatchObject({ type: 'mysql', url: 'mysql://db/app', timezone: 'Z' });
    expect(() => databaseOptions({ DATABASE_URL: 'mongodb://db/app' })).toThrow('DATABASE_URL');
    expect(queueOptions({})).toEqual({ adapter: 'local', concurrency: 1 });
    expect(queueOptions({ REDIS_URL: 'redis://r:6379', CONCURRENCY: '4' })).toMatchObject({ adapter: 'bull', redis: 'redis://r:6379', concurrency: 4 });
    expect(queueOptions({ REDIS_URL: 'redis://r:6379', WORKER: '0' })).toMatchObject({ adapter: 'bull', concurrency: 0 });
  });

  it('reads GD_MAX_SIGNAL_PAYLOAD', () => {
    expect(genevaDriveOptions({}).maxSignalPayloadSize).toBeUndefined(); // the library's 131072
    expect(maxSignalPayloadSize({ GD_MAX_SIGNAL_PAYLOAD: '4096' })).toBe(4096);
    expect(maxSignalPayloadSize({ GD_MAX_SIGNAL_PAYLOAD: 'off' })).toBeNull();
    expect(() => maxSignalPayloadSize({ GD_MAX_SIGNAL_PAYLOAD: '12kb' })).toThrow('GD_MAX_SIGNAL_PAYLOAD');
  });
});

describe('example app logs', () => {
  afterAll(() => Logger.overrideLogger(['error', 'warn']));

  it('writes untrusted text escaped: a newline in a sku cannot forge a log line, nor an escape sequence reach the terminal', async () => {
    const lines: string[] = [];
    const capture = (message: unknown) => void lines.push(String(message));
    Logger.overrideLogger({ log: capture, error: capture, warn: capture, debug: capture, verbose: capture });
    await new Warehouse().reserve({ id: 7, sku: 'BOOK\n[Nest] 1  - LOG [Payments] refund sent\u001b[2J\u009b' } as Order);
    expect(lines).toEqual(['reserved "BOOK\\n[Nest] 1  - LOG [Payments] refund sent\\u001b[2J\\u009b" for order 7']);
  });
});

// (1) The embedded default: SQLite in a file, the in-process queue.
const sqliteFile = `${TMP_DIR}${DATABASE_NAME}.sqlite`;
const removeSqliteFiles = () => {
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${sqliteFile}${suffix}`, { force: true });
};
describe('example app over HTTP [SQLite + local queue]', () =>
  exampleAppSuite({
    signalLimit: DEFAULT_SIGNAL_LIMIT,
    async setUp() {
      mkdirSync(TMP_DIR, { recursive: true });
      removeSqliteFiles();
      return { SQLITE_FILE: sqliteFile };
    },
    async tearDown() {
      removeSqliteFiles();
    },
  }));

// (2) PostgreSQL and Bull on Redis, with a small signal limit set through the environment.
const BULL_PREFIX = `gd-example-${DATABASE_NAME}`;

async function postgresAdmin<T>(work: (admin: DataSource) => Promise<T>): Promise<T> {
  const admin = await new DataSource({ type: 'postgres', url: process.env.GD_PG_URL! }).initialize();
  try {
    return await work(admin);
  } finally {
    await admin.destroy();
  }
}

async function obliterateQueue(): Promise<void> {
  const queue = new Bull('geneva-drive', redisUrl(), { prefix: BULL_PREFIX });
  try {
    await queue.obliterate({ force: true });
  } finally {
    await queue.close();
  }
}

const hostOf = (url: string | undefined, fallback: string) => (url ? new URL(url).host : fallback);
const postgresSelected = !process.env.GD_DB?.trim() || process.env.GD_DB.toLowerCase().split(',').some((name) => name.trim() === 'postgres');
const unavailable = [
  enabledDatabases().includes('postgres')
    ? null
    : postgresSelected
      ? `PostgreSQL not reachable at ${hostOf(process.env.GD_PG_URL, '127.0.0.1:5432')}`
      : `PostgreSQL not selected (GD_DB=${process.env.GD_DB})`,
  redisAvailable() ? null : `Redis not reachable at ${hostOf(process.env.GD_REDIS_URL, '127.0.0.1:6379')}`,
].filter((reason): reason is string => reason !== null);

if (unavailable.length === 0) {
  describe('example app over HTTP [PostgreSQL + Bull on Redis]', () =>
    exampleAppSuite({
      signalLimit: 8_192,
      async setUp() {
        await postgresAdmin(async (admin) => {
          const name = admin.driver.escape(DATABASE_NAME);
          await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
          await admin.query(`CREATE DATABASE ${name}`);
        });
        await obliterateQueue();
        const url = new URL(process.env.GD_PG_URL!);
        url.pathname = `/${DATABASE_NAME}`;
        return { DATABASE_URL: url.toString(), REDIS_URL: redisUrl(), BULL_PREFIX, CONCURRENCY: '2', GD_MAX_SIGNAL_PAYLOAD: '8192' };
      },
      async tearDown() {
        await obliterateQueue();
        await postgresAdmin((admin) => admin.query(`DROP DATABASE IF EXISTS ${admin.driver.escape(DATABASE_NAME)} WITH (FORCE)`));
      },
    }));
} else {
  const reason = unavailable.join('; ');
  console.warn(`example-app.e2e-spec: PostgreSQL + Bull suite skipped — ${reason} (set GENEVA_DRIVE_TEST_REQUIRE=postgres,redis to make this a failure)`);
  describe.skip(`example app over HTTP [PostgreSQL + Bull on Redis] (skipped: ${reason})`, () => {
    it('runs when PostgreSQL and Redis answer', () => undefined);
  });
}
