import { GenevaDriveError } from './geneva-drive.error.js';

/** A workflow class or type name is not registered (not decorated with `@Workflow`, or not a provider). @publicApi */
export class UnknownWorkflowError extends GenevaDriveError {
  constructor(readonly workflow: string) {
    super(
      `Unknown workflow "${workflow}": decorate the class with @Workflow() and list it among the providers of a module`,
    );
  }
}
