/** Manual § Tracing: geneva-drive's spans on OpenTelemetry, with the SDK set up before the application. */
import { Module } from '@nestjs/common';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, BatchSpanProcessor, ConsoleSpanExporter } from '@opentelemetry/sdk-trace-base';
import { GenevaDriveTracingModule } from 'geneva-drive/tracing';

// #region tracing-sdk
// In every process (those that start and signal workflows, and the workers), before Nest boots.
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(new ConsoleSpanExporter())] }));
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
// #endregion tracing-sdk

// #region tracing
@Module({ imports: [GenevaDriveTracingModule.forRoot()] })
export class TracingModule {}
// #endregion tracing
