import type { ProcessCatalog, ProcessCatalogEntry } from '../entities/process.entity.js';
import type { WorkflowDefinition } from './workflow-definition.js';
import type { WorkflowRegistry } from './workflow.registry.js';

/**
 * Which executions a process can run, from its own classes or from another process's catalog. The
 * one rule: a process runs an execution when it registers the workflow's class and the class
 * defines the step, declares it removed (a gravestone: skipped), or lets this code skip steps it does
 * not define (`skipUndefinedSteps`). Anything
 * else is another version's business: the process decides nothing about it and leaves its job to a
 * process that has the class and the step (see StepNotDefinedError).
 */

/** What one process can run of one workflow class (kept in the process table). */
export type RunnableSteps = ProcessCatalogEntry;

/** Workflow type → what a process can run of it: what it records in the process table. */
export type StepCatalog = ProcessCatalog;

/** True when the class neither defines `stepName`, nor declares it removed, nor may skip it: this code has nothing to say about the execution. */
export function lacksStep(definition: WorkflowDefinition, stepName: string): boolean {
  return !definition.knowsStep(stepName) && !definition.skipUndefinedSteps;
}

/** What this process lacks to run an execution of `workflowType` at `stepName`: its class, the step, or nothing (null). */
export function missingHere(registry: WorkflowRegistry, workflowType: string, stepName: string): 'class' | 'step' | null {
  const definition = registry.findByName(workflowType);
  if (!definition) return 'class';
  return lacksStep(definition, stepName) ? 'step' : null;
}

/** This process's catalog: every registered class and what it can run of it. */
export function catalogOf(definitions: readonly WorkflowDefinition[]): StepCatalog {
  const catalog: StepCatalog = {};
  for (const definition of definitions) {
    catalog[definition.name] = { steps: definition.stepNames, removedSteps: definition.removedSteps.map((removed) => removed.name), skipUndefinedSteps: definition.skipUndefinedSteps };
  }
  return catalog;
}

/** Whether a process with `catalog` can run an execution of `workflowType` at `stepName` (the rule above, read from a catalog). */
export function catalogRuns(catalog: StepCatalog, workflowType: string, stepName: string): boolean {
  const entry = Object.hasOwn(catalog, workflowType) ? catalog[workflowType] : undefined;
  if (!entry) return false;
  return entry.skipUndefinedSteps === true || entry.steps?.includes(stepName) === true || entry.removedSteps?.includes(stepName) === true;
}
