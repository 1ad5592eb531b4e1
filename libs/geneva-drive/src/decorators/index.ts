export * from './step.decorator.js';
export * from './workflow.decorator.js';
