import { createHmac } from 'node:crypto';

/** The header a provider signs its calls in: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">` (Stripe's scheme). */
export const WEBHOOK_SIGNATURE_HEADER = 'webhook-signature';

/** How far a call's timestamp may be from this server's clock: older (or newer) calls are refused as replays. */
export const WEBHOOK_TOLERANCE_SECONDS = 300;

/** The hex HMAC-SHA256 of `<t>.<raw body>` under the shared secret. */
export function webhookMac(secret: string, timestamp: string, rawBody: Buffer | string): string {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest('hex');
}

/** The header value a provider sends: what the demo and the tests use to call the webhooks. */
export function signWebhook(secret: string, rawBody: Buffer | string, at: Date = new Date()): string {
  const timestamp = String(Math.floor(at.getTime() / 1000));
  return `t=${timestamp},v1=${webhookMac(secret, timestamp, rawBody)}`;
}
