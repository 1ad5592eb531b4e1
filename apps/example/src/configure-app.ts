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
 * - JSON bodies nested deeper than MAX_BODY_DEPTH refused (400) before the DTOs see them;
 * - the global ValidationPipe: DTOs are validated, unknown properties refused (400).
 */
export function configureApp(app: NestExpressApplication, env: NodeJS.ProcessEnv = process.env): NestExpressApplication {
  const signalLimit = maxSignalPayloadSize(env) ?? 131_072;
  app.useBodyParser('json', { limit: env.BODY_LIMIT ?? Math.max(1_048_576, 2 * signalLimit) });
  app.use(bodyDepthGuard);
  app.useGlobalPipes(new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }));
  return app;
}

/** Creates the SQLite file's directory when the app runs on SQLite (no DATABASE_URL). */
export function ensureDataDirectory(env: NodeJS.ProcessEnv = process.env): void {
  if (!env.DATABASE_URL) mkdirSync(dirname(sqliteFile(env)), { recursive: true });
}
