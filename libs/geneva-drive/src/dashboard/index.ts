export { GenevaDriveDashboardModule } from './dashboard.module.js';
export type { GenevaDriveDashboardModuleAsyncOptions, GenevaDriveDashboardModuleOptions, GenevaDriveDashboardOptions } from './dashboard-options.interface.js';
export { DashboardUnguardedError } from './dashboard-unguarded.error.js';
export { DashboardInputError } from '../errors/dashboard-input.error.js';
export { DashboardPathError } from './dashboard-path.error.js';
