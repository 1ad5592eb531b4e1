// geneva-drive/tracing: OpenTelemetry spans, kept out of the main entry because @opentelemetry/api is an optional peer.
export { GenevaDriveTracingModule, type GenevaDriveTracingOptions } from './geneva-drive-tracing.module.js';
export { GENEVA_DRIVE_SPAN_ATTRIBUTES, GenevaDriveTracing } from './geneva-drive.tracing.js';
export type { GenevaDriveAsyncModuleOptions } from '../util/async-module-options.js';
