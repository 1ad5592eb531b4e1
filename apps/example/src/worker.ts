/**
 * `npm run start:worker`: a worker-only process for scaling out. It boots the example's modules as an
 * application context — no HTTP server — and runs step jobs from Bull until SIGINT/SIGTERM, when it
 * lets running steps finish and exits. Start as many as you like, next to web processes
 * (`WORKER=0 npm start` serves HTTP and runs no steps).
 *
 * Needs REDIS_URL: with the local queue a job is seen only by the process that enqueued it, so a
 * separate worker would have nothing to do. Use DATABASE_URL too (PostgreSQL or MySQL/MariaDB) to run
 * on several hosts; the default SQLite file can only be shared by processes on one host.
 * CONCURRENCY (default 2) is how many steps this process runs at once.
 */
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';
import { ensureDataDirectory } from './configure-app.js';

async function main(): Promise<void> {
  if (!process.env.REDIS_URL) {
    console.error(
      'start:worker needs REDIS_URL (e.g. REDIS_URL=redis://127.0.0.1:6379 npm run start:worker).\n' +
        'A worker process takes its jobs from Bull on Redis; without REDIS_URL the app uses its in-process queue, ' +
        'and `npm start` alone already runs every step.',
    );
    process.exit(1);
  }
  if (process.env.WORKER === '0') {
    console.error('start:worker with WORKER=0 would run no steps: unset WORKER.');
    process.exit(1);
  }
  if (!process.env.DATABASE_URL) console.warn('start:worker: no DATABASE_URL, using the SQLite file (processes on this host only).');
  ensureDataDirectory();
  const app = await NestFactory.createApplicationContext(AppModule.forEnvironment());
  app.enableShutdownHooks();
  console.log(`geneva-drive example worker running steps from Bull on REDIS_URL (concurrency ${process.env.CONCURRENCY ?? 2}); Ctrl-C stops it`);
}

main().catch((error: unknown) => {
  console.error(`worker failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exit(1);
});
