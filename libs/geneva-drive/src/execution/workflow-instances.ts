import { Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { Inject, type LoggerService } from '@nestjs/common';
import type { StepExecution } from '../entities/step-execution.entity.js';
import type { WorkflowRecord } from '../entities/workflow.entity.js';
import { GENEVA_DRIVE_LOGGER } from '../geneva-drive.constants.js';
import type { EntityManager } from 'typeorm';
import { ContextLogger } from '../instrumentation/context-logger.js';
import type { WorkflowDefinition } from '../registry/workflow-definition.js';
import { loadHero } from '../persistence/hero.js';
import { workflowInternals, type GenevaWorkflow } from '../workflow/geneva-workflow.js';

/** Creates a fresh workflow instance per execution, with the class's dependencies injected by Nest. */
@Injectable()
export class WorkflowInstances {
  constructor(
    private readonly moduleRef: ModuleRef,
    @Inject(GENEVA_DRIVE_LOGGER) private readonly logger: LoggerService,
  ) {}

  create(definition: WorkflowDefinition): Promise<GenevaWorkflow<any>> {
    // Workflow classes are transient providers: each resolve() builds a new instance.
    return this.moduleRef.resolve(definition.target as new () => GenevaWorkflow<any>, undefined, { strict: false });
  }

  /**
   * An instance for evaluating matchers outside a step (in `signal()` and `resume()`): bound to the
   * locked record and, when the matcher may look at it, its hero (null when the hero is gone).
   */
  async createBound(
    manager: EntityManager,
    definition: WorkflowDefinition,
    record: WorkflowRecord,
    execution: StepExecution,
    options: { withHero: boolean },
  ): Promise<GenevaWorkflow<any>> {
    const instance = await this.create(definition);
    const hero = options.withHero ? await loadHero(manager, record.heroType, record.heroId) : undefined;
    workflowInternals.bind(instance, { hero, record, execution, signal: null, logger: new ContextLogger(this.logger, record, execution) });
    return instance;
  }
}
