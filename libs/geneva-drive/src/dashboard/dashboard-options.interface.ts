import type { CanActivate, ModuleMetadata, Type } from '@nestjs/common';

/** Who may open the dashboard, and what it lets them do. @publicApi */
export interface GenevaDriveDashboardOptions {
  /**
   * Any Nest guard (an instance, or a class instantiated by Nest), run before every page and API call.
   * Required unless `allowUnauthenticated` is true.
   */
  guard?: CanActivate | Type<CanActivate>;
  /** Hide every action and refuse every state-changing request. @default false */
  readOnly?: boolean;
  /** Mount without a guard (a local development app, or a gateway in front doing authentication). @default false */
  allowUnauthenticated?: boolean;
  /** Rows per list page: workflows, and a workflow's executions and signals. @default 50 */
  pageSize?: number;
  /**
   * The key CSRF tokens are signed with (at least 32 bytes). Give the same one to every process
   * serving the dashboard behind a load balancer; without it each process makes its own at boot,
   * and a form loaded from one process is refused (403, "reload the page") by another.
   * @default a random key per process
   */
  csrfSecret?: string;
}

/** `GenevaDriveDashboardModule.forRoot` options. @publicApi */
export interface GenevaDriveDashboardModuleOptions extends GenevaDriveDashboardOptions {
  /**
   * Where the dashboard is mounted: segments of letters, digits, `-`, `_`, `.`, `~`; `'/'` for the
   * root. Anything else throws DashboardPathError. @default '/geneva'
   */
  path?: string;
  /** The TypeORM DataSource name geneva-drive uses. @default the default DataSource */
  dataSource?: string;
}

/** `GenevaDriveDashboardModule.forRootAsync` options: the mount point is fixed, the rest comes from a factory. @publicApi */
export interface GenevaDriveDashboardModuleAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  /** @default '/geneva' */
  path?: string;
  /** @default the default DataSource */
  dataSource?: string;
  inject?: any[];
  useFactory: (...args: any[]) => GenevaDriveDashboardOptions | Promise<GenevaDriveDashboardOptions>;
}
