/** Manual § Hooks, instrumentation and logging. */
import { ConsoleLogger, Injectable, Module, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import {
  GENEVA_DRIVE_CHANNELS,
  GenevaDriveModule,
  GenevaWorkflow,
  Step,
  Workflow,
  type FinalizeEvent,
  type HousekeepingSummary,
  type PreconditionEvent,
  type SignalEvent,
  type StepEvent,
  type StepExecution,
} from 'geneva-drive';
import { Order } from './shop.js';

// #region hooks
/** A base class for workflows that time their steps. Not a workflow itself: no @Workflow. */
export abstract class TimedWorkflow<Hero> extends GenevaWorkflow<Hero> {
  override async beforeStepExecution(execution: StepExecution): Promise<void> {
    this.logger.debug?.(`starting ${execution.stepName} (attempt scheduled for ${execution.scheduledFor.toISOString()})`);
  }

  override async aroundStepExecution(execution: StepExecution, run: () => Promise<void>): Promise<unknown> {
    const started = performance.now();
    try {
      return await run();
    } finally {
      this.logger.log(`${execution.stepName} ran for ${Math.round(performance.now() - started)} ms`);
    }
  }
}

@Workflow({ hero: () => Order })
export class ReturnsWorkflow extends TimedWorkflow<Order> {
  @Step()
  async inspectParcel() {
    /* ... */
  }
}
// #endregion hooks

// #region metrics
@Injectable()
export class WorkflowMetrics implements OnModuleInit, OnModuleDestroy {
  readonly counters = new Map<string, number>();

  private readonly listeners: Record<string, (message: unknown) => void> = {
    [GENEVA_DRIVE_CHANNELS.precondition]: (message) => {
      const event = message as PreconditionEvent;
      this.count(`precondition.${event.outcome}`);
    },
    [GENEVA_DRIVE_CHANNELS.step]: (message) => {
      const event = message as StepEvent;
      this.count(`step.${event.workflowClass}.${event.stepName}.${event.outcome}`);
    },
    [GENEVA_DRIVE_CHANNELS.finalize]: (message) => {
      const event = message as FinalizeEvent;
      if (event.workflowState === 'paused') this.count(`paused.${event.workflowClass}`);
    },
    [GENEVA_DRIVE_CHANNELS.signal]: (message) => {
      const event = message as SignalEvent;
      this.count(event.duplicate ? 'signal.duplicate' : event.woken > 0 ? 'signal.woke' : 'signal.buffered');
    },
    [GENEVA_DRIVE_CHANNELS.housekeeping]: (message) => {
      const summary = message as HousekeepingSummary;
      const overdue = summary.gauges?.['geneva_drive.waiting_overdue']?.total ?? 0;
      this.counters.set('geneva_drive.waiting_overdue', overdue);
    },
  };

  onModuleInit(): void {
    for (const [channel, listener] of Object.entries(this.listeners)) subscribe(channel, listener);
  }

  onModuleDestroy(): void {
    for (const [channel, listener] of Object.entries(this.listeners)) unsubscribe(channel, listener);
  }

  private count(key: string): void {
    this.counters.set(key, (this.counters.get(key) ?? 0) + 1);
  }
}
// #endregion metrics

// #region logger
@Module({
  imports: [GenevaDriveModule.forRoot({ logger: new ConsoleLogger('Workflows', { json: true }) })],
  providers: [WorkflowMetrics, ReturnsWorkflow],
})
export class ObservedModule {}
// #endregion logger
