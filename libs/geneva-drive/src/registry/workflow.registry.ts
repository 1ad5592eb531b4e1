import { Injectable } from '@nestjs/common';
import { NotInitialisedError } from '../errors/not-initialised.error.js';
import { StepConfigurationError } from '../errors/step-configuration.error.js';
import { UnknownWorkflowError } from '../errors/unknown-workflow.error.js';
import type { StepDefinition, WorkflowDefinition } from './workflow-definition.js';

/** Workflow definitions by stored type name and by class; filled once at boot by the explorer. */
@Injectable()
export class WorkflowRegistry {
  private readonly byName = new Map<string, WorkflowDefinition>();
  private readonly byClass = new Map<Function, WorkflowDefinition>();
  /** Set once the explorer has looked at every provider: before that, a missing class proves nothing. */
  private explored = false;

  markExplored(): void {
    this.explored = true;
  }

  register(definition: WorkflowDefinition): void {
    const existing = this.byName.get(definition.name);
    if (existing && existing.target !== definition.target) {
      throw new StepConfigurationError(definition.target.name, undefined, `workflow name "${definition.name}" is already used by ${existing.target.name}`);
    }
    this.byName.set(definition.name, definition);
    this.byClass.set(definition.target, definition);
  }

  /** The definition of a stored type name, or undefined when the class is gone. */
  findByName(name: string): WorkflowDefinition | undefined {
    return this.byName.get(name);
  }

  getByClass(target: Function): WorkflowDefinition {
    if (typeof target !== 'function') throw new UnknownWorkflowError(target === null ? 'null' : typeof target, true);
    const definition = this.byClass.get(target);
    if (!definition && !this.explored) throw new NotInitialisedError();
    if (!definition) throw new UnknownWorkflowError(target.name);
    return definition;
  }

  all(): WorkflowDefinition[] {
    return [...this.byName.values()];
  }

  /** Whether a registered workflow or step gives its jobs a queue `priority`. */
  hasJobPriorities(): boolean {
    return this.all().some((definition) => definition.jobOptions.priority !== undefined || definition.steps.some((step) => step.jobOptions.priority !== undefined));
  }

  /** The registered steps that pass `test`, as `Workflow.step`: the boot warnings of a missing migration name them. */
  stepNamesWhere(test: (step: StepDefinition) => boolean): string[] {
    return this.all().flatMap((definition) => definition.steps.filter(test).map((step) => `${definition.name}.${step.name}`));
  }
}
