import { Module, type DynamicModule } from '@nestjs/common';
import { trace, type TracerProvider } from '@opentelemetry/api';
import { asyncOptionsProvider, type GenevaDriveAsyncModuleOptions } from '../util/async-module-options.js';
import { GENEVA_DRIVE_TRACER, GenevaDriveTracing } from './geneva-drive.tracing.js';

/** Options of `GenevaDriveTracingModule.forRoot`. @publicApi */
export interface GenevaDriveTracingOptions {
  /** Where the `geneva-drive` tracer comes from. @default the global tracer provider (`trace` of @opentelemetry/api) */
  tracerProvider?: TracerProvider;
}

/**
 * OpenTelemetry tracing of geneva-drive on @opentelemetry/api: import
 * `GenevaDriveTracingModule.forRoot()` next to `GenevaDriveModule` in every process (those that start
 * and signal, and the workers), with the app's OpenTelemetry SDK set up as usual. Needs no other
 * geneva-drive provider: it listens on the diagnostics channels.
 * @publicApi
 */
@Module({})
export class GenevaDriveTracingModule {
  static forRoot(options: GenevaDriveTracingOptions = {}): DynamicModule {
    return {
      module: GenevaDriveTracingModule,
      providers: [{ provide: GENEVA_DRIVE_TRACER, useValue: tracerOf(options) }, GenevaDriveTracing],
      exports: [GenevaDriveTracing],
    };
  }

  /** As `forRoot`, with the options from a factory: a tracer provider another module provides, say. */
  static forRootAsync(options: GenevaDriveAsyncModuleOptions<GenevaDriveTracingOptions>): DynamicModule {
    const tracer = asyncOptionsProvider('GenevaDriveTracingModule', GENEVA_DRIVE_TRACER, options, ['tracerProvider'], tracerOf);
    return { module: GenevaDriveTracingModule, imports: options.imports ?? [], providers: [tracer, GenevaDriveTracing], exports: [GenevaDriveTracing] };
  }
}

function tracerOf(options: GenevaDriveTracingOptions) {
  return (options.tracerProvider ?? trace).getTracer('geneva-drive');
}
