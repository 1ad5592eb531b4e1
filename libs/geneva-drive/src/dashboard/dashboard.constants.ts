/** DI tokens of the dashboard (namespaced, like the engine's). */
export const DASHBOARD_OPTIONS = Symbol.for('geneva-drive:dashboard-options');
export const DASHBOARD_USER_GUARD = Symbol.for('geneva-drive:dashboard-user-guard');
export const DEFAULT_DASHBOARD_PATH = '/geneva';
