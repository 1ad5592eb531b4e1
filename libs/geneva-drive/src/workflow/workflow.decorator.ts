import { Injectable, Scope } from '@nestjs/common';
import { SCOPE_OPTIONS_METADATA } from '@nestjs/common/constants.js';
import { WORKFLOW_METADATA } from '../geneva-drive.constants.js';
import type { WorkflowOptions } from './workflow-options.interface.js';

/**
 * Marks a class extending `GenevaWorkflow` as a workflow. The class must be listed among a module's
 * providers; it is transient, so every step execution gets a fresh instance with its dependencies
 * injected (nothing leaks between steps or concurrent executions).
 * @publicApi
 */
export function Workflow(options: WorkflowOptions = {}): ClassDecorator {
  return (target) => {
    Reflect.defineMetadata(WORKFLOW_METADATA, options, target);
    // Keep a request scope someone declared, so the explorer can refuse it with a clear error.
    const declared = Reflect.getMetadata(SCOPE_OPTIONS_METADATA, target) as { scope?: Scope } | undefined;
    if (declared?.scope !== Scope.REQUEST) Injectable({ scope: Scope.TRANSIENT })(target);
  };
}

export function workflowOptionsOf(target: Function): WorkflowOptions | undefined {
  return Reflect.getOwnMetadata(WORKFLOW_METADATA, target);
}
