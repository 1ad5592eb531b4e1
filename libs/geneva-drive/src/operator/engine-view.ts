import { Inject, Injectable } from '@nestjs/common';
import { GENEVA_DRIVE_OPTIONS } from '../geneva-drive.constants.js';
import type { ResolvedGenevaDriveOptions } from '../interfaces/geneva-drive-options.interface.js';
import type { EntityManager } from 'typeorm';
import { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import { TransactionRunner } from '../persistence/transaction-runner.js';
import type { WorkflowDefinition } from '../registry/workflow-definition.js';
import { WorkflowRegistry } from '../registry/workflow.registry.js';

/** The thresholds the housekeeping gauges use, as the engine resolved them. */
export type EngineThresholds = Readonly<Pick<ResolvedGenevaDriveOptions, 'waitingVisibilityThresholdMs' | 'stuckInProgressThresholdMs' | 'stuckScheduledThresholdMs'>>;

/**
 * What the dashboard and the CLI may read of the engine they run beside: the registered workflow
 * definitions (immutable) and the gauge thresholds. Exported by GenevaDriveModule for them; not
 * part of the package's public API.
 */
@Injectable()
export class EngineView {
  readonly thresholds: EngineThresholds;

  constructor(
    private readonly registry: WorkflowRegistry,
    @Inject(GENEVA_DRIVE_OPTIONS) options: ResolvedGenevaDriveOptions,
    private readonly schema: SchemaCapabilities,
    private readonly transactions: TransactionRunner,
  ) {
    const { waitingVisibilityThresholdMs, stuckInProgressThresholdMs, stuckScheduledThresholdMs } = options;
    this.thresholds = Object.freeze({ waitingVisibilityThresholdMs, stuckInProgressThresholdMs, stuckScheduledThresholdMs });
  }

  /** Every registered workflow definition (filled when the application initialises). */
  definitions(): readonly WorkflowDefinition[] {
    return this.registry.all();
  }

  /** An id in the tables' key form (bigint or uuid), or null when no row can have it: a cursor to check before it reaches SQL. */
  canonicalId(id: string): string | null {
    return this.schema.canonicalId(id);
  }

  /** Whether the signals migration ran (without it a workflow has no signals to show). */
  get hasSignals(): boolean {
    return this.schema.hasSignals;
  }

  /** Whether the child-workflows migration ran (without it no workflow has a parent or children). */
  get hasChildren(): boolean {
    return this.schema.hasChildren;
  }

  /** Whether the flow-control migration ran (without it no execution waits for or holds a concurrency key). */
  get hasFlowControl(): boolean {
    return this.schema.hasFlowControl;
  }

  /** Runs `read` on one snapshot of the engine's database (TransactionRunner.snapshot). */
  snapshot<T>(read: (manager: EntityManager) => Promise<T>): Promise<T> {
    return this.transactions.snapshot(read);
  }

  /** The definition of a workflow type, if this application has its class. */
  definition(type: string): WorkflowDefinition | undefined {
    return this.registry.findByName(type);
  }
}
