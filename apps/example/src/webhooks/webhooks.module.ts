import { Global, Logger, Module, type DynamicModule } from '@nestjs/common';
import { WEBHOOK_SECRET, WebhookSignatureGuard } from './webhook-signature.guard.js';

/** The webhooks' shared secret, from `WEBHOOK_SECRET`; without it the webhooks refuse every call. */
@Global()
@Module({})
export class WebhooksModule {
  static forEnvironment(env: NodeJS.ProcessEnv = process.env): DynamicModule {
    const secret = env.WEBHOOK_SECRET?.trim() || null;
    if (!secret) new Logger('Webhooks').warn('WEBHOOK_SECRET is not set: POST /webhooks/* answer 503');
    return { module: WebhooksModule, providers: [{ provide: WEBHOOK_SECRET, useValue: secret }, WebhookSignatureGuard], exports: [WEBHOOK_SECRET, WebhookSignatureGuard] };
  }
}
