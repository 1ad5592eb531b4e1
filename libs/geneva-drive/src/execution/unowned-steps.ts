import { Inject, Injectable, type LoggerService } from '@nestjs/common';
import { StepNotDefinedError } from '../errors/step-not-defined.error.js';
import { GENEVA_DRIVE_LOGGER } from '../geneva-drive.constants.js';
import { missingHere } from '../registry/runnable-steps.js';
import { WorkflowRegistry } from '../registry/workflow.registry.js';

/**
 * Jobs of a workflow class, or of a step, this process does not have (registry/runnable-steps.ts):
 * an old worker during a rolling deploy that adds the class or the step, or a new one after a deploy
 * that removed them. Such a job decides nothing — no state change, no job id written — and ends with
 * a StepNotDefinedError, on which the queue hands it to another process. One warning per class (per
 * class and step for a missing step) per process, not one per job: a deploy can move thousands.
 */
@Injectable()
export class UnownedSteps {
  private readonly warned = new Set<string>();

  constructor(
    private readonly registry: WorkflowRegistry,
    @Inject(GENEVA_DRIVE_LOGGER) private readonly logger: LoggerService,
  ) {}

  /** The error that leaves the job to another process, or null when this process runs (or may skip) the step. */
  refuse(workflowType: string, stepName: string, workflowId: string, executionId: string, what: 'step job' | 'deadline job' = 'step job'): StepNotDefinedError | null {
    const missing = missingHere(this.registry, workflowType, stepName);
    if (missing === null) return null;
    const key = missing === 'class' ? workflowType : `${workflowType}\u0000${stepName}`;
    if (!this.warned.has(key)) {
      this.warned.add(key);
      this.logger.warn(
        missing === 'class'
          ? `Workflow ${workflowType} is not registered in this process: its ${what}s are left to a process that has the class (warned once)`
          : `Step "${stepName}" of workflow ${workflowType} is not defined in this process: its ${what}s are left to a process that has the step (warned once)`,
      );
    }
    return new StepNotDefinedError(workflowType, stepName, workflowId, executionId, { missing });
  }
}
