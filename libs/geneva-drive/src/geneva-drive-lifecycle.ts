import { Inject, Injectable, Optional, type BeforeApplicationShutdown, type LoggerService, type OnApplicationBootstrap, type OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { getDataSourceToken } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { DeployCheck, deployCheckLines } from './client/deploy-check.js';
import { DataSourceNotFoundError } from './errors/data-source-not-found.error.js';
import { ExecutorService } from './execution/executor.service.js';
import { GENEVA_DRIVE_LOGGER, GENEVA_DRIVE_OPTIONS, QUEUE_PORT } from './geneva-drive.constants.js';
import { HousekeepingService } from './housekeeping/housekeeping.service.js';
import { ProcessRoster } from './housekeeping/process-roster.js';
import type { ResolvedGenevaDriveOptions } from './interfaces/geneva-drive-options.interface.js';
import { AfterCommitSubscriber } from './persistence/after-commit.js';
import { SchemaCapabilities } from './persistence/schema-capabilities.js';
import { TransactionRunner } from './persistence/transaction-runner.js';
import { isDeadlineJob } from './queue/deadline-job.js';
import { STEP_JOB_GATE } from './queue/queue.tokens.js';
import type { StepJobGate } from './queue/step-job-gate.js';
import type { QueuePort } from './interfaces/queue.port.js';
import { WaitDeadline } from './execution/wait-deadline.js';
import { WorkflowRegistry } from './registry/workflow.registry.js';

/**
 * At init: finds the DataSource, binds the engine to it and checks the schema (each misconfiguration
 * stops the boot with an error that says what to do); once the application is up, warns of ongoing
 * workflows this code cannot take (the pre-deploy check), then starts consuming step jobs, recording
 * the process in the process table and scheduling housekeeping; stops before shutdown.
 */
@Injectable()
export class GenevaDriveLifecycle implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown {
  constructor(
    private readonly moduleRef: ModuleRef,
    private readonly schema: SchemaCapabilities,
    private readonly transactions: TransactionRunner,
    private readonly afterCommit: AfterCommitSubscriber,
    private readonly executor: ExecutorService,
    @Inject(QUEUE_PORT) private readonly queue: QueuePort,
    private readonly housekeeping: HousekeepingService,
    private readonly deadline: WaitDeadline,
    private readonly deployCheck: DeployCheck,
    private readonly registry: WorkflowRegistry,
    private readonly roster: ProcessRoster,
    @Inject(GENEVA_DRIVE_OPTIONS) private readonly options: ResolvedGenevaDriveOptions,
    @Inject(GENEVA_DRIVE_LOGGER) private readonly logger: LoggerService,
    /** A Redis queue adapter's (none with the local or a custom queue). */
    @Optional() @Inject(STEP_JOB_GATE) private readonly gate?: StepJobGate,
  ) {}

  async onModuleInit(): Promise<void> {
    const name = this.options.dataSource ?? 'default';
    const dataSource = this.findDataSource(name);
    this.transactions.bind(dataSource);
    this.afterCommit.attachTo(dataSource);
    await this.schema.detect(dataSource, name);
    if (!this.schema.hasSignals) {
      this.logger.warn('The signals migration has not run: waitFor steps will fail until it does (everything else works)');
    }
    const timeoutSteps = this.schema.hasDeadlines ? [] : this.registry.stepNamesWhere((step) => step.timeoutMs !== undefined);
    if (timeoutSteps.length > 0) {
      this.logger.warn(
        `The wait-deadlines migration (AddGenevaDriveWaitDeadlines1730000000004) has not run: steps with a timeout (${timeoutSteps.join(', ')}) will fail at their gate until it does`,
      );
    }
    const keyedSteps = this.schema.hasFlowControl ? [] : this.registry.stepNamesWhere((step) => step.concurrency !== undefined || step.rateLimit !== undefined);
    if (keyedSteps.length > 0) {
      this.logger.warn(
        `The flow-control migration (AddGenevaDriveFlowControl1730000000007) has not run: steps with a concurrency key or a rate limit (${keyedSteps.join(', ')}) will pause their workflow at their gate until it does`,
      );
    }
    const ratedSteps = !this.schema.hasFlowControl || this.schema.hasRateLimits ? [] : this.registry.stepNamesWhere((step) => step.rateLimit !== undefined);
    if (ratedSteps.length > 0) {
      this.logger.warn(
        `The rate-limits migration (AddGenevaDriveRateLimits1730000000009) has not run: steps with a rate limit (${ratedSteps.join(', ')}) will pause their workflow at their gate until it does`,
      );
    }
    if (this.schema.processTable === 'not migrated') {
      this.logger.warn('The processes migration (AddGenevaDriveProcesses1730000000005) has not run: housekeeping cannot report executions no live process can run (everything else works)');
    } else if (this.schema.processTable === 'entity not registered') {
      this.logger.warn('ProcessRecord is not among the DataSource\'s entities (use GENEVA_DRIVE_ENTITIES): housekeeping cannot report executions no live process can run (everything else works)');
    }
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.warnOfStrandedWorkflows();
    // A deadline job (its own job id) times a parked wait out; every other job runs its execution.
    // A Redis job's run ends once its workflow's next jobs are handed to the queue (StepJobGate.run).
    this.gate?.onHandOffs(this.afterCommit);
    await this.queue.start(async (executionId, jobId, hints) => {
      if (isDeadlineJob(jobId)) await this.deadline.fire(executionId);
      else await this.executor.execute(executionId, { jobId, hints, chain: true });
    });
    // In the process table from now on, with the classes and steps it runs (housekeeping reads it).
    await this.roster.start();
    if (this.options.housekeepingEveryMs !== null) {
      // No colon in the name: Bull keys repeatable jobs by colon-separated fields.
      await this.queue.repeat('geneva-drive-housekeeping', this.options.housekeepingEveryMs, () => this.housekeeping.run());
    }
  }

  async beforeApplicationShutdown(): Promise<void> {
    // Resumable steps stop at their next checkpoint, so stopping the queue does not wait for them to finish.
    this.executor.beginShutdown();
    // Jobs of work that committed just before: enqueued before the queue closes, not left to housekeeping.
    await this.afterCommit.drain();
    await this.queue.stop();
    await this.roster.stop();
  }

  /**
   * The pre-deploy check's summary as one warning, before any job runs, when some ongoing workflow
   * stands at a step this code cannot run. One grouped read; a failure to read is a warning too,
   * never a failed boot. A process that registers no workflow class has nothing to check against.
   */
  private async warnOfStrandedWorkflows(): Promise<void> {
    if (this.registry.all().length === 0) return;
    try {
      const report = await this.deployCheck.run();
      if (!report.ok) this.logger.warn(deployCheckLines(report).join('\n'));
    } catch (error) {
      this.logger.warn(`The pre-deploy check could not read the ongoing workflows at boot: ${(error as Error).message}`);
    }
  }

  /** Looked up at init, when every provider exists: the name may come from a forRootAsync factory. */
  private findDataSource(name: string): DataSource {
    let dataSource: DataSource | undefined;
    try {
      dataSource = this.moduleRef.get<DataSource>(getDataSourceToken(name), { strict: false });
    } catch {
      // Nest's UnknownElementException: no provider has that token.
    }
    if (!dataSource) throw new DataSourceNotFoundError(name);
    return dataSource;
  }
}
