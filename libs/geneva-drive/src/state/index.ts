export * from './workflow-state.js';
export * from './step-execution-state.js';
