import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * A workflow class or type name is not registered (not decorated with `@Workflow`, or not a
 * provider), or what was given in its place is not a class at all.
 * @publicApi
 */
export class UnknownWorkflowError extends GenevaDriveError {
  constructor(
    readonly workflow: string,
    notAClass = false,
  ) {
    super(
      notAClass
        ? `Expected a workflow class, got ${workflow}: pass a class decorated with @Workflow() and listed among the providers of a module`
        : `Unknown workflow "${workflow}": decorate the class with @Workflow() and list it among the providers of a module`,
    );
  }
}
