import { ForbiddenException, Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { isObservable, lastValueFrom } from 'rxjs';
import { DASHBOARD_OPTIONS, DASHBOARD_USER_GUARD } from './dashboard.constants.js';
import type { ResolvedDashboardOptions } from './dashboard.options.js';
import { hasValidCsrfToken } from './csrf.js';

/**
 * Runs on every dashboard route: the application's guard first (authentication), then, for anything
 * but GET/HEAD, the read-only switch and the CSRF check.
 */
@Injectable()
export class DashboardGuard implements CanActivate {
  constructor(
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    @Inject(DASHBOARD_USER_GUARD) private readonly userGuard: CanActivate | null,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (this.userGuard) {
      const verdict = this.userGuard.canActivate(context);
      const allowed = isObservable(verdict) ? await lastValueFrom(verdict) : await verdict;
      if (!allowed) return false;
    }
    const request = context.switchToHttp().getRequest<{ method: string; headers: Record<string, string | undefined>; body?: unknown }>();
    if (request.method === 'GET' || request.method === 'HEAD') return true;
    if (this.options.readOnly) throw new ForbiddenException('The dashboard is read-only');
    if (!hasValidCsrfToken(request)) throw new ForbiddenException('Missing or invalid CSRF token: reload the page and try again');
    return true;
  }
}
