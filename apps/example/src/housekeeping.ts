/**
 * `npm run housekeeping`: one housekeeping run against the example app's database, from cron or by
 * hand. Boots the app's module as an application context (no HTTP server, no step workers), runs
 * HousekeepingService once, prints the summary as JSON on stdout, closes everything and exits: 0 on
 * success, 1 on error. Log lines go to stderr, so stdout is only the summary.
 *
 * Same environment as the app (DATABASE_URL, SQLITE_FILE, REDIS_URL). With Bull (REDIS_URL) the jobs
 * housekeeping enqueues land in Redis for the app's workers. With the local queue they cannot reach
 * the running app's in-process timers: the app's own periodic housekeeping (or its next restart)
 * picks the recovered executions up.
 */
import 'reflect-metadata';
import type { LoggerService, LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { HousekeepingService } from 'geneva-drive';
import { AppModule } from './app.module.js';
import { ensureDataDirectory } from './configure-app.js';

/** Nest's log lines on stderr (stdout carries the JSON summary). */
class StderrLogger implements LoggerService {
  constructor(private readonly levels: LogLevel[]) {}
  log(message: unknown, context?: string) {
    this.write('log', message, context);
  }
  error(message: unknown, ...rest: unknown[]) {
    this.write('error', message, rest.filter((part) => typeof part === 'string').at(-1) as string | undefined);
  }
  warn(message: unknown, context?: string) {
    this.write('warn', message, context);
  }
  debug(message: unknown, context?: string) {
    this.write('debug', message, context);
  }
  verbose(message: unknown, context?: string) {
    this.write('verbose', message, context);
  }
  private write(level: LogLevel, message: unknown, context?: string) {
    if (!this.levels.includes(level)) return;
    process.stderr.write(`[${level}]${context ? ` ${context}:` : ''} ${message instanceof Error ? message.stack : String(message)}\n`);
  }
}

async function main(): Promise<number> {
  ensureDataDirectory();
  const verbose = process.env.HOUSEKEEPING_VERBOSE === '1';
  const logger = new StderrLogger(verbose ? ['log', 'error', 'warn', 'debug'] : ['error', 'warn']);
  // This process only enqueues: no step runs here, whatever the queue adapter.
  const app = await NestFactory.createApplicationContext(AppModule.forEnvironment({ ...process.env, WORKER: '0' }), { logger, abortOnError: false });
  try {
    const summary = await app.get(HousekeepingService).run();
    process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
    return 0;
  } finally {
    await app.close();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`housekeeping failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
