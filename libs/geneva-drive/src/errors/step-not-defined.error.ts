import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * An execution names a workflow class this process does not register, or a step its class neither
 * defines nor may skip (`skipUndefinedSteps`): another version of the code — a worker not yet
 * deployed, or one already replaced — owns it. Nothing was decided: the execution and its workflow
 * are as they were, and the queue hands the job to a process that has the class and the step (the
 * local queue drops it: that process runs it from its own rows). Thrown to whoever ran the job.
 * @publicApi
 */
export class StepNotDefinedError extends GenevaDriveError {
  constructor(
    readonly workflowType: string,
    readonly stepName: string,
    readonly workflowId: string,
    readonly executionId: string,
    /** What this process lacks: the whole class, or only the step. */
    readonly missing: 'class' | 'step' = 'step',
  ) {
    super(
      missing === 'class'
        ? `Workflow ${workflowType} is not registered in this process (step "${stepName}", workflow ${workflowId}, execution ${executionId}): its job is left to a process that has the class`
        : `Step "${stepName}" is not defined in workflow ${workflowType} in this process (workflow ${workflowId}, execution ${executionId}): its job is left to a process that has the step`,
    );
  }
}
