/** The DataSource the operator surfaces (the dashboard and the CLI) read and act on: each module that mounts one provides it. */
export const OPERATOR_DATA_SOURCE = Symbol.for('geneva-drive:operator-data-source');
