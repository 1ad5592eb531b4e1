import { ValidationPipe } from '@nestjs/common';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { maxSignalPayloadSize, sqliteFile } from './app.module.js';
import { bodyDepthGuard } from './body-depth.js';

/**
 * What main.ts does to the HTTP application before it listens, shared with the e2e tests:
 * - a JSON body limit above the signal payload limit (`BODY_LIMIT`, default 1 MiB, or twice
 *   `GD_MAX_SIGNAL_PAYLOAD` if that is larger), so an oversized payload reaches the webhook and is
 *   answered 413 by geneva-drive's own check instead of being cut off by the body parser;
 *   the raw bytes are kept as `req.rawBody`: the webhooks' signatures are over them;
 * - JSON bodies nested deeper than MAX_BODY_DEPTH refused (400) before the DTOs see them;
 * - the global ValidationPipe: DTOs are validated, unknown properties refused (400);
 * - `trust proxy` (`TRUST_PROXY`, default `loopback`): behind a TLS-terminating proxy on this host
 *   `X-Forwarded-Proto: https` makes requests secure, so the dashboard's CSRF cookie is `Secure`
 *   (and `__Host-`); set the proxy's address (or `false`) when it runs elsewhere (or there is none).
 */
export function configureApp(app: NestExpressApplication, env: NodeJS.ProcessEnv = process.env): NestExpressApplication {
  const signalLimit = maxSignalPayloadSize(env) ?? 131_072;
  app.set('trust proxy', trustProxy(env.TRUST_PROXY));
  app.useBodyParser('json', {
    limit: env.BODY_LIMIT ?? Math.max(1_048_576, 2 * signalLimit),
    verify: (req: { rawBody?: Buffer }, _res: unknown, raw: Buffer) => {
      req.rawBody = raw;
    },
  });
  app.use(bodyDepthGuard);
  app.useGlobalPipes(new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }));
  return app;
}

/** Express's `trust proxy` from `TRUST_PROXY`: `false`, a hop count, or addresses and subnets (`loopback`, `10.0.0.0/8`, ...). */
function trustProxy(value: string | undefined): boolean | number | string {
  const text = value?.trim() || 'loopback';
  if (text === 'false') return false;
  return /^\d+$/.test(text) ? Number(text) : text;
}

/** Creates the SQLite file's directory when the app runs on SQLite (no DATABASE_URL). */
export function ensureDataDirectory(env: NodeJS.ProcessEnv = process.env): void {
  if (!env.DATABASE_URL) mkdirSync(dirname(sqliteFile(env)), { recursive: true });
}
