import { Module, type DynamicModule } from '@nestjs/common';
import { register, type Registry } from 'prom-client';
import { asyncOptionsProvider, type GenevaDriveAsyncModuleOptions } from '../util/async-module-options.js';
import { GENEVA_DRIVE_METRICS_REGISTRY, GenevaDriveMetrics } from './geneva-drive.metrics.js';

/** Options of `GenevaDriveMetricsModule.forRoot`. @publicApi */
export interface GenevaDriveMetricsOptions {
  /** The prom-client registry to register the metrics in. @default prom-client's default `register` */
  registry?: Registry;
}

/**
 * Prometheus metrics of geneva-drive on prom-client: import `GenevaDriveMetricsModule.forRoot()` next
 * to `GenevaDriveModule` and serve the registry's `metrics()` where your scraper reads. Needs no
 * other geneva-drive provider: it listens on the diagnostics channels.
 * @publicApi
 */
@Module({})
export class GenevaDriveMetricsModule {
  static forRoot(options: GenevaDriveMetricsOptions = {}): DynamicModule {
    return {
      module: GenevaDriveMetricsModule,
      providers: [{ provide: GENEVA_DRIVE_METRICS_REGISTRY, useValue: options.registry ?? register }, GenevaDriveMetrics],
      exports: [GenevaDriveMetrics],
    };
  }

  /** As `forRoot`, with the options from a factory: a registry another module provides, say. */
  static forRootAsync(options: GenevaDriveAsyncModuleOptions<GenevaDriveMetricsOptions>): DynamicModule {
    const registry = asyncOptionsProvider('GenevaDriveMetricsModule', GENEVA_DRIVE_METRICS_REGISTRY, options, ['registry'], (resolved) => resolved.registry ?? register);
    return { module: GenevaDriveMetricsModule, imports: options.imports ?? [], providers: [registry, GenevaDriveMetrics], exports: [GenevaDriveMetrics] };
  }
}
