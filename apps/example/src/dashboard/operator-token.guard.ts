import { UnauthorizedException, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * The example's dashboard guard: one shared operator token (`GENEVA_DASHBOARD_TOKEN`), given as
 * `Authorization: Bearer <token>` or, from a browser, as the password of HTTP Basic auth (any user
 * name). Use your application's own authentication in production.
 */
export class OperatorTokenGuard implements CanActivate {
  constructor(private readonly token: string) {}

  canActivate(context: ExecutionContext): boolean {
    const http = context.switchToHttp();
    const header = http.getRequest<{ headers: Record<string, string | undefined> }>().headers.authorization ?? '';
    if (this.matches(header)) return true;
    http.getResponse<{ setHeader(name: string, value: string): void }>().setHeader('WWW-Authenticate', 'Basic realm="geneva-drive", charset="UTF-8"');
    throw new UnauthorizedException('The operator token is required');
  }

  /**
   * Compares digests, not the strings: both are 32 bytes whatever was sent (a malformed header cannot
   * make the comparison throw), and the time taken says nothing about the token's length.
   */
  private matches(header: string): boolean {
    const [scheme, value = ''] = header.split(' ');
    const given = scheme === 'Bearer' ? value : scheme === 'Basic' ? Buffer.from(value, 'base64').toString('utf8').split(':').slice(1).join(':') : null;
    return given !== null && timingSafeEqual(digest(given), digest(this.token));
  }
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
