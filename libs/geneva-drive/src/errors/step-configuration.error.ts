import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * A `@Workflow`/`@Step` declaration is invalid. Thrown when the application boots,
 * naming the workflow class and the step.
 * @publicApi
 */
export class StepConfigurationError extends GenevaDriveError {
  constructor(
    readonly workflowClass: string,
    readonly stepName: string | undefined,
    readonly problem: string,
  ) {
    super(stepName === undefined ? `${workflowClass}: ${problem}` : `${workflowClass}.${stepName}: ${problem}`);
  }
}
