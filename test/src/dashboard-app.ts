/**
 * The dashboard specs' application: TypeORM on one of the test databases, GenevaDriveModule and the
 * dashboard at /geneva, behind a bearer-token guard (or the options a spec gives), listening on a
 * random port. `InvoiceFlow` (cli-workflows.ts) parks at `awaitPayment`; `ShippingFlow` (idem) declares
 * a removed step; `FragileFlow` fails; `LoudFlow` fails with a 50 KB message.
 */
import { Injectable, UnauthorizedException, type CanActivate, type ExecutionContext, type INestApplication, type Provider } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { GenevaDriveModule, GenevaWorkflow, SignalService, Step, Workflow, WorkflowRecord, WorkflowService, type GenevaDriveModuleOptions, type WorkflowState } from 'geneva-drive';
import type { GenevaDriveTesting } from 'geneva-drive/testing';
import { GenevaDriveDashboardModule, type GenevaDriveDashboardModuleOptions } from 'geneva-drive/dashboard';
import { dataSourceOptions, prepareDatabase, truncateAll, type DatabaseKind, type SchemaOptions } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';
import { InvoiceFlow, ShippingFlow } from './cli-workflows.js';

export { InvoiceFlow, ShippingFlow };
import { engineLogger } from './test-app.js';

export const DASHBOARD_TOKEN = 'operator-secret';

/** Lets a request in when it carries `Authorization: Bearer operator-secret` or the `?token=` cookie equivalent. */
@Injectable()
export class TokenGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>();
    const cookie = request.headers.cookie ?? '';
    if (request.headers.authorization === `Bearer ${DASHBOARD_TOKEN}` || cookie.includes(`operator_token=${DASHBOARD_TOKEN}`)) return true;
    throw new UnauthorizedException('An operator token is required');
  }
}

@Workflow({ name: 'FragileFlow', hero: () => TestHero })
export class FragileFlow extends GenevaWorkflow<TestHero> {
  @Step({ onException: 'pause' })
  async explode() {
    throw new RangeError('<b>boom</b> while charging');
  }
}

/** Fails with a 50 KB message (the engine keeps 8,000 characters), as a step whose HTTP client puts the response body in its error does. */
@Workflow({ name: 'LoudFlow', hero: () => TestHero })
export class LoudFlow extends GenevaWorkflow<TestHero> {
  @Step({ onException: 'pause' })
  async shout() {
    throw new Error(`upstream answered 502: ${'<html>'.repeat(8_500)}`);
  }
}

export interface DashboardApp {
  app: INestApplication;
  url: string;
  dataSource: DataSource;
  workflows: WorkflowService;
  signals: SignalService;
  close(): Promise<void>;
  reset(): Promise<void>;
}

/** What a spec adds to the dashboard's application: workflow classes of its own, an older schema. */
export interface DashboardAppExtras {
  providers?: Provider[];
  schema?: SchemaOptions;
}

export async function createDashboardApp(
  kind: DatabaseKind,
  dashboard: GenevaDriveDashboardModuleOptions = { guard: new TokenGuard() },
  engine: GenevaDriveModuleOptions = { queue: { adapter: 'manual' } },
  extras: DashboardAppExtras = {},
): Promise<DashboardApp> {
  await prepareDatabase(kind, extras.schema);
  const moduleRef = await Test.createTestingModule({
    imports: [
      TypeOrmModule.forRoot({ ...dataSourceOptions(kind), migrations: [], migrationsRun: false }),
      GenevaDriveModule.forRoot({ housekeeping: false, logger: engineLogger(), ...engine }),
      GenevaDriveDashboardModule.forRoot({ path: '/geneva', ...dashboard }),
    ],
    providers: [InvoiceFlow, ShippingFlow, FragileFlow, LoudFlow, ...(extras.providers ?? [])],
  })
    .setLogger(engineLogger())
    .compile();
  const app = moduleRef.createNestApplication({ logger: engineLogger() });
  await app.listen(0, '127.0.0.1');
  const dataSource = app.get<DataSource>(getDataSourceToken());
  return {
    app,
    url: (await app.getUrl()).replace('[::1]', '127.0.0.1'),
    dataSource,
    workflows: app.get(WorkflowService),
    signals: app.get(SignalService),
    close: () => app.close(),
    reset: () => truncateAll(dataSource),
  };
}

/** An InvoiceFlow parked at awaitPayment, driven on the manual queue. */
export async function parkedInvoice(d: DashboardApp, gd: GenevaDriveTesting, name = 'hero'): Promise<WorkflowRecord> {
  const workflow = await d.workflows.start(InvoiceFlow, await saveHero(d.dataSource, name));
  await gd.performNextStep(workflow);
  await gd.performNextStep(workflow);
  return workflow;
}

/** The CSRF cookie and the form's hidden field, as a browser gets them from the workflow page. */
export async function csrfFor(url: string, workflowId: string, auth: Record<string, string>, base = '/geneva'): Promise<{ cookie: string; token: string }> {
  const page = await request(url).get(`${base}/workflows/${workflowId}`).set(auth).expect(200);
  const cookie = String(page.headers['set-cookie']).split(';')[0];
  const token = /name="_csrf" value="([^"]+)"/.exec(page.text)![1];
  return { cookie, token };
}

export async function saveHero(dataSource: DataSource, name = 'hero'): Promise<TestHero> {
  return dataSource.getRepository(TestHero).save(dataSource.getRepository(TestHero).create({ name }));
}

/** How {@link insertChildren} makes each child, by its position. */
export interface ChildRows {
  state?: (index: number) => WorkflowState;
  key?: (index: number) => string;
  result?: (index: number) => unknown;
  stepName?: string;
}

/**
 * `count` InvoiceFlow children of `parent` written as rows, as a step's `this.startChild` writes them
 * (500 to a multi-row INSERT) but without running anything, and the parent marked as having children.
 * Returns their ids in id order.
 */
export async function insertChildren(dataSource: DataSource, parent: WorkflowRecord, count: number, rows: ChildRows = {}): Promise<string[]> {
  const now = new Date();
  for (let start = 0; start < count; start += 500) {
    const values = Array.from({ length: Math.min(500, count - start) }, (_, offset) => {
      const i = start + offset;
      const state = rows.state?.(i) ?? 'ready';
      return {
        type: 'InvoiceFlow',
        heroType: 'TestHero',
        heroId: `child-${parent.id}-${i}`,
        state,
        currentStepName: null,
        nextStepName: state === 'ready' ? 'prepare' : null,
        allowMultiple: false,
        parentId: parent.id,
        parentStepName: rows.stepName ?? 'fanOut',
        childKey: rows.key?.(i) ?? String(i),
        onParentCancel: 'cancel',
        hasChildren: null,
        result: rows.result?.(i) ?? null,
        startedAt: null,
        transitionedAt: null,
        finishedAt: null,
        createdAt: now,
        updatedAt: now,
      };
    });
    await dataSource.createQueryBuilder().insert().into(WorkflowRecord).values(values as never).updateEntity(false).execute();
  }
  await dataSource.getRepository(WorkflowRecord).update(parent.id, { hasChildren: true });
  const made = await dataSource.getRepository(WorkflowRecord).find({ select: { id: true }, where: { parentId: parent.id }, order: { id: 'ASC' } });
  return made.map((row) => row.id);
}
