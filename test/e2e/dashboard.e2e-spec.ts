/**
 * The dashboard over HTTP, on every database: mounting rules, the guard, CSRF and read-only mode,
 * the list filters and keyset pages, the workflow page, escaping, the typed errors of actions, the
 * "resume at step" action, removed steps (gravestones) in a workflow's steps and history, a
 * workflow's parent and children, and the concurrency keys executions wait for.
 */
import { Injectable, type CanActivate } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import request from 'supertest';
import type { EntitySubscriberInterface } from 'typeorm';
import { GenevaDriveModule, GenevaWorkflow, SignalService, Step, Workflow, WorkflowService, type WorkflowRecord } from 'geneva-drive';
import { EngineView } from '../../libs/geneva-drive/src/operator/engine-view.js';
import { DashboardUnguardedError, GenevaDriveDashboardModule } from 'geneva-drive/dashboard';
import { GenevaDriveTesting } from 'geneva-drive/testing';
import { createDashboardApp, csrfFor as csrfOf, insertChildren, parkedInvoice as parkInvoice, DASHBOARD_TOKEN, FragileFlow, InvoiceFlow, saveHero, type DashboardApp } from '../src/dashboard-app.js';
import { ChargeWorkflow, performHeld, slots } from '../src/concurrency-workflows.js';
import { InvoiceFlowBeforeDeploy, ShippingFlowBeforeDeploy } from '../src/deploy-check-workflows.js';
import { createTestApp, engineLogger } from '../src/test-app.js';
import { AddGenevaDriveListIndexes1730000000003 } from '../../libs/geneva-drive/src/migrations/index.js';
import { dataSourceOptions, describeEachDatabase, prepareDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const AUTH = { Authorization: `Bearer ${DASHBOARD_TOKEN}` };

/** A transactional step that signals `target` through its transaction, waits at `gate`, then throws: the signal is rolled back. */
const rollingBack = { target: '', reached: () => undefined as void, release: Promise.resolve() };
@Workflow({ name: 'RollingBackFlow', hero: () => TestHero })
class RollingBackFlow extends GenevaWorkflow<TestHero> {
  constructor(private readonly signals: SignalService) {
    super();
  }

  @Step({ transactional: true })
  async notify() {
    await this.signals.signal(rollingBack.target, 'payment_confirmed', { manager: this.manager });
    rollingBack.reached();
    await rollingBack.release;
    throw new Error('the notification is rolled back');
  }
}

const csrfFor = (d: DashboardApp, workflowId: string) => csrfOf(d.url, workflowId, AUTH);

describe('mounting the dashboard', () => {
  it('refuses forRoot without a guard, naming the way out', () => {
    expect(() => GenevaDriveDashboardModule.forRoot({ path: '/ops' })).toThrow(DashboardUnguardedError);
    expect(() => GenevaDriveDashboardModule.forRoot({ path: '/ops' })).toThrow(/at \/ops has no guard: pass guard .* or allowUnauthenticated: true/);
  });

  it('refuses forRootAsync without a guard at boot', async () => {
    const builder = Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({ ...dataSourceOptions('sqlite'), migrations: [] }),
        GenevaDriveModule.forRoot({ queue: { adapter: 'manual' }, housekeeping: false, logger: engineLogger() }),
        GenevaDriveDashboardModule.forRootAsync({ useFactory: () => ({ readOnly: true }) }),
      ],
    }).setLogger(engineLogger());
    await expect(builder.compile()).rejects.toThrow(DashboardUnguardedError);
  });

  it('refuses unknown options', () => {
    expect(() => GenevaDriveDashboardModule.forRoot({ allowUnauthenticated: true, readonly: true } as never)).toThrow(/Unknown GenevaDriveDashboardModule option\(s\): readonly/);
  });
});

describeEachDatabase('dashboard over HTTP', (kind) => {
  let d: DashboardApp;
  let gd: GenevaDriveTesting;

  beforeAll(async () => {
    // A small payload limit: Express's own body limit (100 kB) is below the default one.
    d = await createDashboardApp(kind, undefined, { queue: { adapter: 'manual' }, maxSignalPayloadSize: 2048 }, { providers: [RollingBackFlow] });
    gd = GenevaDriveTesting.create(d.app);
  });
  afterAll(() => d.close());
  beforeEach(() => d.reset());

  const parkedInvoice = (name?: string) => parkInvoice(d, gd, name);

  it('refuses requests the guard refuses, pages and API alike', async () => {
    await request(d.url).get('/geneva').expect(401);
    await request(d.url).get('/geneva/workflows').expect(401);
    await request(d.url).get('/geneva/api/overview').expect(401);
    await request(d.url).get('/geneva/assets/dashboard.css').expect(401);
    await request(d.url).get('/geneva').set(AUTH).expect(200);
  });

  it('refuses state-changing requests without the CSRF token, changing nothing', async () => {
    const workflow = await d.workflows.start(InvoiceFlow, await saveHero(d.dataSource));
    const { cookie, token } = await csrfFor(d, workflow.id);
    await request(d.url).post(`/geneva/workflows/${workflow.id}/pause`).set(AUTH).type('form').send({}).expect(403);
    await request(d.url).post(`/geneva/workflows/${workflow.id}/pause`).set(AUTH).set('Cookie', cookie).type('form').send({ _csrf: 'f'.repeat(64) }).expect(403);
    await request(d.url).post(`/geneva/workflows/${workflow.id}/pause`).set(AUTH).type('form').send({ _csrf: token }).expect(403); // no cookie
    await request(d.url).post(`/geneva/api/workflows/${workflow.id}/pause`).set(AUTH).send({}).expect(403);
    expect((await d.workflows.find(workflow.id)).state).toBe('ready');

    const done = await request(d.url).post(`/geneva/workflows/${workflow.id}/pause`).set(AUTH).set('Cookie', cookie).type('form').send({ _csrf: token }).expect(303);
    expect(done.headers.location).toBe(`/geneva/workflows/${workflow.id}?done=pause`);
    expect((await d.workflows.find(workflow.id)).state).toBe('paused');
    const api = await request(d.url).post(`/geneva/api/workflows/${workflow.id}/resume`).set(AUTH).set('Cookie', cookie).set('x-csrf-token', token).send({}).expect(201);
    expect(api.body.workflow.state).toBe('ready');
  });

  it('shows the overview: counts, gauges, failures and the longest waits', async () => {
    const parked = await parkedInvoice();
    const fragile = await d.workflows.start(FragileFlow, await saveHero(d.dataSource));
    await gd.performNextStep(fragile).catch(() => undefined);
    const page = await request(d.url).get('/geneva').set(AUTH).expect(200);
    expect(page.text).toContain('data-gauge="waiting">1<');
    expect(page.text).toMatch(/<td>InvoiceFlow<\/td><td>.*state=ready.*>1<\/a>/);
    expect(page.text).toContain('RangeError</b> &lt;b&gt;boom&lt;/b&gt; while charging');
    expect(page.text).toContain(`href="/geneva/workflows/${parked.id}">#${parked.id}</a></td><td>InvoiceFlow</td><td>awaitPayment`);
    const api = await request(d.url).get('/geneva/api/overview').set(AUTH).expect(200);
    expect(api.body.gauges.waiting).toEqual({ total: 1, byWorkflow: { InvoiceFlow: 1 } });
    expect(api.body.recentFailures).toEqual([expect.objectContaining({ workflowId: fragile.id, type: 'FragileFlow', stepName: 'explode', errorClassName: 'RangeError' })]);
  });

  it('filters the list and pages it by keyset', async () => {
    const parked = await parkedInvoice('parked');
    const fresh = await d.workflows.start(InvoiceFlow, await saveHero(d.dataSource, 'fresh'));
    const fragile = await d.workflows.start(FragileFlow, await saveHero(d.dataSource, 'fragile'));
    await gd.performNextStep(fragile).catch(() => undefined);
    const ids = async (query: Record<string, string>) => (await request(d.url).get('/geneva/api/workflows').query(query).set(AUTH).expect(200)).body.rows.map((row: { id: string }) => row.id);

    expect(await ids({})).toEqual([fragile.id, fresh.id, parked.id]);
    expect(await ids({ type: 'InvoiceFlow' })).toEqual([fresh.id, parked.id]);
    expect(await ids({ state: 'paused' })).toEqual([fragile.id]);
    expect(await ids({ type: 'InvoiceFlow', state: 'ready' })).toEqual([fresh.id, parked.id]);
    expect(await ids({ type: 'InvoiceFlow', state: 'ready', after: fresh.id })).toEqual([parked.id]);
    expect(await ids({ type: 'InvoiceFlow', state: 'ready', q: fresh.heroId })).toEqual([fresh.id]);
    expect(await ids({ type: 'InvoiceFlow', state: 'paused' })).toEqual([]);
    expect(await ids({ waitingFor: 'payment_confirmed' })).toEqual([parked.id]);
    expect(await ids({ failedStep: 'explode' })).toEqual([fragile.id]);
    expect(await ids({ heroType: 'TestHero', heroId: fresh.heroId })).toEqual([fresh.id]);
    expect(await ids({ q: parked.id })).toEqual([parked.id]);
    expect(await ids({ q: fresh.heroId })).toEqual([fresh.id]);
    expect(await ids({ q: 'no-such-thing' })).toEqual([]);
    expect(await ids({ createdFrom: new Date(Date.now() + 60_000).toISOString() })).toEqual([]);
    expect(await ids({ createdTo: new Date(Date.now() + 60_000).toISOString(), updatedFrom: '2000-01-01' })).toHaveLength(3);

    const first = await request(d.url).get('/geneva/api/workflows').query({ after: fragile.id }).set(AUTH).expect(200);
    expect(first.body.rows.map((row: { id: string }) => row.id)).toEqual([fresh.id, parked.id]);
    const html = await request(d.url).get('/geneva/workflows').query({ state: 'sleeping' }).set(AUTH).expect(400);
    expect(html.text).toContain('Invalid state &quot;sleeping&quot;: expected one of ready, performing, paused, finished, canceled');
    await request(d.url).get('/geneva/api/workflows').query({ createdFrom: 'yesterday' }).set(AUTH).expect(400);
  });

  it('filters by type and state on a database whose list indexes are not added yet', async () => {
    const older = await createDashboardApp(kind, { allowUnauthenticated: true });
    const runner = older.dataSource.createQueryRunner();
    await new AddGenevaDriveListIndexes1730000000003().down(runner);
    try {
      const fresh = await older.workflows.start(InvoiceFlow, await saveHero(older.dataSource, 'fresh'));
      const list = await request(older.url).get('/geneva/api/workflows').query({ type: 'InvoiceFlow', state: 'ready' }).expect(200);
      expect(list.body.rows.map((row: { id: string }) => row.id)).toEqual([fresh.id]);
    } finally {
      await new AddGenevaDriveListIndexes1730000000003().up(runner);
      await runner.release();
      await older.close();
    }
  });

  it('pages with a next link when there are more rows than a page', async () => {
    const small = await createDashboardApp(kind, { allowUnauthenticated: true, pageSize: 2 });
    try {
      const made: string[] = [];
      for (let i = 0; i < 5; i++) made.unshift((await small.workflows.start(InvoiceFlow, await saveHero(small.dataSource, `h${i}`))).id);
      const seen: string[] = [];
      let next: string | null = '/geneva/workflows';
      while (next) {
        const page: request.Response = await request(small.url).get(next).expect(200);
        seen.push(...[...page.text.matchAll(/data-workflow-id="([^"]+)"/g)].map((m) => m[1]));
        next = /<a rel="next" href="([^"]+)"/.exec(page.text)?.[1].replace(/&amp;/g, '&') ?? null;
      }
      expect(seen).toEqual(made);
    } finally {
      await small.close();
    }
  });

  it('shows a workflow: steps, executions, signals with their lifecycle, escaped payloads', async () => {
    const workflow = await parkedInvoice();
    await d.signals.signal(workflow, 'payment_confirmed', { payload: { note: '<script>alert(1)</script>' }, idempotencyKey: 'evt-1' });
    const page = await request(d.url).get(`/geneva/workflows/${workflow.id}`).set(AUTH).expect(200);
    expect(page.text).not.toContain('<script>alert(1)</script>');
    expect(page.text).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(page.text).toMatch(/<li class="done">prepare<\/li><li class="current">awaitPayment <span class="muted">waits for payment_confirmed<\/span><\/li><li class="upcoming">issueReceipt<\/li>/);
    expect(page.text).toContain('<dd id="hero">TestHero ');
    const api = await request(d.url).get(`/geneva/api/workflows/${workflow.id}`).set(AUTH).expect(200);
    expect(api.body.executions.map((e: { stepName: string; state: string }) => `${e.stepName}:${e.state}`)).toEqual(['prepare:completed', 'awaitPayment:scheduled']);
    const woken = api.body.executions[1];
    expect(api.body.signals).toEqual([
      expect.objectContaining({ name: 'payment_confirmed', idempotencyKey: 'evt-1', state: 'claimed', claimed: 1, consumed: 0, claimedBy: [woken.id] }),
    ]);
    expect(woken.signalId).toBe(api.body.signals[0].id);
    expect(api.body.signalNames).toEqual(['payment_confirmed']);
  });

  it("shows a workflow as one moment left it: a step's end committed while the page is read shows on none of its rows", async () => {
    const workflow = await parkedInvoice();
    await d.signals.signal(workflow, 'payment_confirmed'); // claimed, awaitPayment scheduled
    // awaitPayment's end (its signal consumed, issueReceipt scheduled, in one commit) goes as soon as
    // the page has read the executions; PostgreSQL and MySQL/MariaDB commit it before the page reads on.
    let ended: Promise<unknown> | undefined;
    const subscriber: EntitySubscriberInterface = {
      afterQuery: (event) => {
        if (ended || !/^SELECT .*FROM \W?geneva_drive_step_executions/s.test(event.query)) return;
        ended = gd.performNextStep(workflow);
        // SQLite: the page's reads hold the engine's turn, so the end waits for them (awaiting it would never end).
        return kind === 'sqlite' ? undefined : ended.then(() => undefined);
      },
    };
    d.dataSource.subscribers.push(subscriber);
    let api: { workflow: { state: string; nextStepName: string | null }; executions: Array<{ stepName: string; state: string }>; signals: Array<{ state: string }> };
    try {
      api = (await request(d.url).get(`/geneva/api/workflows/${workflow.id}`).set(AUTH).expect(200)).body;
    } finally {
      d.dataSource.subscribers.splice(d.dataSource.subscribers.indexOf(subscriber), 1);
    }
    await ended;

    expect([api.workflow.nextStepName, api.executions.map((e) => `${e.stepName}:${e.state}`), api.signals.map((s) => s.state)]).toEqual(['awaitPayment', ['prepare:completed', 'awaitPayment:scheduled'], ['claimed']]);
    const after = (await request(d.url).get(`/geneva/api/workflows/${workflow.id}`).set(AUTH).expect(200)).body;
    expect([after.executions.map((e: { state: string }) => e.state), after.signals.map((s: { state: string }) => s.state)]).toEqual([['completed', 'completed', 'scheduled'], ['consumed']]);
  });

  it("never shows what a transaction has not committed, SQLite's shared connection included: a signal a transactional step sent, then rolled back", async () => {
    const target = await parkedInvoice();
    let release!: () => void;
    const reached = new Promise<void>((resolve) => Object.assign(rollingBack, { target: target.id, reached: resolve, release: new Promise<void>((done) => (release = done)) }));
    const notifying = gd.performNextStep(await d.workflows.start(RollingBackFlow, await saveHero(d.dataSource, 'notifier'))).catch((error: unknown) => error);
    await reached; // the signal is written, claimed and its step woken, none of it committed
    // The body goes on (and rolls back) once the page has asked for its snapshot (SQLite: queued
    // after the body's transaction), or has answered when it asks for none. Only SQLite's one
    // connection could show the page the body's rows; the other databases never show them.
    const engine = d.app.get(EngineView);
    const snapshot = engine.snapshot.bind(engine);
    let began!: () => void;
    const reading = new Promise<void>((resolve) => (began = resolve));
    engine.snapshot = ((read) => {
      const page = snapshot(read);
      began();
      return page;
    }) as EngineView['snapshot'];
    try {
      const page = request(d.url).get(`/geneva/api/workflows/${target.id}`).set(AUTH).expect(200).then((response) => response.body);
      await Promise.race([reading, page]);
      release();
      const api = await page;
      expect(String(await notifying)).toMatch(/the notification is rolled back/);
      expect([api.executions.map((e: { stepName: string; state: string }) => `${e.stepName}:${e.state}`), api.signals]).toEqual([['prepare:completed', 'awaitPayment:waiting'], []]);
    } finally {
      engine.snapshot = snapshot;
    }
  });

  it("shows a workflow's parent and key, its children with their states and results, and the tree, escaped", async () => {
    const parent = await d.workflows.start(InvoiceFlow, await saveHero(d.dataSource, 'parent'));
    const states = ['finished', 'ready', 'canceled'] as const;
    const [first, second, third] = await insertChildren(d.dataSource, parent, 3, {
      state: (i) => states[i],
      key: (i) => (i === 0 ? '<b>k</b>' : `line-${i}`),
      result: (i) => (i === 0 ? { note: '<script>alert(1)</script>' } : null),
    });
    const [grandchild] = await insertChildren(d.dataSource, await d.workflows.find(first), 1, { stepName: 'split' });
    const shown = async (id: string) => (await request(d.url).get(`/geneva/workflows/${id}`).set(AUTH).expect(200)).text;

    const page = await shown(parent.id);
    expect(page).toContain('<h2 id="children">Children (3)</h2>');
    expect(page).toContain('<p class="child-counts"><span data-child-count="ready">1</span> ready, <span data-child-count="finished">1</span> finished, <span data-child-count="canceled">1</span> canceled</p>');
    expect([...page.matchAll(/data-child-id="([^"]+)" data-state="([^"]+)"/g)].map((m) => `${m[1]}:${m[2]}`)).toEqual([`${first}:finished`, `${second}:ready`, `${third}:canceled`]);
    expect(page).toContain(`<td><a href="/geneva/workflows/${first}">#${first}</a></td><td>InvoiceFlow</td><td>fanOut</td><td>&lt;b&gt;k&lt;/b&gt;</td><td><span class="state state-finished">finished</span></td>`);
    expect(page).toContain('<pre class="result">{\n  &quot;note&quot;: &quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;\n}</pre>');
    expect(page).not.toContain('<script>alert(1)</script>');
    expect(page.match(/class="grandchildren"/g)).toHaveLength(1);
    expect(page).toContain(`<a class="grandchildren" href="/geneva/workflows/${first}#children">its children →</a>`);
    expect(page).toContain('<ul class="tree" id="family"><li class="self"><b>InvoiceFlow #');
    expect(page).toContain('<a href="#children">3 children</a>: ');
    expect(page).not.toContain('<dd id="parent">');

    const child = await shown(first);
    expect(child).toContain(`<dd id="parent"><a href="/geneva/workflows/${parent.id}">#${parent.id}</a> <span class="muted">step</span> fanOut <span class="muted">key</span> <span id="child-key">&lt;b&gt;k&lt;/b&gt;</span></dd>`);
    expect(child).toContain(`<ul class="tree" id="family"><li><a href="/geneva/workflows/${parent.id}">#${parent.id}</a> InvoiceFlow <span class="state state-ready">ready</span><ul><li class="self"><b>InvoiceFlow #${first}</b> <span class="state state-finished">finished</span><ul><li><a href="#children">1 child</a>: <span data-child-count="ready">1</span> ready</li></ul></li></ul></li></ul>`);
    expect(child).toContain('<pre class="result" id="result">{\n  &quot;note&quot;: &quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;\n}</pre>');
    expect([...child.matchAll(/data-child-id="([^"]+)"/g)].map((m) => m[1])).toEqual([grandchild]);
    expect(await shown(grandchild)).toContain(`<dd id="parent"><a href="/geneva/workflows/${first}">#${first}</a> <span class="muted">step</span> split <span class="muted">key</span> <span id="child-key">0</span></dd>`);

    const api = (await request(d.url).get(`/geneva/api/workflows/${parent.id}`).set(AUTH).expect(200)).body;
    expect(api.parent).toBeNull();
    expect(api.childCounts).toEqual({ total: 3, byState: { canceled: 1, finished: 1, ready: 1 } });
    expect(api.childrenNextAfter).toBeNull();
    expect(api.children.map((c: { id: string; key: string; state: string; hasChildren: boolean }) => `${c.id}:${c.key}:${c.state}:${c.hasChildren}`)).toEqual([
      `${first}:<b>k</b>:finished:true`,
      `${second}:line-1:ready:false`,
      `${third}:line-2:canceled:false`,
    ]);
    expect(api.children[0].result).toEqual({ text: '{\n  "note": "<script>alert(1)</script>"\n}', truncated: false });
    const childApi = (await request(d.url).get(`/geneva/api/workflows/${first}`).set(AUTH).expect(200)).body;
    expect(childApi.parent).toEqual({ id: parent.id, type: 'InvoiceFlow', state: 'ready', stepName: 'fanOut', key: '<b>k</b>' });
    expect(childApi.workflow.result).toEqual({ text: '{\n  "note": "<script>alert(1)</script>"\n}', truncated: false });

    const later = (await request(d.url).get(`/geneva/api/workflows/${parent.id}`).query({ childrenAfter: first }).set(AUTH).expect(200)).body;
    expect(later.children.map((c: { id: string }) => c.id)).toEqual([second, third]);
    const bad = await request(d.url).get(`/geneva/workflows/${parent.id}`).query({ childrenAfter: 'x<y' }).set(AUTH).expect(400);
    expect(bad.text).toContain('Invalid childrenAfter &quot;x&lt;y&quot;');

    const alone = await shown((await d.workflows.start(InvoiceFlow, await saveHero(d.dataSource, 'alone'))).id);
    expect(alone).not.toContain('id="family"');
    expect(alone).not.toContain('id="children"');
  });

  it('resumes a paused workflow at a chosen step; without the token, from another origin or at a step the class lacks, nothing changes', async () => {
    const workflow = await parkedInvoice();
    expect((await request(d.url).get(`/geneva/workflows/${workflow.id}`).set(AUTH).expect(200)).text).not.toContain('resume-at');
    await d.workflows.pause(workflow);
    const parked = await d.workflows.currentExecution(workflow);
    const { cookie, token } = await csrfFor(d, workflow.id);
    const page = await request(d.url).get(`/geneva/workflows/${workflow.id}`).set(AUTH).set('Cookie', cookie).expect(200);
    expect(page.text).toContain(`<form class="resume-at-form" method="post" action="/geneva/workflows/${workflow.id}/resume-at"`);
    expect(page.text).toContain('<select name="step"><option>prepare</option><option selected>awaitPayment</option><option>issueReceipt</option></select>');
    const resumeAt = (step: string) => request(d.url).post(`/geneva/workflows/${workflow.id}/resume-at`).set(AUTH).set('Cookie', cookie).type('form');
    const unchanged = async () => {
      expect((await d.workflows.find(workflow.id)).state).toBe('paused');
      expect((await d.workflows.currentExecution(workflow))?.id).toBe(parked!.id);
    };

    await resumeAt('issueReceipt').send({ step: 'issueReceipt' }).expect(403);
    await resumeAt('issueReceipt').send({ step: 'issueReceipt', _csrf: 'f'.repeat(64) }).expect(403);
    await resumeAt('issueReceipt').set('Origin', 'http://evil.example').set('Sec-Fetch-Site', 'cross-site').send({ step: 'issueReceipt', _csrf: token }).expect(403);
    await unchanged();
    const bad = await resumeAt('sendFax').send({ step: 'sendFax', _csrf: token }).expect(400);
    expect(bad.text).toContain('<div class="message error" role="alert">Invalid step &quot;sendFax&quot;: expected one of prepare, awaitPayment, issueReceipt (the steps InvoiceFlow defines)</div>');
    const api = await request(d.url).post(`/geneva/api/workflows/${workflow.id}/resume-at`).set(AUTH).set('Cookie', cookie).set('x-csrf-token', token).send({}).expect(400);
    expect(api.body).toEqual({ statusCode: 400, error: 'DashboardInputError', message: 'Invalid step "": expected one of prepare, awaitPayment, issueReceipt (the steps InvoiceFlow defines)' });
    await unchanged();

    const done = await resumeAt('issueReceipt').send({ step: 'issueReceipt', _csrf: token }).expect(303);
    expect(done.headers.location).toBe(`/geneva/workflows/${workflow.id}?done=resume-at`);
    expect((await d.workflows.find(workflow.id)).state).toBe('ready');
    expect((await d.workflows.executionHistory(workflow)).map((e) => `${e.stepName}:${e.state}`)).toEqual(['prepare:completed', 'awaitPayment:canceled', 'issueReceipt:scheduled']);
    expect((await request(d.url).get(done.headers.location).set(AUTH).expect(200)).text).toContain('Workflow resumed at the chosen step.');
    const again = await request(d.url).post(`/geneva/api/workflows/${workflow.id}/resume-at`).set(AUTH).set('Cookie', cookie).set('x-csrf-token', token).send({ step: 'prepare' }).expect(201);
    expect(again.body.workflow).toMatchObject({ id: workflow.id, state: 'ready' });
    expect((await d.workflows.currentExecution(workflow))?.stepName).toBe('prepare');
  });

  it('shows removed steps: gravestones at their position in the step list, a badge on their executions', async () => {
    // The code before the deploy, on the same database, leaves a ShippingFlow at printLabel and an InvoiceFlow at sendFax.
    const before = await createTestApp(kind, [ShippingFlowBeforeDeploy, InvoiceFlowBeforeDeploy], { prepare: false });
    let shipping: WorkflowRecord;
    let invoice: WorkflowRecord;
    try {
      const workflows = before.moduleRef.get(WorkflowService);
      shipping = await workflows.start(ShippingFlowBeforeDeploy, await saveHero(d.dataSource, 'shipping'));
      invoice = await workflows.start(InvoiceFlowBeforeDeploy, await saveHero(d.dataSource, 'invoice'));
      for (const workflow of [shipping, invoice]) await before.gd.performNextStep(workflow);
    } finally {
      await before.close();
    }

    const shown = async (id: string) => (await request(d.url).get(`/geneva/workflows/${id}`).set(AUTH).expect(200)).text;
    const removedBadge = '<span class="badge badge-removed" title="declared in removedSteps: skipped, never run">removed</span>';
    const transactionalBadge = '<span class="badge" title="its writes through this.manager commit with its outcome">transactional</span>';
    const atLabel = await shown(shipping.id);
    expect(atLabel).toContain(`<ol class="steps"><li class="done">pack</li><li class="current removed">printLabel ${removedBadge}</li><li class="upcoming">ship ${transactionalBadge}</li></ol>`);
    expect(atLabel).toMatch(new RegExp(`<td>\\d+</td><td>printLabel ${removedBadge}</td><td><span class="state state-scheduled">`));
    await gd.performNextStep(shipping); // the gravestone's execution is skipped; ship comes next
    const afterSkip = await shown(shipping.id);
    expect(afterSkip).toMatch(new RegExp(`<td>printLabel ${removedBadge}</td><td><span class="state state-skipped">skipped</span></td>`));
    expect(afterSkip).toContain(`<li class="current">ship ${transactionalBadge}</li>`);
    const api = await request(d.url).get(`/geneva/api/workflows/${shipping.id}`).set(AUTH).expect(200);
    expect(api.body.steps.map((step: { name: string; removed: boolean; transactional: boolean }) => `${step.name}${step.removed ? ' (removed)' : ''}${step.transactional ? ' (transactional)' : ''}`)).toEqual([
      'pack',
      'printLabel (removed)',
      'ship (transactional)',
    ]);
    expect(api.body.executions.map((e: { stepName: string; stepStatus: string }) => `${e.stepName}:${e.stepStatus}`)).toEqual(['pack:defined', 'printLabel:removed', 'ship:defined']);

    const atFax = await shown(invoice.id);
    expect(atFax).toContain('<td>sendFax <span class="badge badge-not-defined" title="neither defined nor declared removed by the class">not defined</span></td>');
    // Stranded: resume refuses it (a conflict, not a server error); resume-at moves it.
    await d.workflows.pause(invoice);
    const { cookie, token } = await csrfFor(d, invoice.id);
    const post = (action: string, body: Record<string, string> = {}) =>
      request(d.url).post(`/geneva/workflows/${invoice.id}/${action}`).set(AUTH).set('Cookie', cookie).type('form').send({ _csrf: token, ...body });
    expect((await post('resume').expect(409)).text).toContain('Step &quot;sendFax&quot; is not defined in workflow InvoiceFlow');
    await post('resume-at', { step: 'awaitPayment' }).expect(303);
    expect((await d.workflows.currentExecution(invoice))?.stepName).toBe('awaitPayment');
  });

  it('answers the typed errors of actions as messages', async () => {
    const workflow = await parkedInvoice();
    const { cookie, token } = await csrfFor(d, workflow.id);
    const post = (path: string, body: Record<string, string>) => request(d.url).post(`/geneva/workflows/${workflow.id}/${path}`).set(AUTH).set('Cookie', cookie).type('form').send({ _csrf: token, ...body });

    const resume = await post('resume', {}).expect(409);
    expect(resume.text).toContain(`<div class="message error" role="alert">Cannot resume a ready workflow (workflow ${workflow.id})</div>`);
    expect((await post('signal', { name: 'payment_confirmed', payload: '{not json' }).expect(400)).text).toContain('Invalid payload &quot;{not json&quot;: expected JSON');
    expect((await post('signal', { name: 'shipped', payload: '{}' }).expect(400)).text).toContain('expected one of payment_confirmed');
    expect((await post('signal', { name: 'payment_confirmed', payload: JSON.stringify({ blob: 'x'.repeat(3000) }) }).expect(413)).text).toContain('over maxSignalPayloadSize');
    expect(await d.signals.list(workflow)).toEqual([]);
    await post('cancel', {}).expect(303);
    expect((await post('signal', { name: 'payment_confirmed', payload: '{}' }).expect(409)).text).toContain('Cannot deliver signal &quot;payment_confirmed&quot; to a canceled workflow');
    const api = await request(d.url).post(`/geneva/api/workflows/${workflow.id}/skip`).set(AUTH).set('Cookie', cookie).set('x-csrf-token', token).send({}).expect(409);
    expect(api.body).toEqual({ statusCode: 409, error: 'InvalidStateError', message: `Cannot skip a canceled workflow (workflow ${workflow.id})` });
    await request(d.url).get('/geneva/workflows/999999').set(AUTH).expect(404);
    await request(d.url).get('/geneva/api/workflows/999999').set(AUTH).expect(404);
  });
});

describeEachDatabase('dashboard: concurrency keys', (kind) => {
  let d: DashboardApp;
  let gd: GenevaDriveTesting;

  beforeAll(async () => {
    d = await createDashboardApp(kind, undefined, undefined, { providers: [ChargeWorkflow] });
    gd = GenevaDriveTesting.create(d.app);
  });
  afterAll(() => d.close());
  beforeEach(async () => {
    await d.reset();
    slots.reset();
  });

  const charge = async (key: string) => {
    const hero = await saveHero(d.dataSource, key);
    return { hero, workflow: await d.workflows.start(ChargeWorkflow, hero) };
  };
  const page = async (path: string) => (await request(d.url).get(`/geneva${path}`).set(AUTH).expect(200)).text;
  const api = async (path: string) => (await request(d.url).get(`/geneva/api${path}`).set(AUTH).expect(200)).body;

  it("lists the keys with waiters, most waiters first, escaped; a workflow's executions show the key they hold or wait for", async () => {
    expect(await page('')).toContain('<a href="/geneva/flow-keys">Concurrency keys</a>');
    expect(await page('/flow-keys')).toContain('<td colspan="5" class="muted">No key has waiters.</td>');
    // An HTML-like key with accents (VARBINARY on MySQL/MariaDB, read back as text); another with fewer waiters.
    const key = '<b>Zoë</b>';
    const [a, b, c, other, late] = [await charge(key), await charge(key), await charge(key), await charge('other'), await charge('other')];
    const held = [await performHeld(gd, a), await performHeld(gd, other)];
    for (const waiter of [b, c, late]) await gd.performNextStep(waiter.workflow);
    const waitingB = (await d.workflows.currentExecution(b.workflow))!;
    const waitingLate = (await d.workflows.currentExecution(late.workflow))!;

    const listed = await page('/flow-keys');
    expect([...listed.matchAll(/<tr data-flow-key="([^"]*)"><td>[^]*?<\/td><td>(\d+)<\/td><td>(\d+)<\/td>/g)].map((m) => [m[1], m[2], m[3]])).toEqual([
      ['&lt;b&gt;Zoë&lt;/b&gt;', '1', '2'],
      ['other', '1', '1'],
    ]);
    expect(listed).toContain(`<td>&lt;b&gt;Zoë&lt;/b&gt;</td><td>1</td><td>2</td><td><time datetime="${waitingB.scheduledFor.toISOString()}">`);
    expect(listed).not.toContain('<b>Zoë</b>');
    const json = await api('/flow-keys');
    expect(json).toEqual({
      flowControl: true,
      more: false,
      keys: [
        { key, holding: 1, waiting: 2, oldestWaiterDueAt: waitingB.scheduledFor.toISOString(), oldestWaitMs: expect.any(Number) },
        { key: 'other', holding: 1, waiting: 1, oldestWaiterDueAt: waitingLate.scheduledFor.toISOString(), oldestWaitMs: expect.any(Number) },
      ],
    });
    expect(json.keys[0].oldestWaitMs).toBeGreaterThanOrEqual(0);

    const escapedKey = '&lt;b&gt;Zoë&lt;/b&gt;';
    expect(await page(`/workflows/${b.workflow.id}`)).toContain(`<td><span class="flow-key waiting">waiting for a slot of ${escapedKey}</span></td>`);
    expect(await page(`/workflows/${a.workflow.id}`)).toMatch(new RegExp(`data-state="in_progress">[^]*<td><span class="flow-key">${escapedKey}</span></td>`));
    expect((await api(`/workflows/${b.workflow.id}`)).executions.map((e: { state: string; flowKey: string | null }) => [e.state, e.flowKey])).toEqual([['scheduled', key]]);

    // Every holder ends and every waiter runs: no key is waited for; the executions keep the key they held.
    for (const hold of held) await hold.release();
    for (const waiter of [b, c, late]) expect(await gd.performNextStep(waiter.workflow)).toMatchObject({ state: 'completed' });
    expect(await page('/flow-keys')).toContain('No key has waiters.');
    expect((await api('/flow-keys')).keys).toEqual([]);
    const done = await api(`/workflows/${b.workflow.id}`);
    expect(done.executions.map((e: { stepName: string; state: string; flowKey: string | null }) => [e.stepName, e.state, e.flowKey])).toEqual([
      ['charge', 'completed', key],
      ['receipt', 'scheduled', null],
    ]);
    expect(await page(`/workflows/${b.workflow.id}`)).toContain(`<td><span class="flow-key">${escapedKey}</span></td>`);
  });

  it('without the flow-control migration: the keys page says so, and a workflow\'s page shows its executions with no key', async () => {
    const older = await createDashboardApp(kind, { allowUnauthenticated: true }, undefined, { providers: [ChargeWorkflow], schema: { withoutFlowControl: true } });
    try {
      const workflow = await older.workflows.start(InvoiceFlow, await saveHero(older.dataSource, 'older'));
      const keys = await request(older.url).get('/geneva/flow-keys').expect(200);
      expect(keys.text).toContain('<p class="muted" id="flow-control-missing">The flow-control migration has not run');
      expect((await request(older.url).get('/geneva/api/flow-keys').expect(200)).body).toEqual({ flowControl: false, keys: [], more: false });
      const shown = await request(older.url).get(`/geneva/workflows/${workflow.id}`).expect(200);
      expect(shown.text).toContain(`<tr data-execution-id="${(await older.workflows.currentExecution(workflow))!.id}" data-state="scheduled">`);
      const detail = (await request(older.url).get(`/geneva/api/workflows/${workflow.id}`).expect(200)).body;
      expect(detail.executions.map((e: { stepName: string; flowKey: string | null }) => [e.stepName, e.flowKey])).toEqual([['prepare', null]]);
    } finally {
      await older.close();
      await prepareDatabase(kind); // the schema the other tests of this file expect
    }
  });
});

describeEachDatabase('dashboard, read-only', (kind) => {
  let d: DashboardApp;
  beforeAll(async () => {
    @Injectable()
    class AllowAll implements CanActivate {
      canActivate() {
        return true;
      }
    }
    d = await createDashboardApp(kind, { guard: AllowAll, readOnly: true });
  });
  afterAll(() => d.close());

  it('hides every action and refuses state-changing requests', async () => {
    const workflow = await d.workflows.start(InvoiceFlow, await saveHero(d.dataSource));
    const page = await request(d.url).get(`/geneva/workflows/${workflow.id}`).expect(200);
    expect(page.text).toContain('prepare');
    expect(page.text).not.toContain('method="post"');
    const cookie = String(page.headers['set-cookie'] ?? '').split(';')[0];
    const refused = await request(d.url).post(`/geneva/workflows/${workflow.id}/cancel`).set('Cookie', cookie).type('form').send({}).expect(403);
    expect(refused.body.message).toBe('The dashboard is read-only');
    expect((await d.workflows.find(workflow.id)).state).toBe('ready');
  });
});
