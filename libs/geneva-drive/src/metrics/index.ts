// geneva-drive/metrics: Prometheus metrics, kept out of the main entry because prom-client is an optional peer.
export { GenevaDriveMetricsModule, type GenevaDriveMetricsOptions } from './geneva-drive-metrics.module.js';
export { GenevaDriveMetrics } from './geneva-drive.metrics.js';
export type { GenevaDriveAsyncModuleOptions } from '../util/async-module-options.js';
