import { DEFAULT_DASHBOARD_PATH } from './dashboard.constants.js';
import { DashboardUnguardedError } from './dashboard-unguarded.error.js';
import type { GenevaDriveDashboardOptions } from './dashboard-options.interface.js';

export interface ResolvedDashboardOptions extends Required<Pick<GenevaDriveDashboardOptions, 'readOnly' | 'allowUnauthenticated' | 'pageSize'>> {
  guard: GenevaDriveDashboardOptions['guard'];
  path: string;
}

const OPTION_KEYS = ['guard', 'readOnly', 'allowUnauthenticated', 'pageSize'];

/** '/geneva', 'geneva/' and 'geneva' all mount at '/geneva'. */
export function normalizePath(path: string | undefined): string {
  const trimmed = (path ?? DEFAULT_DASHBOARD_PATH).trim().replace(/^\/+|\/+$/g, '');
  return `/${trimmed}`;
}

/** Applies defaults and refuses an unguarded mount (DashboardUnguardedError) unless it was asked for. */
export function resolveDashboardOptions(options: GenevaDriveDashboardOptions, path: string): ResolvedDashboardOptions {
  const unknown = Object.keys(options).filter((key) => !OPTION_KEYS.includes(key));
  if (unknown.length > 0) throw new TypeError(`Unknown GenevaDriveDashboardModule option(s): ${unknown.join(', ')}`);
  if (!options.guard && options.allowUnauthenticated !== true) throw new DashboardUnguardedError(path);
  const pageSize = options.pageSize ?? 50;
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 500) throw new TypeError(`pageSize must be an integer from 1 to 500, got ${String(pageSize)}`);
  return { guard: options.guard, readOnly: options.readOnly ?? false, allowUnauthenticated: options.allowUnauthenticated ?? false, pageSize, path };
}
