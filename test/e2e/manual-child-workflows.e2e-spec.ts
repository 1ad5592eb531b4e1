/**
 * The manual's fan-out/fan-in sample (docs/samples/child-workflows.ts, MANUAL §7.16) runs as written:
 * the order's fanOut starts one ShipmentWorkflow per shipment, keyed by the shipment, written with
 * the step's outcome; fanIn parks until every shipment's workflow ended, sees them all in
 * this.children with their results, and stores the order's own result. Children ending before and
 * after the parent parks; a canceled shipment counted as lost.
 */
import { afterAll, beforeAll, beforeEach, expect, it } from '@jest/globals';
import { CHILD_FINISHED, WorkflowRecord, WorkflowService } from 'geneva-drive';
import { Carrier, Shipment, ShipmentWorkflow, ShipOrderWorkflow } from '../../docs/samples/child-workflows.js';
import { Order } from '../../docs/samples/shop.js';
import { createTestApp, recreateTables, type TestApp } from '../src/test-app.js';
import { describeEachDatabase } from '../utils/databases.js';

describeEachDatabase('manual §7.16: fan-out and fan-in', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;

  beforeAll(async () => {
    app = await createTestApp(kind, [ShipOrderWorkflow, ShipmentWorkflow, Carrier], { entities: [Order, Shipment] });
    workflows = app.moduleRef.get(WorkflowService);
    await recreateTables(app.dataSource, [Shipment, Order]);
  });
  afterAll(() => app.close());
  beforeEach(() => app.reset());

  /** An order with `parcels` shipments. */
  async function orderWith(parcels: number): Promise<{ order: Order; shipments: Shipment[] }> {
    const order = await app.dataSource.getRepository(Order).save({ sku: 'SKU-1', amountCents: 1200, customerEmail: null });
    const shipments: Shipment[] = [];
    for (let i = 0; i < parcels; i++) shipments.push(await app.dataSource.getRepository(Shipment).save({ orderId: order.id }));
    return { order, shipments };
  }
  const childrenOf = async (parent: WorkflowRecord) => (await workflows.children(parent)).sort((a, b) => String(a.childKey).localeCompare(String(b.childKey)));

  it('starts one shipment child per shipment, parks until all ended, and sees their results', async () => {
    const { order, shipments } = await orderWith(3);
    const parent = await workflows.start(ShipOrderWorkflow, order);
    await app.gd.performNextStep(parent); // fanOut
    const children = await childrenOf(parent);
    expect(children.map((child) => child.childKey)).toEqual(shipments.map((shipment) => `shipment-${shipment.id}`).sort());
    expect(children.every((child) => child.type === 'ShipmentWorkflow' && child.parentStepName === 'fanOut')).toBe(true);

    // One shipment ends before the parent parks, the others after.
    await app.gd.performNextStep(children[0]);
    await app.gd.performNextStep(parent); // fanIn parks: one of three ended
    await app.gd.assertWaitingForSignal(parent, CHILD_FINISHED);
    await app.gd.performNextStep(children[1]);
    await app.gd.performNextStep(children[2]);
    await app.gd.performNextStep(parent); // fanIn runs

    const done = await workflows.find(parent.id);
    expect(done.state).toBe('finished');
    expect(done.result).toEqual({ shipped: 3 });
    const results = await Promise.all(children.map(async (child) => (await workflows.find(child.id)).result));
    expect(results.map((result) => result.trackingNumber).sort()).toEqual(shipments.map((shipment) => `TRACK-${shipment.id}`).sort());
    expect((await workflows.parentOf(children[0]))?.id).toBe(parent.id);
  });

  it('counts a canceled shipment as lost', async () => {
    const { order } = await orderWith(2);
    const parent = await workflows.start(ShipOrderWorkflow, order);
    await app.gd.performNextStep(parent);
    const [first, second] = await childrenOf(parent);
    await workflows.cancel(first);
    await app.gd.performNextStep(second);
    await app.gd.performNextStep(parent);
    const done = await workflows.find(parent.id);
    expect(done.state).toBe('finished');
    expect(done.result).toEqual({ shipped: 1 });
  });

  it('an order without shipments passes its fan-in at once', async () => {
    const { order } = await orderWith(0);
    const parent = await workflows.start(ShipOrderWorkflow, order);
    await app.gd.performNextStep(parent);
    await app.gd.performNextStep(parent);
    expect((await workflows.find(parent.id)).result).toEqual({ shipped: 0 });
  });
});
