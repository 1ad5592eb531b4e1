/**
 * The dashboard in real headless Chromium, on SQLite and PostgreSQL, with the local queue so that a
 * signal sent from the page wakes the parked step and the timeline changes: overview, list filters,
 * the workflow page, send a signal, pause/resume/skip/cancel, resume at a chosen step, an InvalidStateError message, a
 * `<script>` payload shown as text, and the guard.
 */
import type { BrowserContext, Page } from 'playwright-core';
import type { WorkflowRecord } from 'geneva-drive';
import { chromiumSkipReason, launchChromium } from '../utils/chromium.js';
import { createDashboardApp, DASHBOARD_TOKEN, FragileFlow, InvoiceFlow, saveHero, type DashboardApp } from '../src/dashboard-app.js';
import { describeEachDatabase } from '../utils/databases.js';

const skipReason = chromiumSkipReason();
if (skipReason) console.log(`dashboard browser spec skipped: ${skipReason}`);
const browserDescribe = skipReason ? describe.skip : describe;

describeEachDatabase('dashboard in Chromium', (kind) => {
  if (kind === 'mysql') return; // SQLite and PostgreSQL; the HTTP spec covers MariaDB
  browserDescribe(`(${kind})`, () => {
    let d: DashboardApp;
    let browser: { context: BrowserContext; close(): Promise<void> };
    let page: Page;

    beforeAll(async () => {
      d = await createDashboardApp(kind, undefined, { queue: { adapter: 'local' } });
      browser = await launchChromium();
      page = await browser.context.newPage();
      page.on('dialog', (dialog) => void dialog.accept());
    });
    afterAll(async () => {
      await browser?.close();
      await d?.close();
    });
    beforeEach(async () => {
      await d.reset();
      await browser.context.clearCookies();
      await browser.context.addCookies([{ name: 'operator_token', value: DASHBOARD_TOKEN, url: d.url }]);
    });

    /** An InvoiceFlow whose awaitPayment step has parked (the local queue ran prepare). */
    async function parkedInvoice(name: string): Promise<WorkflowRecord> {
      const workflow = await d.workflows.start(InvoiceFlow, await saveHero(d.dataSource, name));
      await until(async () => (await d.workflows.currentExecution(workflow))?.state === 'waiting');
      return workflow;
    }

    /** Reloads the page until `check` holds (the local queue runs steps in the background). */
    async function reloadUntil(check: () => Promise<boolean>): Promise<void> {
      await until(async () => {
        await page.reload();
        return check();
      });
    }

    const executions = () => page.locator('#executions tbody tr').evaluateAll((rows) => rows.map((row) => `${row.children[1].textContent}:${row.getAttribute('data-state')}`));
    const workflowState = async () => (await page.locator('h1 .state').textContent())?.trim();

    it('refuses a browser without the operator token', async () => {
      await browser.context.clearCookies();
      const response = await page.goto(`${d.url}/geneva`);
      expect(response?.status()).toBe(401);
      expect(await page.content()).toContain('An operator token is required');
    });

    it('loads the overview, filters the list and opens a workflow', async () => {
      const parked = await parkedInvoice('parked-hero');
      // Paused by its own failing step: the local queue starts a due step at once, so pausing a
      // just-started workflow from here would race its first step.
      const other = await d.workflows.start(FragileFlow, await saveHero(d.dataSource, 'other'));
      await until(async () => (await d.workflows.find(other.id)).state === 'paused');

      await page.goto(`${d.url}/geneva`);
      expect(await page.locator('[data-gauge="waiting"]').textContent()).toBe('1');
      expect(await page.locator('#longest-waiting tbody').textContent()).toContain('awaitPayment');

      await page.click('header >> text=Workflows');
      expect(await page.locator('#workflows tbody tr[data-workflow-id]').count()).toBe(2);
      await page.selectOption('select[name="waitingFor"]', 'payment_confirmed');
      await page.click('form.filters button[type="submit"]');
      expect(page.url()).toContain('waitingFor=payment_confirmed');
      expect(await page.locator('#workflows tbody tr[data-workflow-id]').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-workflow-id')))).toEqual([parked.id]);
      await page.goto(`${d.url}/geneva/workflows`);
      await page.selectOption('select[name="state"]', 'paused');
      await page.click('form.filters button[type="submit"]');
      expect(await page.locator('#workflows tbody tr[data-workflow-id]').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-workflow-id')))).toEqual([other.id]);

      await page.goto(`${d.url}/geneva/workflows`);
      await page.click(`a[href="/geneva/workflows/${parked.id}"]`);
      expect(await workflowState()).toBe('ready');
      expect(await executions()).toEqual(['prepare:completed', 'awaitPayment:waiting']);
      expect(await page.locator('#waiting-since time').count()).toBe(1);
      expect(await page.locator('ol.steps li.current').textContent()).toContain('awaitPayment');
      expect(await page.locator('#signals tbody').textContent()).toContain('No signals.');
    });

    it('sends a signal that wakes the parked step, and shows a <script> payload as text', async () => {
      const workflow = await parkedInvoice('signal-hero');
      await page.goto(`${d.url}/geneva/workflows/${workflow.id}`);
      await page.fill('textarea[name="payload"]', '{"note": "<script>window.__injected = 1</script>", "amountCents": 1200}');
      await page.fill('input[name="idempotencyKey"]', 'evt-42');
      await page.click('form.signal-form button[type="submit"]');
      expect(await page.locator('.message.notice').textContent()).toBe('Signal sent.');

      await reloadUntil(async () => (await workflowState()) === 'finished');
      expect(await executions()).toEqual(['prepare:completed', 'awaitPayment:completed', 'issueReceipt:completed']);
      const signal = page.locator('#signals tbody tr[data-signal-id]');
      expect(await signal.getAttribute('data-state')).toBe('consumed');
      expect(await signal.locator('td').nth(4).textContent()).toBe('1 / 1');
      expect(await signal.locator('td').nth(2).textContent()).toBe('evt-42');
      expect(await signal.locator('pre.payload').textContent()).toContain('"note": "<script>window.__injected = 1</script>"');
      expect(await page.evaluate(() => (globalThis as { __injected?: number }).__injected)).toBeUndefined();
      expect(await page.locator('#signals script').count()).toBe(0);
    });

    it('pauses, resumes, skips and cancels, and shows an InvalidStateError as a message', async () => {
      const workflow = await parkedInvoice('operated');
      await page.goto(`${d.url}/geneva/workflows/${workflow.id}`);
      await page.click('button[value="pause"]');
      expect(await page.locator('.message.notice').textContent()).toBe('Workflow paused.');
      expect(await workflowState()).toBe('paused');
      await page.click('button[value="resume"]');
      expect(await workflowState()).toBe('ready');

      await page.click('button[value="resume"]');
      expect(await page.locator('.message.error').textContent()).toBe(`Cannot resume a ready workflow (workflow ${workflow.id})`);
      expect(await workflowState()).toBe('ready');

      await page.click('button[value="skip"]');
      expect(await page.locator('.message.notice').textContent()).toBe('Step skipped.');
      await reloadUntil(async () => (await workflowState()) === 'finished');
      expect(await executions()).toEqual(['prepare:completed', 'awaitPayment:skipped', 'issueReceipt:completed']);

      const second = await parkedInvoice('canceled');
      await page.goto(`${d.url}/geneva/workflows/${second.id}`);
      await page.click('button[value="cancel"]');
      expect(await page.locator('.message.notice').textContent()).toBe('Workflow canceled.');
      expect(await workflowState()).toBe('canceled');
      expect(await executions()).toEqual(['prepare:completed', 'awaitPayment:canceled']);
    });

    it('resumes a paused workflow at the step chosen in the list', async () => {
      const workflow = await parkedInvoice('moved');
      await page.goto(`${d.url}/geneva/workflows/${workflow.id}`);
      expect(await page.locator('form.resume-at-form').count()).toBe(0); // offered once paused
      await page.click('button[value="pause"]');
      expect(await page.locator('select[name="step"] option').allTextContents()).toEqual(['prepare', 'awaitPayment', 'issueReceipt']);
      expect(await page.locator('select[name="step"]').inputValue()).toBe('awaitPayment');
      await page.selectOption('select[name="step"]', 'issueReceipt');
      await page.click('form.resume-at-form button[type="submit"]');
      expect(await page.locator('.message.notice').textContent()).toBe('Workflow resumed at the chosen step.');
      await reloadUntil(async () => (await workflowState()) === 'finished');
      expect(await executions()).toEqual(['prepare:completed', 'awaitPayment:canceled', 'issueReceipt:completed']);
    });

    it('asks before acting: a dismissed confirmation changes nothing', async () => {
      const workflow = await parkedInvoice('unsure');
      await page.goto(`${d.url}/geneva/workflows/${workflow.id}`);
      page.removeAllListeners('dialog');
      page.once('dialog', (dialog) => void dialog.dismiss());
      await page.click('button[value="cancel"]');
      page.on('dialog', (dialog) => void dialog.accept());
      expect(page.url()).toBe(`${d.url}/geneva/workflows/${workflow.id}`);
      expect((await d.workflows.find(workflow.id)).state).toBe('ready');
    });
  });
});

async function until(check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
