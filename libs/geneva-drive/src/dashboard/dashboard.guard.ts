import { ForbiddenException, Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { isObservable, lastValueFrom } from 'rxjs';
import { DASHBOARD_OPTIONS, DASHBOARD_USER_GUARD } from './dashboard.constants.js';
import type { ResolvedDashboardOptions } from './dashboard.options.js';
import { hasValidCsrfToken, type CsrfRequest } from './csrf.js';
import { isSameOrigin, type OriginRequest } from './request-origin.js';
import { setSecurityHeaders } from './security-headers.js';

/**
 * Runs on every dashboard route: the security headers first (so refusals carry them too), the
 * application's guard (authentication), then, for anything but GET/HEAD, the read-only switch, the
 * origin check and the CSRF check.
 */
@Injectable()
export class DashboardGuard implements CanActivate {
  constructor(
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    @Inject(DASHBOARD_USER_GUARD) private readonly userGuard: CanActivate | null,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    setSecurityHeaders(context.switchToHttp().getResponse());
    if (this.userGuard) {
      const verdict = this.userGuard.canActivate(context);
      const allowed = isObservable(verdict) ? await lastValueFrom(verdict) : await verdict;
      if (!allowed) return false;
    }
    const request = context.switchToHttp().getRequest<CsrfRequest & OriginRequest & { method: string }>();
    if (request.method === 'GET' || request.method === 'HEAD') return true;
    if (this.options.readOnly) throw new ForbiddenException('The dashboard is read-only');
    if (!isSameOrigin(request)) throw new ForbiddenException("Refused a request from another origin: actions are taken from the dashboard's own pages");
    if (!hasValidCsrfToken(request, this.options.csrfSecret)) throw new ForbiddenException('Missing or invalid CSRF token: reload the page and try again');
    return true;
  }
}
