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
