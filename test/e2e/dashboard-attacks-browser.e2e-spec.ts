/**
 * The attacks on the dashboard, played in real headless Chromium on SQLite and PostgreSQL: a page on
 * another origin of the same site (another port of the host) plants a CSRF cookie and auto-posts an
 * action; the dashboard mounted at `/`; a workflow with 150 signals of 120 KB; and framing by another
 * origin. The attacker's pages are served by a plain HTTP server of the test.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BrowserContext, Page } from 'playwright-core';
import { GenevaDriveTesting } from 'geneva-drive/testing';
import { chromiumSkipReason, launchChromium } from '../utils/chromium.js';
import { createDashboardApp, DASHBOARD_TOKEN, parkedInvoice, TokenGuard, type DashboardApp } from '../src/dashboard-app.js';
import { describeEachDatabase } from '../utils/databases.js';

const skipReason = chromiumSkipReason();
if (skipReason) console.log(`dashboard attacks browser spec skipped: ${skipReason}`);
const browserDescribe = skipReason ? describe.skip : describe;

/** The attacker's site: `GET /page` answers the HTML given to `serve`. */
async function attackerSite(): Promise<{ url: string; serve(html: string): void; close(): Promise<void> }> {
  let html = '';
  const server: Server = createServer((_req, res) => {
    res.setHeader('Content-Type', 'text/html; charset=utf-8');
    res.end(html);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    serve: (page) => (html = page),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describeEachDatabase('dashboard attacks in Chromium', (kind) => {
  if (kind === 'mysql') return; // SQLite and PostgreSQL; the HTTP spec covers MariaDB
  browserDescribe(`(${kind})`, () => {
    let d: DashboardApp;
    let root: DashboardApp;
    let gd: GenevaDriveTesting;
    let attacker: Awaited<ReturnType<typeof attackerSite>>;
    let browser: { context: BrowserContext; close(): Promise<void> };
    let page: Page;

    beforeAll(async () => {
      // Both apps first: each one's creation drops and migrates the database, never under a running test.
      root = await createDashboardApp(kind, { path: '/', guard: new TokenGuard() });
      d = await createDashboardApp(kind);
      gd = GenevaDriveTesting.create(d.app);
      attacker = await attackerSite();
      browser = await launchChromium();
      // Under the test's own timeout, so that a stalled navigation or click fails naming itself.
      browser.context.setDefaultTimeout(20_000);
      page = await browser.context.newPage();
      page.on('dialog', (dialog) => void dialog.accept());
    });
    afterAll(async () => {
      await browser?.close();
      await attacker?.close();
      await root?.close();
      await d?.close();
    });
    beforeEach(async () => {
      await d.reset();
      await browser.context.clearCookies();
      await browser.context.addCookies([{ name: 'operator_token', value: DASHBOARD_TOKEN, url: d.url }]);
    });

    it('refuses an action auto-posted by another origin of the site with a planted CSRF cookie', async () => {
      const workflow = await parkedInvoice(d, gd, 'target');
      const action = `${d.url}/geneva/workflows/${workflow.id}/pause`;
      // Cookies do not keep ports apart: 127.0.0.1:<attacker> can set one that 127.0.0.1:<dashboard> receives.
      attacker.serve(`<!doctype html><form method="post" action="${action}"><input name="_csrf" value="tossed"></form>
<script>document.cookie = 'geneva_drive_csrf=tossed; path=/geneva/workflows'; document.forms[0].submit();</script>`);
      const answered = page.waitForResponse((response) => response.url() === action);
      await page.goto(`${attacker.url}/page`);
      const response = await answered;
      expect(response.status()).toBe(403);
      expect((await browser.context.cookies(action)).some((cookie) => cookie.name === 'geneva_drive_csrf' && cookie.value === 'tossed')).toBe(true);
      expect((await d.workflows.find(workflow.id)).state).toBe('ready');

      // The operator, on the dashboard's own page, still acts: the planted cookie does not get in the way.
      await page.goto(`${d.url}/geneva/workflows/${workflow.id}`);
      await page.click('button[value="pause"]');
      expect(await page.locator('.message.notice').textContent()).toBe('Workflow paused.');
      expect((await d.workflows.find(workflow.id)).state).toBe('paused');
    });

    it('keeps every request and link on the dashboard’s origin when mounted at /', async () => {
      await browser.context.addCookies([{ name: 'operator_token', value: DASHBOARD_TOKEN, url: root.url }]);
      const workflow = await parkedInvoice(root, GenevaDriveTesting.create(root.app), 'rooted');
      const origin = new URL(root.url).origin;
      const requested: string[] = [];
      page.on('request', (request) => void requested.push(request.url()));
      await page.goto(`${root.url}/workflows/${workflow.id}`);
      await page.waitForLoadState('load');
      const targets = await page.locator('[href], [src], [action]').evaluateAll((elements) =>
        elements.map((element) => new URL(element.getAttribute('href') ?? element.getAttribute('src') ?? element.getAttribute('action')!, element.ownerDocument.URL).origin),
      );
      expect(targets.length).toBeGreaterThan(5);
      expect(targets.filter((target) => target !== origin)).toEqual([]);
      await page.click('button[value="pause"]');
      expect(await page.locator('.message.notice').textContent()).toBe('Workflow paused.');
      expect(page.url()).toBe(`${root.url}/workflows/${workflow.id}?done=pause`);
      await page.click('header >> text=Workflows');
      expect(page.url()).toBe(`${root.url}/workflows`);
      page.removeAllListeners('request');
      expect(requested.filter((url) => new URL(url).origin !== origin)).toEqual([]);
      expect(requested).toContain(`${root.url}/assets/dashboard.js`);
      expect((await root.workflows.find(workflow.id)).state).toBe('paused');
    });

    it('shows a workflow with 150 signals of 120 KB as a small page of previews, each linked to its payload', async () => {
      const workflow = await parkedInvoice(d, gd, 'flooded');
      const blob = 'x'.repeat(120_000);
      for (let i = 0; i < 150; i++) await d.signals.signal(workflow, 'payment_confirmed', { payload: { i, blob }, idempotencyKey: `evt-${i}` });

      const response = await page.goto(`${d.url}/geneva/workflows/${workflow.id}`);
      expect(response?.status()).toBe(200);
      const size = (await response!.body()).length;
      // 150 × 120 KB made one page of 72 MB; a page now holds 50 previews of about 2 KB.
      expect(size).toBeLessThan(300_000);
      expect(await page.locator('#signals tbody tr[data-signal-id]').count()).toBe(50);
      expect(await page.locator('#signals a.full-value').count()).toBe(50);

      await page.click('#next-signals');
      expect(await page.locator('#signals tbody tr[data-signal-id] pre.payload').first().textContent()).toContain('"i": 50');
      const full = await page.locator('#signals a.full-value').first().getAttribute('href');
      const whole = await page.request.get(`${d.url}${full}`);
      expect(whole.status()).toBe(200);
      expect((await whole.json()).signal.payload).toEqual({ i: 50, blob });
    });

    it('sends the security headers and cannot be framed by another origin', async () => {
      const workflow = await parkedInvoice(d, gd, 'framed');
      const response = await page.goto(`${d.url}/geneva/workflows/${workflow.id}`);
      const headers = response!.headers();
      expect(headers['content-security-policy']).toContain("default-src 'self'");
      expect(headers['content-security-policy']).toContain("frame-ancestors 'none'");
      expect(headers['x-frame-options']).toBe('DENY');
      expect(headers['x-content-type-options']).toBe('nosniff');
      expect(headers['referrer-policy']).toBe('same-origin');
      // The page's own stylesheet and script still load under the policy.
      expect(await page.locator('header').evaluate((element) => element.ownerDocument.defaultView!.getComputedStyle(element).display)).toBe('flex');

      const framed = page.waitForResponse((r) => r.url() === `${d.url}/geneva/workflows/${workflow.id}`);
      attacker.serve(`<!doctype html><iframe name="target" src="${d.url}/geneva/workflows/${workflow.id}"></iframe>`);
      await page.goto(`${attacker.url}/page`);
      await framed;
      await page.waitForLoadState('load');
      const frame = page.frame({ name: 'target' })!;
      expect(frame.url()).not.toBe(`${d.url}/geneva/workflows/${workflow.id}`);
      expect(await frame.locator('button[value="cancel"]').count()).toBe(0);
    });
  });
});
