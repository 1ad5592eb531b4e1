import { randomBytes } from 'node:crypto';
import { DEFAULT_DASHBOARD_PATH } from './dashboard.constants.js';
import { DashboardPathError } from './dashboard-path.error.js';
import { DashboardUnguardedError } from './dashboard-unguarded.error.js';
import type { GenevaDriveDashboardOptions } from './dashboard-options.interface.js';

export interface ResolvedDashboardOptions extends Required<Pick<GenevaDriveDashboardOptions, 'readOnly' | 'allowUnauthenticated' | 'pageSize'>> {
  guard: GenevaDriveDashboardOptions['guard'];
  path: string;
  csrfSecret: Buffer;
}

const OPTION_KEYS = ['guard', 'readOnly', 'allowUnauthenticated', 'pageSize', 'csrfSecret'];
const SEGMENTS = /^[A-Za-z0-9._~-]+(\/[A-Za-z0-9._~-]+)*$/;

/**
 * '/geneva', 'geneva/' and 'geneva' all mount at '/geneva'; '/' at the root. Anything a link could
 * not carry as is throws DashboardPathError: links are built from the path.
 */
export function normalizePath(path: string | undefined): string {
  const given = path ?? DEFAULT_DASHBOARD_PATH;
  const trimmed = given.trim().replace(/^\/+|\/+$/g, '');
  if (trimmed !== '' && (!SEGMENTS.test(trimmed) || trimmed.split('/').some((segment) => segment === '.' || segment === '..'))) throw new DashboardPathError(given);
  return `/${trimmed}`;
}

/** Applies defaults and refuses an unguarded mount (DashboardUnguardedError) unless it was asked for. */
export function resolveDashboardOptions(options: GenevaDriveDashboardOptions, path: string): ResolvedDashboardOptions {
  const unknown = Object.keys(options).filter((key) => !OPTION_KEYS.includes(key));
  if (unknown.length > 0) throw new TypeError(`Unknown GenevaDriveDashboardModule option(s): ${unknown.join(', ')}`);
  if (!options.guard && options.allowUnauthenticated !== true) throw new DashboardUnguardedError(path);
  const pageSize = options.pageSize ?? 50;
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 500) throw new TypeError(`pageSize must be an integer from 1 to 500, got ${String(pageSize)}`);
  const secret = options.csrfSecret;
  if (secret !== undefined && (typeof secret !== 'string' || Buffer.byteLength(secret) < 32)) throw new TypeError('csrfSecret must be a string of at least 32 bytes (e.g. 64 hex digits from openssl rand -hex 32)');
  return {
    guard: options.guard,
    readOnly: options.readOnly ?? false,
    allowUnauthenticated: options.allowUnauthenticated ?? false,
    pageSize,
    path,
    // One per process when none is given: tokens then verify only in the process that issued them.
    csrfSecret: secret === undefined ? randomBytes(32) : Buffer.from(secret),
  };
}
