/** Metadata keys and DI tokens. Values are namespaced so they cannot clash with the application's. */
export const WORKFLOW_METADATA = 'geneva-drive:workflow';
export const STEPS_METADATA = 'geneva-drive:steps';
export const QUEUE_PORT = Symbol.for('geneva-drive:queue-port');
export const GENEVA_DRIVE_LOGGER = Symbol.for('geneva-drive:logger');
export const GENEVA_DRIVE_OPTIONS = Symbol.for('geneva-drive:options');
export const DEFAULT_QUEUE_NAME = 'geneva-drive';
