import { GenevaDriveError } from './geneva-drive.error.js';

/** `this.manager` was used in a step that is not transactional. @publicApi */
export class NotTransactionalError extends GenevaDriveError {
  constructor(
    readonly workflowClass: string,
    readonly stepName: string,
  ) {
    super(
      `${workflowClass}.${stepName}: this.manager exists only in a transactional step. Declare @Step({ transactional: true }) ` +
        `(or @Workflow({ transactional: true }) for every step), and its writes through this.manager commit together with the step's outcome`,
    );
  }
}

/** A transactional step's body outlasted its `transactionTimeout`: its writes were rolled back and its exception policy applies. @publicApi */
export class TransactionTimeoutError extends GenevaDriveError {
  constructor(
    readonly stepName: string,
    readonly timeoutMs: number,
    readonly elapsedMs: number,
  ) {
    super(
      `Transactional step "${stepName}" took ${Math.round(elapsedMs)} ms, over its transactionTimeout of ${timeoutMs} ms: its writes were rolled back. ` +
        `Keep the body short (do slow calls in a step of their own), or raise transactionTimeout`,
    );
  }
}
