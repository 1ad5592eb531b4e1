/**
 * `npm run demo`: walks the example app through one order, over HTTP, against a running app
 * (`npm start` in another terminal). BASE_URL defaults to http://localhost:3000.
 *
 * It waits for the app to answer (up to DEMO_CONNECT_TIMEOUT seconds, 120 by default: `npm start`
 * compiles first), creates an order, posts the payment provider's webhook twice with the same event id
 * (the second is answered 200 as a duplicate and delivered nowhere), and prints the workflow's
 * timeline as it changes until the workflow has finished: exit 0. The webhook calls are signed with
 * WEBHOOK_SECRET, which must be the app's. If it has not finished within
 * DEMO_TIMEOUT seconds (30 by default), or anything answers unexpectedly, it says why and exits 1.
 * Only Node's global fetch: no dependencies.
 */
import { WEBHOOK_SIGNATURE_HEADER, signWebhook } from './webhooks/webhook-signature.js';

interface Timeline {
  order: { id: number; status: string };
  workflow: { id: string; state: string; nextStepName: string | null };
  steps: Array<{ step: string; state: string; outcome: string | null; waitingSince: string | null }>;
  signals: Array<{ name: string; state: string; key: string | null; claimed: number; consumed: number }>;
}

class DemoError extends Error {}

const BASE_URL = (process.env.BASE_URL ?? 'http://localhost:3000').replace(/\/+$/, '');
const CONNECT_TIMEOUT_S = Number(process.env.DEMO_CONNECT_TIMEOUT ?? 120);
const TIMEOUT_S = Number(process.env.DEMO_TIMEOUT ?? 30);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function call<T>(method: 'GET' | 'POST', path: string, body?: unknown, expected = [200, 201]): Promise<{ status: number; body: T }> {
  const text = body === undefined ? undefined : JSON.stringify(body);
  // Signed as the payment provider signs its calls; the app refuses unsigned webhook calls.
  const signature: Record<string, string> = path.startsWith('/webhooks/') && text !== undefined ? { [WEBHOOK_SIGNATURE_HEADER]: signWebhook(webhookSecret(), text) } : {};
  const response = await fetch(`${BASE_URL}${path}`, {
    method,
    headers: text === undefined ? undefined : { 'content-type': 'application/json', ...signature },
    body: text,
  });
  const answer = await response.text();
  if (!expected.includes(response.status)) throw new DemoError(`${method} ${path} answered ${response.status}: ${answer}`);
  return { status: response.status, body: (answer ? JSON.parse(answer) : undefined) as T };
}

function webhookSecret(): string {
  const secret = process.env.WEBHOOK_SECRET?.trim();
  if (!secret) throw new DemoError('WEBHOOK_SECRET is not set: give the demo the secret the app was started with (WEBHOOK_SECRET=... npm start)');
  return secret;
}

async function waitForApp(): Promise<void> {
  const deadline = Date.now() + CONNECT_TIMEOUT_S * 1000;
  let announced = false;
  for (;;) {
    try {
      const response = await fetch(`${BASE_URL}/health`);
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      throw new DemoError(`no answer from ${BASE_URL}/health within ${CONNECT_TIMEOUT_S} s: start the app first (npm start), or set BASE_URL`);
    }
    if (!announced) console.log(`waiting for the app at ${BASE_URL} ...`);
    announced = true;
    await sleep(500);
  }
}

function render(timeline: Timeline): string {
  const { workflow, order } = timeline;
  const lines = [`workflow ${workflow.id}: ${workflow.state}${workflow.nextStepName ? `, next step ${workflow.nextStepName}` : ''} — order ${order.id} ${order.status}`];
  for (const step of timeline.steps) {
    lines.push(`  step    ${step.step.padEnd(18)} ${step.state}${step.outcome ? ` (${step.outcome})` : ''}`);
  }
  for (const signal of timeline.signals) {
    lines.push(`  signal  ${signal.name.padEnd(18)} ${signal.state} (key ${signal.key}, claimed ${signal.claimed}, consumed ${signal.consumed})`);
  }
  return lines.join('\n');
}

async function main(): Promise<void> {
  await waitForApp();

  const created = await call<{ order: { id: number; amountCents: number }; workflowId: string }>('POST', '/orders', { sku: 'BOOK-42', amountCents: 12_500 });
  const { order, workflowId } = created.body;
  console.log(`POST /orders → ${created.status}: order ${order.id}, workflow ${workflowId}`);

  const timelinePath = `/orders/${order.id}/timeline`;
  let shown = '';
  const show = async (): Promise<Timeline> => {
    const timeline = (await call<Timeline>('GET', timelinePath)).body;
    const text = render(timeline);
    if (text !== shown) console.log(`\n${text}`);
    shown = text;
    return timeline;
  };
  await show();

  // The provider's event id is the idempotency key: its retry is answered 200 and delivered nowhere.
  const event = { eventId: `evt_demo_${order.id}_${Date.now()}`, orderId: order.id, amountCents: order.amountCents };
  for (const label of ['webhook', 'webhook again (a provider retry)']) {
    const answer = await call<{ signalId: string; state: string; duplicate: boolean }>('POST', '/webhooks/payments', event, [200]);
    console.log(`\nPOST /webhooks/payments, ${label} → ${answer.status}: signal ${answer.body.signalId}, ${answer.body.state}, duplicate ${answer.body.duplicate}`);
    if (label !== 'webhook' && !answer.body.duplicate) throw new DemoError('the redelivered event was not recognised as a duplicate');
  }

  const deadline = Date.now() + TIMEOUT_S * 1000;
  for (;;) {
    const timeline = await show();
    if (timeline.workflow.state === 'finished') {
      const signals = timeline.signals.length;
      if (signals !== 1) throw new DemoError(`expected the two deliveries to make one signal, found ${signals}`);
      console.log(`\nworkflow ${workflowId} finished: order ${order.id} is ${timeline.order.status}; two deliveries, one signal.`);
      return;
    }
    if (timeline.workflow.state !== 'ready' && timeline.workflow.state !== 'performing') {
      throw new DemoError(`workflow ${workflowId} ended ${timeline.workflow.state} instead of finished (see the app's log)`);
    }
    if (Date.now() > deadline) {
      throw new DemoError(
        `timed out after ${TIMEOUT_S} s: workflow ${workflowId} is still ${timeline.workflow.state} (next step ${timeline.workflow.nextStepName}). ` +
          'Is the app running steps? (WORKER=0, or REDIS_URL without `npm run start:worker`, runs none.)',
      );
    }
    await sleep(250);
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    const message = error instanceof DemoError ? error.message : error instanceof Error ? `${error.message}${error.cause ? ` (${String(error.cause)})` : ''}` : String(error);
    console.error(`\ndemo failed: ${message}`);
    process.exit(1);
  },
);
