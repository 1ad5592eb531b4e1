import { randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * CSRF protection by double submit: a random token lives in a SameSite=Strict, HttpOnly cookie
 * scoped to the dashboard, and every state-changing request must repeat it (form field `_csrf` or
 * header `x-csrf-token`). Another site can make the browser send the cookie, never read it. Needs no
 * server-side session, so it works across processes behind a load balancer.
 */
export const CSRF_COOKIE = 'geneva_drive_csrf';
export const CSRF_FIELD = '_csrf';
export const CSRF_HEADER = 'x-csrf-token';

interface RequestLike {
  headers: Record<string, string | string[] | undefined>;
  body?: unknown;
  secure?: boolean;
}

interface ResponseLike {
  setHeader(name: string, value: string): unknown;
}

function cookieToken(request: RequestLike): string | null {
  const header = request.headers.cookie;
  const cookies = Array.isArray(header) ? header.join('; ') : (header ?? '');
  for (const part of cookies.split(';')) {
    const [name, ...rest] = part.trim().split('=');
    if (name === CSRF_COOKIE) return decodeURIComponent(rest.join('='));
  }
  return null;
}

/** The request's token, or a new one set as the cookie on the response. */
export function ensureCsrfToken(request: RequestLike, response: ResponseLike, path: string): string {
  const existing = cookieToken(request);
  if (existing && /^[0-9a-f]{64}$/.test(existing)) return existing;
  const token = randomBytes(32).toString('hex');
  const secure = request.secure ? '; Secure' : '';
  response.setHeader('Set-Cookie', `${CSRF_COOKIE}=${token}; Path=${path}; HttpOnly; SameSite=Strict${secure}`);
  return token;
}

/** True when the request repeats its cookie's token in the form field or the header. */
export function hasValidCsrfToken(request: RequestLike): boolean {
  const expected = cookieToken(request);
  const header = request.headers[CSRF_HEADER];
  const field = typeof request.body === 'object' && request.body !== null ? (request.body as Record<string, unknown>)[CSRF_FIELD] : undefined;
  const given = typeof header === 'string' ? header : typeof field === 'string' ? field : null;
  if (!expected || !given || expected.length !== given.length) return false;
  return timingSafeEqual(Buffer.from(expected), Buffer.from(given));
}
