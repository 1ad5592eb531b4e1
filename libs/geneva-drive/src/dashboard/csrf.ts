import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * CSRF protection by a signed double submit. The token is `nonce.mac`, the mac an HMAC-SHA256 under
 * a server-side secret of the nonce and the operator (see {@link operatorOf}): a page on a sibling
 * subdomain or another port may plant a cookie, but cannot make one that verifies, nor reuse one
 * issued to another operator. The token lives in a SameSite=Strict, HttpOnly cookie (`__Host-` and
 * Secure over HTTPS, so a plain-HTTP or sibling page cannot even set it), and every state-changing
 * request repeats it (form field `_csrf` or header `x-csrf-token`). Nothing is stored server-side:
 * processes that share the secret accept each other's tokens.
 */
export const CSRF_COOKIE = 'geneva_drive_csrf';
export const CSRF_FIELD = '_csrf';
export const CSRF_HEADER = 'x-csrf-token';

const SECURE_COOKIE = `__Host-${CSRF_COOKIE}`;
const TOKEN = /^[0-9a-f]{32}\.[A-Za-z0-9_-]{43}$/;

export interface CsrfRequest {
  headers: Record<string, string | string[] | undefined>;
  body?: unknown;
  secure?: boolean;
  /** What an authentication guard (passport and the like) leaves on the request. */
  user?: unknown;
}

interface ResponseLike {
  setHeader(name: string, value: string): unknown;
}

/**
 * Who the token is bound to: `request.user`'s `id`, `sub` or `username` when the application's guard
 * sets one, else the `Authorization` header the guard accepted; empty (signed, bound to no one) for
 * an application that authenticates by a cookie of its own and sets no user.
 */
function operatorOf(request: CsrfRequest): string {
  const user = request.user as Record<string, unknown> | undefined;
  const who = user && typeof user === 'object' ? (user.id ?? user.sub ?? user.username) : undefined;
  if (who !== undefined && who !== null) return `user:${String(who)}`;
  const authorization = request.headers.authorization;
  return typeof authorization === 'string' ? `authorization:${authorization}` : '';
}

function mac(secret: Buffer, nonce: string, operator: string): string {
  return createHmac('sha256', secret).update(`${nonce}.${operator}`).digest('base64url');
}

/** Whether the token was issued under this secret to this operator; constant time over the mac. */
function verifies(token: string, secret: Buffer, operator: string): boolean {
  if (!TOKEN.test(token)) return false;
  const [nonce, given] = token.split('.');
  return timingSafeEqual(Buffer.from(given), Buffer.from(mac(secret, nonce, operator)));
}

/** Every value of the token cookie, raw (tokens need no decoding; a planted second cookie is just one more value). */
function cookieTokens(request: CsrfRequest): string[] {
  const name = request.secure ? SECURE_COOKIE : CSRF_COOKIE;
  const header = request.headers.cookie;
  const cookies = Array.isArray(header) ? header.join('; ') : (header ?? '');
  return cookies
    .split(';')
    .map((part) => part.trim().split('='))
    .filter(([key]) => key === name)
    .map(([, ...value]) => value.join('='));
}

/** The request's valid token, or a new one set as the cookie on the response. */
export function ensureCsrfToken(request: CsrfRequest, response: ResponseLike, path: string, secret: Buffer): string {
  const operator = operatorOf(request);
  const existing = cookieTokens(request).find((token) => verifies(token, secret, operator));
  if (existing) return existing;
  const nonce = randomBytes(16).toString('hex');
  const token = `${nonce}.${mac(secret, nonce, operator)}`;
  // __Host- cookies must be Secure, have Path=/ and no Domain: browsers refuse to let any other page set one.
  const cookie = request.secure ? `${SECURE_COOKIE}=${token}; Path=/; Secure` : `${CSRF_COOKIE}=${token}; Path=${path || '/'}`;
  response.setHeader('Set-Cookie', `${cookie}; HttpOnly; SameSite=Strict`);
  return token;
}

/** True when the request repeats, in the form field or the header, a cookie token issued to this operator. */
export function hasValidCsrfToken(request: CsrfRequest, secret: Buffer): boolean {
  const header = request.headers[CSRF_HEADER];
  const field = typeof request.body === 'object' && request.body !== null ? (request.body as Record<string, unknown>)[CSRF_FIELD] : undefined;
  const given = typeof header === 'string' ? header : typeof field === 'string' ? field : null;
  if (given === null || !verifies(given, secret, operatorOf(request))) return false;
  return cookieTokens(request).includes(given);
}
