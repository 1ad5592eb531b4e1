/**
 * The trace context a step job carries. A tracing integration (geneva-drive/tracing) installs a
 * propagator: each job then carries the context of the call that created it (`start()`, `signal()`,
 * the step that scheduled it), as `StepJob.hints.traceparent`, and its execution runs in that context,
 * in whichever process takes the job. Without a propagator jobs carry nothing and nothing is wrapped.
 * @publicApi
 */
export interface JobContextPropagator {
  /** The active trace context as a W3C `traceparent`, for a job created now; undefined when there is none. */
  inject(): string | undefined;
  /** Runs a job's execution in the context the job carried (undefined: it carried none). */
  run<T>(traceparent: string | undefined, execution: () => Promise<T>): Promise<T>;
}

// One per process, like the diagnostics channels the integrations listen on.
let installed: JobContextPropagator | undefined;

/**
 * Installs the process's propagator, replacing any other; the function returned removes it (and
 * does nothing once another has replaced it).
 * @publicApi
 */
export function setJobContextPropagator(propagator: JobContextPropagator): () => void {
  installed = propagator;
  return () => {
    if (installed === propagator) installed = undefined;
  };
}

const NONE: { traceparent?: string } = Object.freeze({});

/** The `traceparent` hint of a job created now: nothing without a propagator or an active trace. */
export function jobTraceContext(): { traceparent?: string } {
  const traceparent = installed?.inject();
  return traceparent === undefined ? NONE : { traceparent };
}

/** Runs a job's execution in the context it carried, through the propagator when there is one. */
export function runInJobContext<T>(traceparent: string | undefined, execution: () => Promise<T>): Promise<T> {
  return installed ? installed.run(traceparent, execution) : execution();
}
