import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { Inject, Injectable, type LoggerService } from '@nestjs/common';
import type { ProcessRecord } from '../entities/process.entity.js';
import { GENEVA_DRIVE_LOGGER, GENEVA_DRIVE_OPTIONS } from '../geneva-drive.constants.js';
import type { ResolvedGenevaDriveOptions } from '../interfaces/geneva-drive-options.interface.js';
import { allProcesses, forgetProcesses, pendingStepCounts, recordProcess, removeProcess } from '../persistence/live-processes.js';
import { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import { TransactionRunner } from '../persistence/transaction-runner.js';
import { catalogOf, catalogRuns, type StepCatalog } from '../registry/runnable-steps.js';
import { WorkflowRegistry } from '../registry/workflow.registry.js';
import type { HousekeepingSummary } from './housekeeping-summary.js';

/** How often a process writes its row. */
export const HEARTBEAT_MS = 30_000;
/**
 * A process seen within this window counts as live: three heartbeats, so one slow or lost write (a
 * database failover, a blocked event loop) does not drop it, and hosts' clocks may disagree by up to
 * a minute (each process stamps its row by its own clock; housekeeping compares by its own).
 */
export const LIVE_WINDOW_MS = 3 * HEARTBEAT_MS;
/** Rows of processes not seen for this long (gone without a clean stop) are deleted by housekeeping. */
export const FORGET_AFTER_MS = 24 * 60 * 60_000;

/**
 * This process in the process table, and what the table tells about the fleet. The process writes
 * its row when the application has bootstrapped — its host, pid, whether it runs step jobs (a queue
 * consumer with `concurrency` above 0; an enqueue-only or manual-queue process does not) and the
 * catalog of the workflow classes and steps it registers — then every {@link HEARTBEAT_MS}, and
 * deletes it when it stops cleanly. Housekeeping asks it which executions no live process can run:
 * scheduled or parked executions of ongoing workflows whose class, or step, no process that runs
 * step jobs and was seen within {@link LIVE_WINDOW_MS} has (registry/runnable-steps.ts's rule).
 * Without the process table (its migration not run, or ProcessRecord not registered) it does
 * nothing and reports nothing.
 */
@Injectable()
export class ProcessRoster {
  /** This process's row id. */
  readonly id = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private readonly startedAt = new Date();
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> | undefined;

  constructor(
    private readonly transactions: TransactionRunner,
    private readonly registry: WorkflowRegistry,
    private readonly schema: SchemaCapabilities,
    @Inject(GENEVA_DRIVE_OPTIONS) private readonly options: ResolvedGenevaDriveOptions,
    @Inject(GENEVA_DRIVE_LOGGER) private readonly logger: LoggerService,
  ) {}

  /** Whether this process takes step jobs from its queue. A custom adapter is assumed to. */
  get runsSteps(): boolean {
    const queue = this.options.queue;
    if (typeof queue.adapter === 'object') return true;
    if (queue.adapter === 'manual') return false;
    return ((queue as { concurrency?: number }).concurrency ?? 1) > 0;
  }

  /** This process's catalog: its workflow classes and their steps. */
  catalog(): StepCatalog {
    return catalogOf(this.registry.all());
  }

  /** Writes the row now and starts the heartbeat. */
  async start(): Promise<void> {
    if (this.schema.processTable !== 'ready' || this.timer) return;
    await this.beat();
    this.timer = setInterval(() => void this.beat(), HEARTBEAT_MS);
    this.timer.unref(); // the heartbeat never keeps a process alive
  }

  /** Stops the heartbeat and deletes the row. */
  async stop(): Promise<void> {
    if (!this.timer) return;
    clearInterval(this.timer);
    this.timer = undefined;
    await this.beating;
    try {
      await removeProcess(this.transactions.dataSource.manager, this.id);
    } catch (error) {
      this.logger.warn(`Could not delete this process's row from geneva_drive_processes (it is forgotten once stale): ${String(error)}`);
    }
  }

  /**
   * Scheduled or parked executions of ongoing workflows that no live process can run, by workflow
   * type and step; null without the process table. Also forgets processes gone for a day.
   */
  async unrunnable(): Promise<HousekeepingSummary['unrunnableExecutions']> {
    if (this.schema.processTable !== 'ready') return null;
    const manager = this.transactions.dataSource.manager;
    const now = Date.now();
    const processes = await allProcesses(manager);
    await forgetProcesses(manager, processes.filter((process) => process.seenAt.getTime() < now - FORGET_AFTER_MS).map((process) => process.id));
    const live = processes.filter((process) => process.seenAt.getTime() >= now - LIVE_WINDOW_MS);
    const catalogs = live.filter((process) => process.runsSteps && process.catalog !== null).map((process) => process.catalog);
    // This process is live whatever its row says (deleted by hand, a heartbeat that failed).
    if (this.runsSteps) catalogs.push(this.catalog());
    const result: NonNullable<HousekeepingSummary['unrunnableExecutions']> = { total: 0, byWorkflow: {} };
    for (const { workflowType, stepName, count } of await pendingStepCounts(manager)) {
      if (catalogs.some((catalog) => catalogRuns(catalog, workflowType, stepName))) continue;
      result.byWorkflow[workflowType] = { ...result.byWorkflow[workflowType], [stepName]: count };
      result.total += count;
    }
    return result;
  }

  private beat(): Promise<void> {
    const now = new Date();
    const row: ProcessRecord = { id: this.id, host: hostname(), pid: process.pid, runsSteps: this.runsSteps, catalog: this.catalog(), startedAt: this.startedAt, seenAt: now };
    this.beating = recordProcess(this.transactions.dataSource.manager, row).catch((error: unknown) => {
      this.logger.warn(`Could not record this process in geneva_drive_processes (retried at the next heartbeat): ${String(error)}`);
    });
    return this.beating;
  }
}
