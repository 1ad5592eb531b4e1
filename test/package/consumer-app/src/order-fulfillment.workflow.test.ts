import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Test, type TestingModule } from '@nestjs/testing';
import { getRepositoryToken, TypeOrmModule } from '@nestjs/typeorm';
import { GENEVA_DRIVE_ENTITIES, GENEVA_DRIVE_MIGRATIONS, GenevaDriveModule, SignalService, WorkflowService } from 'geneva-drive';
import { GenevaDriveTesting } from 'geneva-drive/testing';
import { DataSource, type Repository } from 'typeorm';
import { DATABASE_URL } from './app.module.js';
import { CreateOrders1700000000000 } from './create-orders.migration.js';
import { OrderFulfillmentWorkflow, PaymentConfirmed } from './order-fulfillment.workflow.js';
import { Order } from './order.entity.js';

describe('OrderFulfillmentWorkflow', () => {
  // This file's own schema in the app's database: its tables, migrated from scratch, dropped at the end.
  const schema = `test_${process.pid}_${Date.now()}`;
  let admin: DataSource;
  let moduleRef: TestingModule;
  let gd: GenevaDriveTesting;
  let orders: Repository<Order>;

  beforeAll(async () => {
    admin = await new DataSource({ type: 'postgres', url: DATABASE_URL }).initialize();
    await admin.query(`CREATE SCHEMA ${schema}`);
    moduleRef = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({
          type: 'postgres',
          url: DATABASE_URL,
          extra: { options: `-c search_path=${schema}` },
          entities: [Order, ...GENEVA_DRIVE_ENTITIES],
          migrations: [CreateOrders1700000000000, ...GENEVA_DRIVE_MIGRATIONS],
          migrationsRun: true,
        }),
        TypeOrmModule.forFeature([Order]),
        GenevaDriveModule.forRoot({ queue: { adapter: 'manual' } }), // jobs run only when the test says
      ],
      providers: [OrderFulfillmentWorkflow],
    }).compile();
    await moduleRef.init();
    gd = GenevaDriveTesting.create(moduleRef);
    orders = moduleRef.get(getRepositoryToken(Order));
  });

  afterAll(async () => {
    await moduleRef?.close();
    await admin.query(`DROP SCHEMA ${schema} CASCADE`);
    await admin.destroy();
  });

  it('ships once the payment is confirmed', async () => {
    const order = await orders.save(orders.create({ sku: 'BOOK-1' }));
    const workflow = await moduleRef.get(WorkflowService).start(OrderFulfillmentWorkflow, order);
    await gd.performNextStep(workflow); // reserveStock
    await gd.performNextStep(workflow); // capturePayment parks
    await gd.assertWaitingForSignal(workflow, 'payment_confirmed');

    await moduleRef.get(SignalService).signal(workflow, PaymentConfirmed, { payload: { amountCents: 1250 } });
    await gd.speedrunWorkflow(workflow);

    await gd.assertWorkflowState(workflow, 'finished');
    expect((await orders.findOneByOrFail({ id: order.id })).status).toBe('shipped');
  });
});
