import { Logger, type DynamicModule } from '@nestjs/common';
import { GenevaDriveDashboardModule } from 'geneva-drive/dashboard';
import { OperatorTokenGuard } from './operator-token.guard.js';

/** The dashboard at /geneva when `GENEVA_DASHBOARD_TOKEN` is set (read-only with `GENEVA_DASHBOARD_READ_ONLY=1`); not mounted otherwise. */
export function dashboardImports(env: NodeJS.ProcessEnv = process.env): DynamicModule[] {
  const token = env.GENEVA_DASHBOARD_TOKEN?.trim();
  if (!token) {
    new Logger('Dashboard').log('GENEVA_DASHBOARD_TOKEN is not set: the dashboard at /geneva is not mounted');
    return [];
  }
  return [GenevaDriveDashboardModule.forRoot({ path: '/geneva', guard: new OperatorTokenGuard(token), readOnly: env.GENEVA_DASHBOARD_READ_ONLY === '1' })];
}
