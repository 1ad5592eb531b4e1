/**
 * Sent with every dashboard response, refusals included. The pages need only their own stylesheet and
 * script (no inline code, nothing from elsewhere), so the policy can be `default-src 'self'`; no page
 * may be framed (clickjacking an action button), sniffed into another type, or leak its URL (a
 * workflow id, a filter) to another site.
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'same-origin',
};

/** The parts of Express's response the headers need. */
interface HeaderResponse {
  setHeader(name: string, value: string): unknown;
}

/** Sets {@link SECURITY_HEADERS} on the response. */
export function setSecurityHeaders(response: HeaderResponse): void {
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) response.setHeader(name, value);
}

/**
 * Middleware for the whole mount path, before Nest looks for a route: Nest's own answers there (an
 * unknown path or method, 404; a parameter that does not decode, 400) carry the headers too.
 */
export function securityHeadersMiddleware(_request: unknown, response: HeaderResponse, next: () => void): void {
  setSecurityHeaders(response);
  next();
}

/**
 * Express error middleware for the mount path: a request refused before the middleware above ran —
 * by the application's body parser, which Nest mounts ahead of every module's middleware (malformed
 * JSON, 400; a body over its limit, 413) — gets the headers on its way to Nest's error answer.
 */
export function securityHeadersOnError(error: unknown, _request: unknown, response: HeaderResponse & { headersSent?: boolean }, next: (error: unknown) => void): void {
  if (!response.headersSent) setSecurityHeaders(response);
  next(error);
}
