import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * An option that does not exist, or a value an option does not accept: in `GenevaDriveModule`'s
 * options (at boot, also for what a `forRootAsync` factory returns) or in `WorkflowService.start`'s
 * (nothing was written).
 * @publicApi
 */
export class InvalidOptionError extends GenevaDriveError {
  /**
   * @param where `'GenevaDriveModule'` or `'WorkflowService.start'`
   * @param option the option's path, e.g. `queue.adapter`
   */
  constructor(
    readonly where: string,
    readonly option: string,
    problem: string,
  ) {
    super(`${where}: ${problem}`);
  }
}
