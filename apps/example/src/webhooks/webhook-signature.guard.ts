import { Inject, Injectable, Logger, Optional, ServiceUnavailableException, UnauthorizedException, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { timingSafeEqual } from 'node:crypto';
import { WEBHOOK_SIGNATURE_HEADER, WEBHOOK_TOLERANCE_SECONDS, webhookMac } from './webhook-signature.js';

/** The shared secret of the webhooks (`WEBHOOK_SECRET`), null when it is not set. */
export const WEBHOOK_SECRET = Symbol('WEBHOOK_SECRET');

const SIGNATURE = /^t=(\d{1,12}),v1=([0-9a-f]{64})$/;

/**
 * The pattern to copy for any webhook that changes something: the provider signs each call with a
 * secret you share (here `WEBHOOK_SECRET`) and this guard checks it before the body is even
 * validated. The MAC covers the raw bytes received (configureApp keeps them: a re-serialised body
 * would not match) and the timestamp, which must be within five minutes of now, so a captured call
 * cannot be replayed later; within the window the event id is the signal's idempotency key, so a
 * replay delivers nothing twice. The comparison is constant-time over two fixed-length digests.
 * Without a secret every call is refused (503): an unsigned webhook would let anyone pay for orders.
 */
@Injectable()
export class WebhookSignatureGuard implements CanActivate {
  private readonly logger = new Logger('Webhooks');

  constructor(@Optional() @Inject(WEBHOOK_SECRET) private readonly secret: string | null = null) {}

  canActivate(context: ExecutionContext): boolean {
    if (!this.secret) throw new ServiceUnavailableException('The webhooks are disabled: WEBHOOK_SECRET is not set');
    const request = context.switchToHttp().getRequest<{ headers: Record<string, string | string[] | undefined>; rawBody?: Buffer }>();
    const header = request.headers[WEBHOOK_SIGNATURE_HEADER];
    const match = typeof header === 'string' ? SIGNATURE.exec(header) : null;
    if (!match) throw new UnauthorizedException(`A ${WEBHOOK_SIGNATURE_HEADER} header "t=<unix seconds>,v1=<hex HMAC-SHA256>" is required`);
    const [, timestamp, given] = match;
    if (Math.abs(Date.now() / 1000 - Number(timestamp)) > WEBHOOK_TOLERANCE_SECONDS) {
      throw new UnauthorizedException(`The ${WEBHOOK_SIGNATURE_HEADER} timestamp is more than ${WEBHOOK_TOLERANCE_SECONDS} s from now`);
    }
    const expected = webhookMac(this.secret, timestamp, request.rawBody ?? Buffer.alloc(0));
    if (!timingSafeEqual(Buffer.from(given, 'hex'), Buffer.from(expected, 'hex'))) {
      this.logger.warn('refused a webhook call with a wrong signature');
      throw new UnauthorizedException(`The ${WEBHOOK_SIGNATURE_HEADER} does not match the body`);
    }
    return true;
  }
}
