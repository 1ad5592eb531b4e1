import { GenevaDriveError } from './geneva-drive.error.js';

/** The engine tried a state transition its state machine forbids: an internal inconsistency. @publicApi */
export class InvalidTransitionError extends GenevaDriveError {
  constructor(
    readonly entity: 'workflow' | 'step execution' | 'signal',
    readonly from: string,
    readonly to: string,
  ) {
    super(`Invalid ${entity} transition from ${from} to ${to}`);
  }
}
