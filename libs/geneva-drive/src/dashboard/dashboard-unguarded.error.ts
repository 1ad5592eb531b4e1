import { GenevaDriveError } from '../errors/geneva-drive.error.js';

/**
 * The dashboard was mounted without a `guard` and without `allowUnauthenticated: true`: it would let
 * anyone pause, cancel or signal workflows, so the application does not boot.
 * @publicApi
 */
export class DashboardUnguardedError extends GenevaDriveError {
  constructor(readonly path: string) {
    super(
      `GenevaDriveDashboardModule at ${path} has no guard: pass guard (any Nest CanActivate, e.g. your auth guard), ` +
        'or allowUnauthenticated: true if something in front of the app authenticates every request',
    );
  }
}
