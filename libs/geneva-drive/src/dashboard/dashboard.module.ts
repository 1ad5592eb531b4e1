import { Controller, Inject, Module, type CanActivate, type DynamicModule, type MiddlewareConsumer, type NestModule, type Provider, type Type } from '@nestjs/common';
import { HttpAdapterHost, ModuleRef } from '@nestjs/core';
import { getDataSourceToken } from '@nestjs/typeorm';
import { OPERATOR_DATA_SOURCE } from '../operator/operator.constants.js';
import { DASHBOARD_OPTIONS, DASHBOARD_USER_GUARD } from './dashboard.constants.js';
import { DashboardController } from './dashboard.controller.js';
import { DashboardGuard } from './dashboard.guard.js';
import { normalizePath, resolveDashboardOptions, type ResolvedDashboardOptions } from './dashboard.options.js';
import { securityHeadersMiddleware, securityHeadersOnError } from './security-headers.js';
import type { GenevaDriveDashboardModuleAsyncOptions, GenevaDriveDashboardModuleOptions, GenevaDriveDashboardOptions } from './dashboard-options.interface.js';
import { WorkflowActions } from '../operator/workflow-actions.js';
import { WorkflowCatalog } from '../operator/workflow-catalog.js';
import { WorkflowReader } from '../operator/workflow-reader.js';

/**
 * The operator dashboard, mounted in your own Nest application (Express platform), next to
 * `GenevaDriveModule`: `GenevaDriveDashboardModule.forRoot({ path: '/geneva', guard: new AdminGuard() })`.
 * Server-rendered pages and a JSON API under the same path; nothing to build, nothing from a CDN.
 * Without a `guard` the application refuses to boot, unless `allowUnauthenticated: true` is given.
 * @publicApi
 */
@Module({})
export class GenevaDriveDashboardModule implements NestModule {
  constructor(
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  /** The security headers on every response under the mount path, Nest's own 404s and 400s and the body parser's refusals included. */
  configure(consumer: MiddlewareConsumer): void {
    // A path given as a string is mounted with Express's use(), ahead of the routes: on its sub-paths
    // too, and with no parameter to decode (a route's `:id` that does not decode is a 400 after it).
    consumer.apply(securityHeadersMiddleware).forRoutes(this.options.path);
    // Errors skip the middleware above: the body parser's go on from here, ahead of Nest's handler of them.
    this.adapterHost.httpAdapter?.use(this.options.path, securityHeadersOnError);
  }

  static forRoot(options: GenevaDriveDashboardModuleOptions = {}): DynamicModule {
    const { path, dataSource, ...rest } = options;
    const mount = normalizePath(path);
    resolveDashboardOptions(rest, mount); // fail where the module is declared, not only at boot
    return GenevaDriveDashboardModule.build(mount, dataSource, [], { provide: DASHBOARD_OPTIONS, useValue: resolveDashboardOptions(rest, mount) });
  }

  static forRootAsync(options: GenevaDriveDashboardModuleAsyncOptions): DynamicModule {
    const mount = normalizePath(options.path);
    return GenevaDriveDashboardModule.build(mount, options.dataSource, options.imports ?? [], {
      provide: DASHBOARD_OPTIONS,
      useFactory: async (...args: unknown[]) => resolveDashboardOptions((await options.useFactory(...args)) as GenevaDriveDashboardOptions, mount),
      inject: options.inject ?? [],
    });
  }

  private static build(mount: string, dataSource: string | undefined, imports: DynamicModule['imports'], optionsProvider: Provider): DynamicModule {
    // One controller class per registration, so each can carry its own mount path.
    class MountedDashboardController extends DashboardController {}
    Controller(mount)(MountedDashboardController);
    return {
      module: GenevaDriveDashboardModule,
      imports,
      controllers: [MountedDashboardController],
      providers: [
        optionsProvider,
        { provide: OPERATOR_DATA_SOURCE, useExisting: getDataSourceToken(dataSource) },
        {
          provide: DASHBOARD_USER_GUARD,
          useFactory: (resolved: ResolvedDashboardOptions, moduleRef: ModuleRef): Promise<CanActivate | null> | CanActivate | null => {
            const guard = resolved.guard;
            if (!guard) return null;
            return typeof guard === 'function' ? moduleRef.create(guard as Type<CanActivate>) : guard;
          },
          inject: [DASHBOARD_OPTIONS, ModuleRef],
        },
        DashboardGuard,
        WorkflowCatalog,
        WorkflowReader,
        WorkflowActions,
      ],
    };
  }
}
