import { Injectable, Scope, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { WORKFLOW_METADATA } from '../geneva-drive.constants.js';
import { StepConfigurationError } from '../errors/step-configuration.error.js';
import { GenevaWorkflow } from '../workflow/geneva-workflow.js';
import { buildWorkflowDefinition } from './build-definition.js';
import { WorkflowRegistry } from './workflow.registry.js';

/** Finds every `@Workflow` provider at module init, validates it and fills the registry. */
@Injectable()
export class WorkflowExplorer implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly registry: WorkflowRegistry,
  ) {}

  onModuleInit(): void {
    const seen = new Set<Function>();
    for (const wrapper of this.discovery.getProviders()) {
      const target = wrapper.metatype as Function | undefined;
      if (!target || typeof target !== 'function' || seen.has(target) || !Reflect.hasOwnMetadata(WORKFLOW_METADATA, target)) continue;
      seen.add(target);
      if (!(target.prototype instanceof GenevaWorkflow)) {
        throw new StepConfigurationError(target.name, undefined, 'a @Workflow class must extend GenevaWorkflow');
      }
      if (wrapper.scope === Scope.REQUEST || wrapper.isDependencyTreeStatic?.() === false) {
        throw new StepConfigurationError(target.name, undefined, 'workflows run outside any request: the class and its dependencies must not be request-scoped');
      }
      if (wrapper.scope !== Scope.TRANSIENT) {
        // An @Injectable() above @Workflow() resets the scope: executions would share one instance.
        throw new StepConfigurationError(target.name, undefined, '@Workflow() makes the class a transient provider; remove @Injectable() from it');
      }
      this.registry.register(buildWorkflowDefinition(target));
    }
    this.registry.markExplored();
  }
}
