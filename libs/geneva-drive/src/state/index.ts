export * from './workflow-state.js';
export * from './step-execution-state.js';
export * from './signal-state.js';
