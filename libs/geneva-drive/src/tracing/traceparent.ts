import { isSpanContextValid, type SpanContext } from '@opentelemetry/api';

// Version 00 of the W3C Trace Context header: version-traceid-parentid-flags, lower-case hex.
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * A span context as a W3C `traceparent`. Written here rather than through the app's propagator,
 * which may speak another format (B3, Jaeger) or none: the job's hint is always this one.
 */
export function formatTraceparent(span: SpanContext): string {
  return `00-${span.traceId}-${span.spanId}-${(span.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/** The remote span context a `traceparent` names; undefined when it is not a valid version-00 one. */
export function parseTraceparent(value: string): SpanContext | undefined {
  const match = TRACEPARENT.exec(value);
  if (!match) return undefined;
  const span: SpanContext = { traceId: match[1], spanId: match[2], traceFlags: parseInt(match[3], 16), isRemote: true };
  return isSpanContextValid(span) ? span : undefined;
}
