import type { StepExecution, StepExecutionMetadata } from '../entities/step-execution.entity.js';

/** How a thrown value is described in an execution's error columns and metadata. */
export function describeError(error: unknown): { className: string; message: string; backtrace: string[] | null } {
  if (error instanceof Error) {
    const frames = error.stack?.split('\n').slice(1).map((line) => line.trim()) ?? null;
    return { className: error.constructor?.name ?? error.name, message: error.message, backtrace: frames && frames.length > 0 ? frames : null };
  }
  return { className: typeof error, message: String(error), backtrace: null };
}

/** The error columns plus the metadata copy, as a patch for the execution row. */
export function errorColumns(execution: StepExecution, error: unknown): Partial<StepExecution> {
  const described = describeError(error);
  return {
    errorClassName: described.className,
    errorMessage: described.message,
    errorBacktrace: described.backtrace?.join('\n') ?? null,
    metadata: withMetadata(execution, { exception: { class: described.className, message: described.message, backtrace: described.backtrace } }),
  };
}

export function withMetadata(execution: StepExecution, values: StepExecutionMetadata): StepExecutionMetadata {
  return { ...(execution.metadata ?? {}), ...values };
}
