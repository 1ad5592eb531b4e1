/**
 * The dashboard over HTTP against what an attacker sends, on every database: planted and borrowed
 * CSRF tokens, cross-origin posts, malformed cookies, the security headers, the root mount, hostile
 * list filters and signal fields (each a 4xx with a message, never a 500, nothing written), and a
 * workflow page that stays small however many signals the workflow has, and reads and renders as
 * much (so takes as long) however large their payloads, or however many children the workflow has.
 */
import { Injectable, UnauthorizedException, type CanActivate, type ExecutionContext } from '@nestjs/common';
import request from 'supertest';
import type { DataSource, QueryRunner } from 'typeorm';
import { GenevaWorkflow, SignalMatcher, Step, StepExecution, Workflow } from 'geneva-drive';
import { DashboardPathError, GenevaDriveDashboardModule } from 'geneva-drive/dashboard';
import { GenevaDriveTesting } from 'geneva-drive/testing';
import { createDashboardApp, csrfFor, insertChildren, parkedInvoice as parkInvoice, DASHBOARD_TOKEN, InvoiceFlow, LoudFlow, saveHero, TokenGuard, type DashboardApp } from '../src/dashboard-app.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const AUTH = { Authorization: `Bearer ${DASHBOARD_TOKEN}` };

/** The headers every dashboard response carries (security-headers.ts). */
function expectSecurityHeaders(response: { headers: Record<string, string | undefined> }): void {
  expect(response.headers['content-security-policy']).toBe("default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'");
  expect(response.headers['x-frame-options']).toBe('DENY');
  expect(response.headers['x-content-type-options']).toBe('nosniff');
  expect(response.headers['referrer-policy']).toBe('same-origin');
}

/** The size of what a query returned: strings by their UTF-8 bytes, buffers by their length, any other value 8. */
function sizeOf(value: unknown): number {
  if (value === null || value === undefined) return 0;
  if (typeof value === 'string') return Buffer.byteLength(value);
  if (Buffer.isBuffer(value)) return value.length;
  if (Array.isArray(value)) return value.reduce((sum: number, item) => sum + sizeOf(item), 0);
  if (typeof value === 'object' && !(value instanceof Date)) return Object.values(value).reduce((sum: number, item) => sum + sizeOf(item), 0);
  return 8;
}

/** How many bytes the database returned to the queries `dataSource` ran while `work` ran (every query goes through a query runner). */
async function bytesRead(dataSource: DataSource, work: () => Promise<void>): Promise<number> {
  return (await reads(dataSource, work)).bytes;
}

/** What the database returned to the queries `dataSource` ran while `work` ran: bytes, rows (of the statements that return rows), statements. */
async function reads(dataSource: DataSource, work: () => Promise<void>): Promise<{ bytes: number; rows: number; statements: number }> {
  let bytes = 0;
  let rows = 0;
  let statements = 0;
  const driver = dataSource.driver;
  const create = driver.createQueryRunner;
  const wrapped = new Set<QueryRunner>();
  driver.createQueryRunner = function (this: unknown, ...args: Parameters<typeof create>) {
    const runner = create.apply(this, args);
    if (!wrapped.has(runner)) {
      wrapped.add(runner); // SQLite's driver hands out one runner again and again
      const query = runner.query;
      runner.query = async function (this: QueryRunner, ...queryArgs: Parameters<typeof query>) {
        const result = await query.apply(this, queryArgs);
        const records = (result as { records?: unknown } | undefined)?.records ?? result;
        bytes += sizeOf(records);
        if (Array.isArray(records)) rows += records.length;
        statements++;
        return result;
      } as typeof query;
    }
    return runner;
  };
  try {
    await work();
  } finally {
    driver.createQueryRunner = create;
    for (const runner of wrapped) delete (runner as Partial<QueryRunner>).query;
  }
  return { bytes, rows, statements };
}

/** Lets in two operators, each with a token of their own. */
@Injectable()
class TwoOperatorsGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const header = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>().headers.authorization;
    if (header === 'Bearer alice-token' || header === 'Bearer bob-token') return true;
    throw new UnauthorizedException('An operator token is required');
  }
}

/** Authenticates by a session cookie of the application's own and leaves the operator on `request.user`, as passport does. */
@Injectable()
class SessionGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined>; user?: unknown }>();
    const session = /(?:^|; )session=(alice|bob)(?:;|$)/.exec(request.headers.cookie ?? '');
    if (!session) throw new UnauthorizedException('Sign in first');
    request.user = { id: session[1] };
    return true;
  }
}

describe('CSRF tokens bound to request.user', () => {
  let d: DashboardApp;
  beforeAll(async () => {
    d = await createDashboardApp('sqlite', { guard: new SessionGuard() });
  });
  afterAll(() => d.close());

  it('refuses a token issued to another user, accepts the user’s own', async () => {
    const workflow = await d.workflows.start(InvoiceFlow, await saveHero(d.dataSource));
    const bob = await csrfFor(d.url, workflow.id, { Cookie: 'session=bob' });
    const alice = await csrfFor(d.url, workflow.id, { Cookie: 'session=alice' });
    const pause = (cookie: string, token: string) => request(d.url).post(`/geneva/workflows/${workflow.id}/pause`).set('Cookie', `session=alice; ${cookie}`).type('form').send({ _csrf: token });
    await pause(bob.cookie, bob.token).expect(403);
    expect((await d.workflows.find(workflow.id)).state).toBe('ready');
    await pause(alice.cookie, alice.token).expect(303);
    expect((await d.workflows.find(workflow.id)).state).toBe('paused');
  });
});

describe('mount path', () => {
  it.each(['/\\evil.com', 'a//b', '/ops/%2e%2e', '/ops/..', './ops', 'ops panel', '/geneva?x=1', '"/><script>'])('refuses %j at declaration with DashboardPathError', (path) => {
    expect(() => GenevaDriveDashboardModule.forRoot({ path, allowUnauthenticated: true })).toThrow(DashboardPathError);
  });
});

describeEachDatabase('dashboard under attack, over HTTP', (kind) => {
  let d: DashboardApp;
  let gd: GenevaDriveTesting;

  beforeAll(async () => {
    d = await createDashboardApp(kind, { guard: new TwoOperatorsGuard(), pageSize: 3 });
    gd = GenevaDriveTesting.create(d.app);
  });
  afterAll(() => d.close());
  beforeEach(() => d.reset());

  const ALICE = { Authorization: 'Bearer alice-token' };
  const BOB = { Authorization: 'Bearer bob-token' };
  const parkedInvoice = (name?: string) => parkInvoice(d, gd, name);

  it('refuses a planted token, one issued to another operator, and a cross-origin post; the operator’s own goes through', async () => {
    const workflow = await d.workflows.start(InvoiceFlow, await saveHero(d.dataSource));
    const pause = () => request(d.url).post(`/geneva/workflows/${workflow.id}/pause`).type('form');

    // Tossed from a sibling origin: any value in both the cookie and the field.
    await pause().set(ALICE).set('Cookie', 'geneva_drive_csrf=tossed').send({ _csrf: 'tossed' }).expect(403);
    const forged = `${'0'.repeat(32)}.${'A'.repeat(43)}`;
    await pause().set(ALICE).set('Cookie', `geneva_drive_csrf=${forged}`).send({ _csrf: forged }).expect(403);
    // Bob's genuine token, planted in Alice's browser.
    const bob = await csrfFor(d.url, workflow.id, BOB);
    await pause().set(ALICE).set('Cookie', bob.cookie).send({ _csrf: bob.token }).expect(403);
    // Alice's own token, but the browser says the post comes from another origin of the same site.
    const alice = await csrfFor(d.url, workflow.id, ALICE);
    const crossSite = await pause().set(ALICE).set('Cookie', alice.cookie).set('Sec-Fetch-Site', 'same-site').set('Origin', 'http://evil.127.0.0.1.nip.io').send({ _csrf: alice.token }).expect(403);
    expect(crossSite.body.message).toContain('another origin');
    await pause().set(ALICE).set('Cookie', alice.cookie).set('Origin', 'http://127.0.0.1:1').send({ _csrf: alice.token }).expect(403);
    await pause().set(ALICE).set('Cookie', alice.cookie).set('Origin', 'null').send({ _csrf: alice.token }).expect(403);
    expect((await d.workflows.find(workflow.id)).state).toBe('ready');

    // A planted cookie sent first does not hide the operator's own.
    const host = new URL(d.url).host;
    await pause().set(ALICE).set('Cookie', `geneva_drive_csrf=tossed; ${alice.cookie}`).set('Sec-Fetch-Site', 'same-origin').set('Origin', `http://${host}`).send({ _csrf: alice.token }).expect(303);
    expect((await d.workflows.find(workflow.id)).state).toBe('paused');
  });

  it('answers malformed CSRF cookies 403, not 500, and hands out a fresh token', async () => {
    const workflow = await d.workflows.start(InvoiceFlow, await saveHero(d.dataSource));
    for (const cookie of ['geneva_drive_csrf=%', 'geneva_drive_csrf=%C3%A9', 'geneva_drive_csrf=é'.normalize(), `geneva_drive_csrf=${'x'.repeat(4000)}`]) {
      await request(d.url).post(`/geneva/workflows/${workflow.id}/pause`).set(ALICE).set('Cookie', cookie).type('form').send({ _csrf: '%' }).expect(403);
      await request(d.url).post(`/geneva/api/workflows/${workflow.id}/pause`).set(ALICE).set('Cookie', cookie).set('x-csrf-token', '%C3%A9').send({}).expect(403);
      const page = await request(d.url).get(`/geneva/workflows/${workflow.id}`).set(ALICE).set('Cookie', cookie).expect(200);
      expect(String(page.headers['set-cookie'])).toMatch(/^geneva_drive_csrf=[0-9a-f]{32}\.[\w-]{43}; Path=\/geneva; HttpOnly; SameSite=Strict$/);
      const api = await request(d.url).get('/geneva/api/csrf').set(ALICE).set('Cookie', cookie).expect(200);
      expect(api.body.token).toMatch(/^[0-9a-f]{32}\.[\w-]{43}$/);
    }
    expect((await d.workflows.find(workflow.id)).state).toBe('ready');
  });

  it('sends the security headers on pages, assets, the API and refusals', async () => {
    const workflow = await d.workflows.start(InvoiceFlow, await saveHero(d.dataSource));
    const responses = [
      await request(d.url).get('/geneva').set(ALICE).expect(200),
      await request(d.url).get(`/geneva/workflows/${workflow.id}`).set(ALICE).expect(200),
      await request(d.url).get('/geneva/assets/dashboard.js').set(ALICE).expect(200),
      await request(d.url).get('/geneva/api/workflows').set(ALICE).expect(200),
      await request(d.url).get('/geneva').expect(401),
      await request(d.url).post(`/geneva/workflows/${workflow.id}/pause`).set(ALICE).expect(403),
    ];
    for (const response of responses) expectSecurityHeaders(response);
  });

  it("sends them on Nest's own answers under the mount too: an unknown path, a method no route has, a parameter that does not decode", async () => {
    const responses = [
      await request(d.url).get('/geneva/nope').set(ALICE).expect(404),
      await request(d.url).get('/geneva/nope').expect(404),
      await request(d.url).get('/geneva/assets/nope.js').expect(404),
      await request(d.url).delete('/geneva/workflows/1').set(ALICE).expect(404),
      await request(d.url).get('/geneva/workflows/%E0%A4%A').set(ALICE).expect(400),
      await request(d.url).get('/geneva/api/workflows/%E0%A4%A/signals/%ff').expect(400),
      // Refused by the body parser before any route: malformed JSON, a body over its limit.
      await request(d.url).post('/geneva/api/workflows/1/pause').set(ALICE).set('content-type', 'application/json').send('{"x":').expect(400),
      await request(d.url).post('/geneva/api/workflows/1/pause').set(ALICE).set('content-type', 'application/json').send(JSON.stringify({ x: 'y'.repeat(2_000_000) })).expect(413),
    ];
    expect(responses[4].text).toContain('Failed to decode param');
    for (const response of responses) expectSecurityHeaders(response);
    // The application's own paths are its own: a sibling whose name starts like the mount's, too.
    for (const path of ['/elsewhere', '/genevan', '/geneva-other/x']) {
      expect((await request(d.url).get(path).expect(404)).headers['content-security-policy']).toBeUndefined();
      expect((await request(d.url).post(path).set('content-type', 'application/json').send('{"x":').expect(400)).headers['content-security-policy']).toBeUndefined();
    }
  });

  it('makes the CSRF cookie __Host- and Secure when the request is secure (behind a trusted TLS proxy)', async () => {
    const workflow = await d.workflows.start(InvoiceFlow, await saveHero(d.dataSource));
    d.app.getHttpAdapter().getInstance().set('trust proxy', 'loopback');
    try {
      const page = await request(d.url).get(`/geneva/workflows/${workflow.id}`).set(ALICE).set('X-Forwarded-Proto', 'https').expect(200);
      expect(String(page.headers['set-cookie'])).toMatch(/^__Host-geneva_drive_csrf=[0-9a-f]{32}\.[\w-]{43}; Path=\/; Secure; HttpOnly; SameSite=Strict$/);
      const cookie = String(page.headers['set-cookie']).split(';')[0];
      const token = /name="_csrf" value="([^"]+)"/.exec(page.text)![1];
      // The plain-HTTP cookie name is not accepted over HTTPS: a plain-HTTP page could have set it.
      await request(d.url).post(`/geneva/workflows/${workflow.id}/pause`).set(ALICE).set('X-Forwarded-Proto', 'https').set('Cookie', `geneva_drive_csrf=${token}`).type('form').send({ _csrf: token }).expect(403);
      await request(d.url).post(`/geneva/workflows/${workflow.id}/pause`).set(ALICE).set('X-Forwarded-Proto', 'https').set('Cookie', cookie).type('form').send({ _csrf: token }).expect(303);
    } finally {
      d.app.getHttpAdapter().getInstance().set('trust proxy', false);
    }
  });

  it('answers hostile list filters 400 with a message, the same on every database', async () => {
    await d.workflows.start(InvoiceFlow, await saveHero(d.dataSource));
    const cases: Array<[Record<string, string>, string]> = [
      [{ type: 'Invoice\u0000Flow' }, 'Invalid type'],
      [{ heroId: '\u0000' }, 'Invalid heroId'],
      [{ q: 'a\u0000b' }, 'Invalid q'],
      [{ failedStep: '\u001b[2J' }, 'Invalid failedStep'],
      [{ waitingFor: 'x'.repeat(300) }, 'at most 255 characters'],
      [{ after: '99999999999999999999' }, 'Invalid after'],
      [{ after: '9223372036854775808' }, 'Invalid after'],
      [{ after: '0195b6a8-8f5e-7d4b-9c3a-2f1e0d9c8b7a' }, 'Invalid after'],
      [{ after: '1 OR 1=1' }, 'Invalid after'],
      [{ createdFrom: '-271821-04-20T00:00:00Z' }, 'Invalid createdFrom'],
      [{ updatedTo: '+275760-09-13T00:00:00Z' }, 'Invalid updatedTo'],
      [{ createdTo: 'not a date' }, 'Invalid createdTo'],
    ];
    for (const [query, message] of cases) {
      const api = await request(d.url).get('/geneva/api/workflows').query(query).set(ALICE);
      expect({ query, status: api.status }).toEqual({ query, status: 400 });
      expect(api.body).toMatchObject({ statusCode: 400, error: 'DashboardInputError' });
      expect(api.body.message).toContain(message);
      const page = await request(d.url).get('/geneva/workflows').query(query).set(ALICE);
      expect({ query, status: page.status }).toEqual({ query, status: 400 });
    }
    // The edges that are fine.
    await request(d.url).get('/geneva/api/workflows').query({ after: '9223372036854775807', createdFrom: '0001-01-01T00:00:00Z', updatedTo: '9999-12-31T23:59:59Z' }).set(ALICE).expect(200);
  });

  it('answers signal fields the engine refuses 400 with a message, form and API alike, writing nothing', async () => {
    const workflow = await parkedInvoice();
    const { cookie, token } = await csrfFor(d.url, workflow.id, ALICE);
    const deep = `${'['.repeat(150)}${']'.repeat(150)}`;
    const cases: Array<[Record<string, string>, string]> = [
      [{ idempotencyKey: 'k'.repeat(256) }, 'over the limit of 255 bytes'],
      [{ idempotencyKey: 'a\u0000b' }, 'must not contain a NUL character'],
      [{ idempotencyKey: 'a\uD800b' }, 'must not contain a lone UTF-16 surrogate'],
      [{ payload: `{"deep": ${deep}}` }, 'nests deeper than 100 objects and arrays'],
    ];
    for (const [fields, message] of cases) {
      // JSON.stringify writes a lone surrogate as the escape \ud800: the body carries it as sent.
      const body = JSON.stringify({ _csrf: token, name: 'payment_confirmed', payload: '{}', ...fields });
      const form = await request(d.url).post(`/geneva/workflows/${workflow.id}/signal`).set(ALICE).set('Cookie', cookie).set('content-type', 'application/json').send(body);
      expect({ fields: Object.keys(fields), status: form.status }).toEqual({ fields: Object.keys(fields), status: 400 });
      expect(form.text).toContain(message);
      const api = await request(d.url).post(`/geneva/api/workflows/${workflow.id}/signal`).set(ALICE).set('Cookie', cookie).set('x-csrf-token', token).set('content-type', 'application/json').send(body);
      expect({ fields: Object.keys(fields), status: api.status }).toEqual({ fields: Object.keys(fields), status: 400 });
      expect(api.body.message).toContain(message);
    }
    // JSON values that are not strings are refused, never dropped: a numeric key ignored would let every retry deliver again.
    for (const [fields, message] of [
      [{ idempotencyKey: 42 }, 'Invalid idempotencyKey "42": expected a string'],
      [{ name: ['payment_confirmed'] }, 'Invalid name "[\\"payment_confirmed\\"]": expected a string'],
    ] as Array<[Record<string, unknown>, string]>) {
      const api = await request(d.url).post(`/geneva/api/workflows/${workflow.id}/signal`).set(ALICE).set('Cookie', cookie).set('x-csrf-token', token).send({ name: 'payment_confirmed', ...fields });
      expect({ fields, status: api.status, message: api.body.message }).toEqual({ fields, status: 400, message });
    }
    const resumeAt = await request(d.url).post(`/geneva/api/workflows/${workflow.id}/resume-at`).set(ALICE).set('Cookie', cookie).set('x-csrf-token', token).send({ step: 1 });
    expect({ status: resumeAt.status, message: resumeAt.body.message }).toEqual({ status: 400, message: 'Invalid step "1": expected a string' });
    const urlEncoded = await request(d.url).post(`/geneva/workflows/${workflow.id}/signal`).set(ALICE).set('Cookie', cookie).type('form').send(`_csrf=${encodeURIComponent(token)}&name=payment_confirmed&payload=%7B%7D&idempotencyKey=a%00b`);
    expect(urlEncoded.status).toBe(400);
    expect(await d.signals.list(workflow)).toEqual([]);
  });

  it('pages a workflow’s signals and executions, and cuts large payloads to a preview with a link to the whole value', async () => {
    const workflow = await parkedInvoice();
    const big = { blob: 'z'.repeat(10_000) };
    for (let i = 0; i < 7; i++) await d.signals.signal(workflow, 'payment_confirmed', { payload: i === 0 ? big : { i }, idempotencyKey: `evt-${i}` });
    const all = await d.signals.list(workflow);

    const first = await request(d.url).get(`/geneva/api/workflows/${workflow.id}`).set(ALICE).expect(200);
    expect(first.body.signals.map((s: { id: string }) => s.id)).toEqual(all.slice(0, 3).map((s) => s.id));
    expect(first.body.signals[0].payload.truncated).toBe(true);
    expect(first.body.signals[0].payload.text.length).toBeLessThan(2_100);
    expect(first.body.signals[1].payload).toEqual({ text: '{\n  "i": 1\n}', truncated: false });
    const second = await request(d.url).get(`/geneva/api/workflows/${workflow.id}`).query({ signalsAfter: first.body.signalsNextAfter }).set(ALICE).expect(200);
    expect(second.body.signals.map((s: { id: string }) => s.id)).toEqual(all.slice(3, 6).map((s) => s.id));
    const whole = await request(d.url).get(`/geneva/api/workflows/${workflow.id}/signals/${all[0].id}`).set(ALICE).expect(200);
    expect(whole.body.signal.payload).toEqual(big);
    await request(d.url).get(`/geneva/api/workflows/${workflow.id}/signals/999999`).set(ALICE).expect(404);
    await request(d.url).get(`/geneva/api/workflows/${workflow.id}`).query({ signalsAfter: 'x' }).set(ALICE).expect(400);

    const page = await request(d.url).get(`/geneva/workflows/${workflow.id}`).set(ALICE).expect(200);
    expect(page.text.match(/data-signal-id=/g)).toHaveLength(3);
    expect(page.text).toContain(`<a class="full-value" href="/geneva/api/workflows/${workflow.id}/signals/${all[0].id}">full payload</a>`);
    const next = /<a id="next-signals" href="([^"]+)"/.exec(page.text)![1].replace(/&amp;/g, '&');
    const nextPage = await request(d.url).get(next).set(ALICE).expect(200);
    expect([...nextPage.text.matchAll(/data-signal-id="([^"]+)"/g)].map((m) => m[1])).toEqual(all.slice(3, 6).map((s) => s.id));
  });

  it('pages executions and cuts long error messages, linking to the whole execution', async () => {
    const loud = await d.workflows.start(LoudFlow, await saveHero(d.dataSource, 'loud'));
    for (let attempt = 0; attempt < 4; attempt++) {
      if (attempt > 0) await d.workflows.resume(loud);
      await gd.performNextStep(loud).catch(() => undefined);
    }
    const executions = await d.workflows.executionHistory(loud);
    expect(executions.map((e) => e.state)).toEqual(['failed', 'failed', 'failed', 'failed']);

    const page = await request(d.url).get(`/geneva/workflows/${loud.id}`).set(ALICE).expect(200);
    expect([...page.text.matchAll(/data-execution-id="([^"]+)"/g)].map((m) => m[1])).toEqual(executions.slice(0, 3).map((e) => e.id));
    expect(page.text.length).toBeLessThan(30_000);
    expect(page.text).toContain(`<a class="full-value" href="/geneva/api/workflows/${loud.id}/executions/${executions[0].id}">full error</a>`);
    const next = /<a id="next-executions" href="([^"]+)"/.exec(page.text)![1].replace(/&amp;/g, '&');
    const rest = await request(d.url).get(next).set(ALICE).expect(200);
    expect([...rest.text.matchAll(/data-execution-id="([^"]+)"/g)].map((m) => m[1])).toEqual([executions[3].id]);
    const whole = await request(d.url).get(`/geneva/api/workflows/${loud.id}/executions/${executions[0].id}`).set(ALICE).expect(200);
    expect(whole.body.execution.errorMessage).toBe(executions[0].errorMessage);
    expect(whole.body.execution.errorMessage.length).toBeGreaterThan(8_000); // what the engine keeps of a message, whole
    const overview = await request(d.url).get('/geneva').set(ALICE).expect(200);
    expect(overview.text.length).toBeLessThan(40_000);
  });
});

describeEachDatabase('the workflow page of a flooded workflow', (kind) => {
  let d: DashboardApp;
  let gd: GenevaDriveTesting;

  beforeAll(async () => {
    d = await createDashboardApp(kind); // the default page size: 50 rows a list
    gd = GenevaDriveTesting.create(d.app);
  });
  afterAll(() => d.close());

  /** A parked invoice with 150 signals of `size` characters, its executions' cursor, metadata and error as large. */
  async function flooded(name: string, size: number): Promise<string> {
    const workflow = await parkInvoice(d, gd, name);
    const blob = 'x'.repeat(size);
    for (let i = 0; i < 150; i++) await d.signals.signal(workflow, 'payment_confirmed', { payload: { i, blob }, idempotencyKey: `evt-${i}` });
    const text = 'e'.repeat(Math.min(size, 60_000)); // MySQL's text columns hold 64 KB
    await d.dataSource.getRepository(StepExecution).update(
      { workflowId: workflow.id },
      { cursor: { blob }, metadata: { reattemptReason: 'flow_control', exception: { class: 'Error', message: blob, backtrace: [blob] } }, errorClassName: 'Error', errorMessage: text, errorBacktrace: text },
    );
    return workflow.id;
  }

  /** What showing the workflow's page reads from the database, and the page. */
  async function showPage(workflowId: string): Promise<{ read: number; html: string }> {
    let html = '';
    const read = await bytesRead(d.dataSource, async () => {
      html = (await request(d.url).get(`/geneva/workflows/${workflowId}`).set(AUTH).expect(200)).text;
    });
    return { read, html };
  }

  // The page's time is bounded by its work, measured here without a clock (the machine's speed varies):
  // what it reads from the database and what it renders stay under the same bounds whatever the size
  // of the payloads. 150 signals of 120 KB read 6 MB of payloads for one page of 50 before.
  it('reads and renders as much for 150 signals of 120 KB as for 150 of 1 KB, so its time is bounded too', async () => {
    const small = await showPage(await flooded('small', 1_000));
    const large = await showPage(await flooded('large', 120_000));
    for (const page of [small, large]) {
      expect(page.read).toBeLessThan(200_000);
      expect(Buffer.byteLength(page.html)).toBeLessThan(300_000);
      expect(page.html.match(/data-signal-id=/g)).toHaveLength(50);
      expect(page.html.match(/data-execution-id=/g)).toHaveLength(2);
      expect(page.html).toContain('flow_control'); // the reattempt reason, read out of the metadata
    }
    expect(large.html.match(/full payload<\/a>/g)).toHaveLength(50);
    expect(large.html.match(/full cursor<\/a>/g)).toHaveLength(2);
    expect(large.html.match(/full error<\/a>/g)).toHaveLength(2);
    expect(large.html).toContain(`<pre class="payload">{\n  &quot;i&quot;: 0,\n  &quot;blob&quot;: &quot;xxxxxxxx`);
    expect(small.html).not.toContain('full payload</a>');
  }, 180_000);

  /** What showing the page at `query` reads from the database (rows and statements, as counts), and the page. */
  async function childrenPage(workflowId: string, query: Record<string, string> = {}): Promise<{ rows: number; statements: number; html: string }> {
    let html = '';
    const read = await reads(d.dataSource, async () => {
      html = (await request(d.url).get(`/geneva/workflows/${workflowId}`).query(query).set(AUTH).expect(200)).text;
    });
    return { rows: read.rows, statements: read.statements, html };
  }

  // 10,000 children render as fast as 60: measured without a clock, by what the page reads. A page is a
  // keyset range of (parent_id, id) and a count per state comes back, never a row per child.
  it('shows a page of 10,000 children reading as many rows and statements as for 60, and pages through them by keyset', async () => {
    const few = await d.workflows.start(InvoiceFlow, await saveHero(d.dataSource, 'few'));
    await insertChildren(d.dataSource, few, 60, { state: (i) => (i % 10 === 0 ? 'finished' : 'ready'), result: (i) => ({ i, blob: 'r'.repeat(3_000) }) });
    const many = await d.workflows.start(InvoiceFlow, await saveHero(d.dataSource, 'many'));
    const ids = await insertChildren(d.dataSource, many, 10_000, { state: (i) => (i % 10 === 0 ? 'finished' : 'ready'), result: (i) => ({ i, blob: 'r'.repeat(3_000) }) });
    const shownIds = (html: string) => [...html.matchAll(/data-child-id="([^"]+)"/g)].map((m) => m[1]);
    const next = (html: string) => /<a id="next-children" href="[^"?]+\?([^"]+)"/.exec(html)?.[1].replace(/&amp;/g, '&');

    const small = await childrenPage(few.id);
    const large = await childrenPage(many.id);
    expect(shownIds(large.html)).toEqual(ids.slice(0, 50));
    expect(large.html).toContain('<h2 id="children">Children (10000)</h2>');
    expect(large.html).toContain('<span data-child-count="ready">9000</span> ready, <span data-child-count="finished">1000</span> finished');
    expect(large.html.match(/full result<\/a>/g)).toHaveLength(50);
    expect(large.rows).toBe(small.rows);
    expect(large.statements).toBe(small.statements);
    expect(large.rows).toBeLessThan(80); // the workflow, its executions, 51 children, a count per state
    expect(Buffer.byteLength(large.html)).toBeLessThan(300_000);

    const second = await childrenPage(many.id, Object.fromEntries(new URLSearchParams(next(large.html))));
    expect(shownIds(second.html)).toEqual(ids.slice(50, 100));
    expect(second.rows).toBe(large.rows);
    const last = await childrenPage(many.id, { childrenAfter: ids[9_949] });
    expect(shownIds(last.html)).toEqual(ids.slice(9_950));
    expect(next(last.html)).toBeUndefined();
    expect(last.rows).toBeLessThan(large.rows);
  }, 180_000);
});

describeEachDatabase('dashboard mounted at the root', (kind) => {
  let d: DashboardApp;
  let gd: GenevaDriveTesting;

  beforeAll(async () => {
    d = await createDashboardApp(kind, { path: '/', guard: new TokenGuard() });
    gd = GenevaDriveTesting.create(d.app);
  });
  afterAll(() => d.close());

  it('builds same-origin links, form actions, redirects and cookie paths', async () => {
    const workflow = await parkInvoice(d, gd);
    const overview = await request(d.url).get('/').set(AUTH).expect(200);
    const page = await request(d.url).get(`/workflows/${workflow.id}`).set(AUTH).expect(200);
    for (const text of [overview.text, page.text]) {
      const urls = [...text.matchAll(/(?:href|src|action)="([^"]*)"/g)].map((m) => m[1]);
      expect(urls.length).toBeGreaterThan(3);
      expect(urls.filter((url) => !url.startsWith('/') || url.startsWith('//') || url.startsWith('/\\'))).toEqual([]);
    }
    expect(page.text).toContain('<script src="/assets/dashboard.js" defer></script>');
    expect(page.text).toContain(`action="/workflows/${workflow.id}/pause"`);
    expect(String(page.headers['set-cookie'])).toContain('; Path=/;');
    const cookie = String(page.headers['set-cookie']).split(';')[0];
    const token = /name="_csrf" value="([^"]+)"/.exec(page.text)![1];
    const done = await request(d.url).post(`/workflows/${workflow.id}/pause`).set(AUTH).set('Cookie', cookie).type('form').send({ _csrf: token }).expect(303);
    expect(done.headers.location).toBe(`/workflows/${workflow.id}?done=pause`);
    expectSecurityHeaders(await request(d.url).get('/nope').expect(404)); // the whole application is under the mount
  });
});

/** Waits for `approved` with a matcher that reads `payload.order.id`: a payload without `order` makes the application's own code throw a TypeError. */
@Workflow({ name: 'PickyApprovalFlow', hero: () => TestHero })
class PickyApprovalFlow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: new SignalMatcher('approved', (payload) => (payload as { order: { id: number } }).order.id === 1) })
  async approve() {}
}

describeEachDatabase('dashboard actions that fail in the application’s code', (kind) => {
  let d: DashboardApp;
  let gd: GenevaDriveTesting;

  beforeAll(async () => {
    d = await createDashboardApp(kind, { guard: new TokenGuard() }, { queue: { adapter: 'manual' } }, { providers: [PickyApprovalFlow] });
    gd = GenevaDriveTesting.create(d.app);
  });
  afterAll(() => d.close());

  it('answers a matcher that throws a TypeError 500, not 400 as if the operator’s input were wrong, and writes nothing', async () => {
    const workflow = await d.workflows.start(PickyApprovalFlow, await saveHero(d.dataSource));
    await gd.performNextStep(workflow);
    await gd.assertWaitingForSignal(workflow, 'approved');
    const { cookie, token } = await csrfFor(d.url, workflow.id, AUTH);
    const api = await request(d.url).post(`/geneva/api/workflows/${workflow.id}/signal`).set(AUTH).set('Cookie', cookie).set('x-csrf-token', token).send({ name: 'approved', payload: '{}' });
    expect(api.status).toBe(500);
    expect(await d.signals.list(workflow)).toEqual([]);
    await gd.assertWaitingForSignal(workflow, 'approved');
  });
});
