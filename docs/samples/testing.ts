/**
 * Manual § Testing. A complete jest spec: it is type-checked with the other samples and was run
 * when the manual was written (it is outside jest's roots, so `npm test` does not pick it up).
 */
import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { ConsoleLogger } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { GENEVA_DRIVE_ENTITIES, GENEVA_DRIVE_MIGRATIONS, GenevaDriveModule, QUEUE_PORT, SignalService, WorkflowService } from 'geneva-drive';
import { GenevaDriveTesting, ManualQueueAdapter } from 'geneva-drive/testing';
import type { DataSource } from 'typeorm';
import { OrderFulfillmentWorkflow } from './defining-workflows.js';
import { TranslationWorkflow } from './resumable-steps.js';
import { Campaign, Order, PaymentsService, SHOP_ENTITIES, ShippingService } from './shop.js';

// #region testing-module
describe('OrderFulfillmentWorkflow', () => {
  let moduleRef: TestingModule;
  let gd: GenevaDriveTesting;
  let workflows: WorkflowService;
  let signals: SignalService;
  let order: Order;
  const payments = {
    reserve: jest.fn(async (_order: Order) => {}),
    capture: jest.fn(async (_order: Order, _amountCents: number) => {}),
  };

  beforeEach(async () => {
    moduleRef = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({
          type: 'better-sqlite3',
          database: ':memory:',
          entities: [...SHOP_ENTITIES, ...GENEVA_DRIVE_ENTITIES],
          migrations: [...GENEVA_DRIVE_MIGRATIONS],
          migrationsRun: true, // geneva-drive's tables come from its migrations...
          synchronize: true, // ...while this creates the shop's (geneva-drive's entities opt out of it)
        }),
        // A failing step logs an error: keep the engine's lines out of the test output.
        GenevaDriveModule.forRoot({ queue: { adapter: 'manual' }, logger: new ConsoleLogger({ logLevels: ['fatal'] }) }),
      ],
      providers: [PaymentsService, ShippingService, OrderFulfillmentWorkflow, TranslationWorkflow],
    })
      .overrideProvider(PaymentsService)
      .useValue(payments)
      .compile();
    await moduleRef.init(); // runs the lifecycle hooks: workflow discovery happens here

    gd = GenevaDriveTesting.create(moduleRef);
    workflows = moduleRef.get(WorkflowService);
    signals = moduleRef.get(SignalService);
    const orders = moduleRef.get<DataSource>(getDataSourceToken()).getRepository(Order);
    order = await orders.save(orders.create({ sku: 'BOOK-1', amountCents: 12_500, customerEmail: 'ada@example.com' }));
    payments.reserve.mockClear();
    payments.capture.mockReset();
  });

  afterEach(() => moduleRef.close());
  // #endregion testing-module

  // #region testing-signal
  it('captures once the payment is confirmed', async () => {
    const workflow = await workflows.start(OrderFulfillmentWorkflow, order);
    await gd.performNextStep(workflow); // reserveStock
    await gd.performNextStep(workflow); // capturePayment parks
    await gd.assertWaitingForSignal(workflow, 'payment_confirmed');

    await signals.signal(workflow, 'payment_confirmed', { payload: { amountCents: 12_500 } });
    await gd.speedrunWorkflow(workflow); // capturePayment, then ship (its 2-day wait is not waited)

    expect(payments.capture).toHaveBeenCalledWith(expect.objectContaining({ id: order.id }), 12_500);
    await gd.assertSignalState(workflow, 'payment_confirmed', 'consumed');
    await gd.assertWorkflowState(workflow, 'finished');
  });

  it('refuses to spin on a parked step, naming the signal', async () => {
    const workflow = await workflows.start(OrderFulfillmentWorkflow, order);
    await gd.performNextStep(workflow);
    await gd.performNextStep(workflow);
    await expect(gd.speedrunWorkflow(workflow)).rejects.toThrow(/parked waiting for signal "payment_confirmed"/);
  });
  // #endregion testing-signal

  it('buffers a confirmation that arrives before the step waits for it', async () => {
    const workflow = await workflows.start(OrderFulfillmentWorkflow, order);
    const early = await signals.signal(workflow, 'payment_confirmed', { payload: { amountCents: 12_500 }, idempotencyKey: 'evt_1' });
    expect(early.state).toBe('pending');
    await gd.speedrunWorkflow(workflow);
    await gd.assertWorkflowState(workflow, 'finished');
    await gd.assertSignalState(workflow, 'payment_confirmed', 'consumed');
  });

  it('delivers a redelivered event once', async () => {
    const workflow = await workflows.start(OrderFulfillmentWorkflow, order);
    await gd.performNextStep(workflow);
    await gd.performNextStep(workflow);
    const first = await signals.signal(workflow, 'payment_confirmed', { payload: { amountCents: 12_500 }, idempotencyKey: 'evt_1' });
    const again = await signals.signal(workflow, 'payment_confirmed', { payload: { amountCents: 1 }, idempotencyKey: 'evt_1' });
    expect([first.duplicateDelivery, again.duplicateDelivery, again.id, again.payload]).toEqual([false, true, first.id, { amountCents: 12_500 }]);
    expect((await signals.list(workflow)).map((s) => [s.state, s.claimed, s.consumed])).toEqual([['claimed', 1, 0]]);
  });

  // #region testing-retry
  it('retries a failed capture with the same payment', async () => {
    payments.capture.mockRejectedValueOnce(new Error('provider unavailable'));
    const workflow = await workflows.start(OrderFulfillmentWorkflow, order, {
      signals: [{ name: 'payment_confirmed', payload: { amountCents: 12_500 } }],
    });
    await gd.performNextStep(workflow); // reserveStock
    await expect(gd.performNextStep(workflow)).rejects.toThrow('provider unavailable');
    await gd.assertWorkflowState(workflow, 'paused'); // the default policy
    await gd.assertSignalState(workflow, 'payment_confirmed', 'claimed'); // not handled yet

    await workflows.resume(workflow);
    await gd.speedrunWorkflow(workflow);

    expect(payments.capture.mock.calls.map(([, amountCents]) => amountCents)).toEqual([12_500, 12_500]);
    const [signal] = await signals.list(workflow);
    expect([signal.state, signal.claimed, signal.consumed]).toEqual(['consumed', 2, 1]);
    await gd.assertStepExecuted(workflow, 'capturePayment', { state: 'failed' });
    await gd.assertStepExecuted(workflow, 'capturePayment');
  });
  // #endregion testing-retry

  it('buffers a signal sent to a paused workflow and delivers it on resume', async () => {
    const workflow = await workflows.start(OrderFulfillmentWorkflow, order);
    await gd.performNextStep(workflow);
    await gd.performNextStep(workflow);
    await workflows.pause(workflow);
    await signals.signal(workflow, 'payment_confirmed', { payload: { amountCents: 12_500 } });
    await gd.assertSignalState(workflow, 'payment_confirmed', 'pending');
    await gd.assertWaitingForSignal(workflow);

    await workflows.resume(workflow);
    await gd.speedrunWorkflow(workflow);
    await gd.assertSignalState(workflow, 'payment_confirmed', 'consumed');
    await gd.assertWorkflowState(workflow, 'finished');
  });

  it('runs a step out of order with performStepInline', async () => {
    const workflow = await workflows.start(OrderFulfillmentWorkflow, order);
    await gd.performStepInline(workflow, 'ship');
    await gd.assertStepExecuted(workflow, 'ship');
    await gd.assertStepExecuted(workflow, 'reserveStock', { state: 'canceled' });
    await gd.assertWorkflowState(workflow, 'finished');
    expect(payments.reserve).not.toHaveBeenCalled();
    expect(gd.enqueuedJobs.length).toBeGreaterThan(0);
    moduleRef.get<ManualQueueAdapter>(QUEUE_PORT).clear();
    expect(gd.enqueuedJobs).toEqual([]);
  });

  // #region testing-resumable
  it('keeps its place across interruptions', async () => {
    const campaigns = moduleRef.get<DataSource>(getDataSourceToken()).getRepository(Campaign);
    const campaign = await campaigns.save(campaigns.create({ subject: 'Spring sale' }));
    const workflow = await workflows.start(TranslationWorkflow, campaign);

    const first = await gd.runIterations(workflow, 2); // two checkpoints, then hand on
    expect([first!.state, first!.outcome]).toEqual(['completed', 'continued']);
    await gd.assertCursor(workflow, 2); // the successor starts at the third language

    const last = await gd.speedrunCurrentStep(workflow);
    expect(last!.outcome).toBe('success');
    await gd.assertWorkflowState(workflow, 'finished');
  });
  // #endregion testing-resumable
});
