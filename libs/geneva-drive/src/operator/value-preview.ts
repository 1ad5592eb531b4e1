/** How many characters of a payload or cursor a list shows; the full value is one link away. */
export const PREVIEW_CHARS = 2000;

/** A stored JSON value as a list shows it: pretty-printed, cut at {@link PREVIEW_CHARS}. */
export interface ValuePreview {
  text: string;
  /** True when `text` is cut: the page links to the full value. */
  truncated: boolean;
}

export function previewOf(value: unknown): ValuePreview {
  const text = pretty(value);
  return text.length > PREVIEW_CHARS ? { text: `${text.slice(0, PREVIEW_CHARS)}…`, truncated: true } : { text, truncated: false };
}

/** Text a list shows (an error message, a backtrace) cut at `max` characters; null stays null. */
export function clipText(text: string | null, max = PREVIEW_CHARS): string | null {
  return text !== null && text.length > max ? `${text.slice(0, max)}…` : text;
}

function pretty(value: unknown): string {
  if (value === undefined || value === null) return '—';
  try {
    return JSON.stringify(value, (_key, v) => (typeof v === 'bigint' ? `${v}n` : v), 2);
  } catch {
    return String(value);
  }
}
