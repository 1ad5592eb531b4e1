import { Injectable, type OnModuleDestroy } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { QUEUE_PORT } from '../geneva-drive.constants.js';
import type { HousekeepingSummary } from '../housekeeping/housekeeping.service.js';
import { GENEVA_DRIVE_CHANNELS } from '../instrumentation/geneva-drive.events.js';
import { TransactionRunner } from '../persistence/transaction-runner.js';
import type { QueuePort } from '../interfaces/queue.port.js';

/** Past these, the indicator reports `down`; each is off unless given. @publicApi */
export interface GenevaDriveHealthThresholds {
  /** Most executions parked past `waitingVisibilityThreshold` (the `geneva_drive.waiting_overdue` gauge). */
  waitingOverdue?: number;
  /** Most stuck executions the last housekeeping run recovered (in progress and scheduled together). */
  stuck?: number;
}

/**
 * geneva-drive for @nestjs/terminus: `up` when the engine's database and queue answer and, with
 * thresholds, the gauges of the last housekeeping run are within them. The gauges come from the
 * `geneva-drive:housekeeping` channel, so a check costs one `SELECT 1` and, on Bull, one Redis PING (on BullMQ, one job count).
 * Provide it in a module that imports `TerminusModule`.
 * @publicApi
 */
@Injectable()
export class GenevaDriveHealthIndicator implements OnModuleDestroy {
  private lastRun: HousekeepingSummary | undefined;
  private readonly onHousekeeping = (summary: unknown) => {
    this.lastRun = summary as HousekeepingSummary;
  };

  constructor(
    private readonly health: HealthIndicatorService,
    private readonly moduleRef: ModuleRef,
  ) {
    subscribe(GENEVA_DRIVE_CHANNELS.housekeeping, this.onHousekeeping);
  }

  onModuleDestroy(): void {
    unsubscribe(GENEVA_DRIVE_CHANNELS.housekeeping, this.onHousekeeping);
  }

  async isHealthy<const Key extends string = 'geneva-drive'>(
    key: Key = 'geneva-drive' as Key,
    thresholds: GenevaDriveHealthThresholds = {},
  ): Promise<HealthIndicatorResult<Key>> {
    const indicator = this.health.check(key);
    // The engine's providers are not exported to the application's modules: reach them in the container.
    const transactions = this.moduleRef.get(TransactionRunner, { strict: false });
    const queue = this.moduleRef.get<QueuePort>(QUEUE_PORT as never, { strict: false });
    const database = await reachable(() => transactions.dataSource.query('SELECT 1'));
    const queueState = await reachable(async () => queue.ping?.());
    const waitingOverdue = this.lastRun?.gauges?.['geneva_drive.waiting_overdue']?.total;
    const stuck = this.lastRun ? this.lastRun.stuckInProgressRecovered + this.lastRun.stuckScheduledRecovered : undefined;
    const data = { database, queue: queueState, waitingOverdue: waitingOverdue ?? null, stuck: stuck ?? null };
    const healthy =
      database === 'up' &&
      queueState === 'up' &&
      !(thresholds.waitingOverdue !== undefined && (waitingOverdue ?? 0) > thresholds.waitingOverdue) &&
      !(thresholds.stuck !== undefined && (stuck ?? 0) > thresholds.stuck);
    return healthy ? indicator.up(data) : indicator.down(data);
  }
}

const ANSWER_WITHIN_MS = 2000;

/** `up`, or `down: <why>`; a backend that does not answer in time (a client still reconnecting) is down. */
async function reachable(probe: () => Promise<unknown>): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  const silence = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ANSWER_WITHIN_MS} ms`)), ANSWER_WITHIN_MS);
  });
  try {
    await Promise.race([probe(), silence]);
    return 'up';
  } catch (error) {
    return `down: ${error instanceof Error ? error.message : String(error)}`;
  } finally {
    clearTimeout(timer);
  }
}
