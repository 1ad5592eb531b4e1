/**
 * Whether a state-changing request comes from the dashboard's own origin, by what the browser says:
 * `Sec-Fetch-Site` (Chromium, Firefox, Safari) must be `same-origin`, and `Origin`, when sent, must
 * name this host. A page on a sibling subdomain or another port is same-site, not same-origin, and
 * is refused even before the CSRF token is looked at. A request with neither header is not from a
 * browser (curl, a script): CSRF needs a browser, so only the token applies to it.
 */
export interface OriginRequest {
  headers: Record<string, string | string[] | undefined>;
  /** Express: the Host header, or X-Forwarded-Host behind a trusted proxy. */
  host?: string;
}

export function isSameOrigin(request: OriginRequest): boolean {
  const site = request.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin') return false;
  const origin = request.headers.origin;
  if (origin === undefined) return true;
  const host = request.host ?? request.headers.host;
  try {
    return typeof origin === 'string' && typeof host === 'string' && new URL(origin).host === host.toLowerCase();
  } catch {
    return false; // "null" (a sandboxed or file page) or garbage
  }
}
