import { GenevaDriveError } from './geneva-drive.error.js';

/** A new signal was sent to a finished or canceled workflow. Redeliveries of a known key do not raise. @publicApi */
export class WorkflowNotOngoingError extends GenevaDriveError {
  constructor(
    readonly workflowId: string,
    readonly state: string,
    readonly signalName: string,
  ) {
    super(`Cannot deliver signal "${signalName}" to a ${state} workflow (workflow ${workflowId})`);
  }
}

/** The encoded payload exceeds `maxSignalPayloadSize`; nothing was written. @publicApi */
export class SignalPayloadTooLargeError extends GenevaDriveError {
  constructor(
    readonly size: number,
    readonly limit: number,
  ) {
    super(
      `Signal payload is ${size} bytes, over maxSignalPayloadSize (${limit}): put large data on the hero or another table and send its id`,
    );
  }
}

/** The database lacks the signals migration, and a `waitFor` step ran. @publicApi */
export class SignalsNotMigratedError extends GenevaDriveError {
  constructor(what: string) {
    super(
      `${what} needs the geneva_drive_signals table and the signal_id/waiting_since columns: run the AddGenevaDriveSignals1730000000001 migration (in GENEVA_DRIVE_MIGRATIONS)`,
    );
  }
}

/**
 * `signal()` (or a signal given to `start`) got an invalid argument: a workflow that is neither a
 * record nor an id, options that are not an object or name an unknown option, a name or
 * idempotency key that is blank, longer than 255 bytes (UTF-8), or has a NUL character or a lone
 * UTF-16 surrogate, or a key that is neither a string nor a safe integer. Nothing was written.
 * @publicApi
 */
export class InvalidSignalError extends GenevaDriveError {
  constructor(
    readonly argument: 'workflow' | 'hero' | 'options' | 'name' | 'idempotencyKey' | 'signals',
    message: string,
  ) {
    super(message);
  }
}

/**
 * A signal named something no step of the workflow's class waits for (most often a typo): it would
 * stay pending for good. Nothing was written. A signal meant for a step a later version adds says
 * `allowUnknownName: true`. Not raised when a step waits with a custom matcher that names no
 * signal (it may take any name), nor by a process that does not have the workflow's class.
 * @publicApi
 */
export class UnknownSignalNameError extends InvalidSignalError {
  constructor(
    readonly workflowClass: string,
    readonly signalName: string,
    /** The names the class's `waitFor` steps listen to, in step order. */
    readonly waitedNames: readonly string[],
  ) {
    const waited = waitedNames.length > 0 ? `it waits for ${waitedNames.map((name) => `"${name}"`).join(', ')}` : 'it waits for no signal';
    super(
      'name',
      `No step of ${workflowClass} waits for a signal "${signalName}": ${waited}. To keep it for a step a later version adds, pass allowUnknownName: true`,
    );
  }
}

/** The database lacks the wait-deadlines migration, and a step with a `timeout` reached its gate. @publicApi */
export class DeadlinesNotMigratedError extends GenevaDriveError {
  constructor(what: string) {
    super(`${what} needs the timeout_at column of geneva_drive_step_executions: run the AddGenevaDriveWaitDeadlines1730000000004 migration (in GENEVA_DRIVE_MIGRATIONS)`);
  }
}

/** `signalHero` found no ongoing workflow of the class for the hero; nothing was written. @publicApi */
export class NoOngoingWorkflowError extends GenevaDriveError {
  constructor(
    readonly workflowClass: string,
    readonly heroType: string,
    readonly heroId: string,
    readonly signalName: string,
  ) {
    super(`Cannot deliver signal "${signalName}": no ongoing ${workflowClass} workflow for ${heroType} ${heroId}`);
  }
}

/**
 * `signal()` could not learn whether its signal was recorded: the connection was lost while it
 * committed, and the database stayed out of reach while it looked again. The signal may or may not
 * be stored (and its step woken). Deliver it again only with an `idempotencyKey` (a webhook's event
 * id): a redelivery of a known key changes nothing, a keyless one may be recorded twice.
 * @publicApi
 */
export class SignalOutcomeUnknownError extends GenevaDriveError {
  constructor(
    readonly workflowId: string,
    readonly signalName: string,
    cause: unknown,
  ) {
    super(
      `The connection to the database was lost while signal "${signalName}" to workflow ${workflowId} was committing, and whether it was recorded could not be read back: deliver it again with an idempotencyKey`,
      { cause },
    );
  }
}

/**
 * `receivedSignalOf(definition)` in a step that did not receive a signal of that name: the step does
 * not wait for it, or runs because its wait timed out (`onTimeout: 'run'`).
 * @publicApi
 */
export class SignalNotReceivedError extends GenevaDriveError {
  constructor(
    readonly workflowClass: string,
    readonly stepName: string,
    readonly signalName: string,
    readonly received: string | null,
  ) {
    super(
      `Step "${stepName}" of ${workflowClass} did not receive a signal "${signalName}": ${received === null ? 'it received no signal' : `it received "${received}"`}`,
    );
  }
}
