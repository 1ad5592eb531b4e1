import { STEPS_METADATA } from '../geneva-drive.constants.js';
import type { StepOptions } from './step-options.interface.js';

/** One `@Step`/`@ResumableStep`/`addStep` declaration, as recorded on the class before validation. */
export interface StepDeclaration {
  /** The decorated method, for method steps. */
  methodName?: string;
  /** The body, for programmatic steps. */
  run?: (workflow: any, ...args: any[]) => unknown;
  options: StepOptions & { maxIterations?: number; maxRuntime?: unknown };
  resumable: boolean;
  /** `file:line` of the declaration, for error messages and tooling. */
  sourceLocation: string | undefined;
}

/** Appends a declaration to the class's own list (parents keep theirs: the registry walks the chain). */
export function recordStepDeclaration(target: Function, declaration: StepDeclaration): void {
  const own: StepDeclaration[] = Reflect.getOwnMetadata(STEPS_METADATA, target) ?? [];
  Reflect.defineMetadata(STEPS_METADATA, [...own, declaration], target);
}

export function ownStepDeclarations(target: Function): readonly StepDeclaration[] {
  return Reflect.getOwnMetadata(STEPS_METADATA, target) ?? [];
}

/** The caller's `file:line`, skipping this library's frames and decorator plumbing. */
export function captureCallSite(): string | undefined {
  const frames = new Error().stack?.split('\n').slice(1) ?? [];
  for (const frame of frames) {
    if (/geneva-drive[\\/](src|dist)|libs[\\/]geneva-drive|__decorate|Reflect\.decorate|node:internal|node_modules/.test(frame)) continue;
    const match = /\(?((?:file:\/\/)?[^()\s]+):(\d+):\d+\)?\s*$/.exec(frame);
    if (match) return `${match[1].replace(/^file:\/\//, '')}:${match[2]}`;
  }
  return undefined;
}
