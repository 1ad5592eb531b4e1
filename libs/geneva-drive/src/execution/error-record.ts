import type { StepExecution, StepExecutionMetadata } from '../entities/step-execution.entity.js';
import { replaceUnstorableCharacters } from '../util/payload-codec.js';

// Bounded so a huge message or stack can never fail the write that records it (TEXT is 64 KiB on MySQL).
const MAX_MESSAGE = 8_000;
const MAX_FRAMES = 50;

/** How a thrown value is described in an execution's error columns and metadata. */
export function describeError(error: unknown): { className: string; message: string; backtrace: string[] | null } {
  if (error instanceof Error) {
    const frames = error.stack?.split('\n').slice(1, MAX_FRAMES + 1).map((line) => line.trim().slice(0, 500)) ?? null;
    return { className: error.constructor?.name ?? error.name, message: truncate(error.message), backtrace: frames && frames.length > 0 ? frames : null };
  }
  return { className: typeof error, message: truncate(String(error)), backtrace: null };
}

/**
 * The error columns plus the metadata copy, as a patch for the execution row. The metadata keeps the
 * message exactly; the text columns get U+FFFD for a NUL or a lone surrogate, which they cannot hold.
 */
export function errorColumns(execution: StepExecution, error: unknown): Partial<StepExecution> {
  const described = describeError(error);
  const backtrace = described.backtrace?.join('\n') ?? null;
  return {
    errorClassName: replaceUnstorableCharacters(described.className),
    errorMessage: replaceUnstorableCharacters(described.message),
    errorBacktrace: backtrace === null ? null : replaceUnstorableCharacters(backtrace),
    metadata: withMetadata(execution, { exception: { class: described.className, message: described.message, backtrace: described.backtrace } }),
  };
}

export function withMetadata(execution: StepExecution, values: StepExecutionMetadata): StepExecutionMetadata {
  return { ...(execution.metadata ?? {}), ...values };
}

function truncate(text: string): string {
  return text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE)}… (truncated)` : text;
}
