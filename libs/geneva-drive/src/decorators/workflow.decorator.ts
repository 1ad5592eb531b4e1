import { Injectable, Scope } from '@nestjs/common';
import { WORKFLOW_METADATA } from '../geneva-drive.constants.js';
import type { WorkflowOptions } from '../interfaces/workflow-options.interface.js';

/**
 * Marks a class extending `GenevaWorkflow` as a workflow. The class must be listed among a module's
 * providers; it is transient, so every step execution gets a fresh instance with its dependencies
 * injected (nothing leaks between steps or concurrent executions).
 * @publicApi
 */
export function Workflow(options: WorkflowOptions = {}): ClassDecorator {
  return (target) => {
    Reflect.defineMetadata(WORKFLOW_METADATA, options, target);
    Injectable({ scope: Scope.TRANSIENT })(target);
  };
}

export function workflowOptionsOf(target: Function): WorkflowOptions | undefined {
  return Reflect.getOwnMetadata(WORKFLOW_METADATA, target);
}
