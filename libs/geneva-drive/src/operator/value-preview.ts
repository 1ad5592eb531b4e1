import { jsonColumnTransformer } from '../entities/json-column.js';

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

/**
 * The preview of a stored JSON value of which `head` holds the first {@link PREVIEW_CHARS} characters
 * and one more (persistence/workflow-list reads no more): a value that fits is decoded and previewed
 * as {@link previewOf} does; a longer one is previewed from its stored text, indented alike and cut,
 * without the rest being read or parsed (values the payload codec tags, such as dates, show there as
 * stored). Null when there is no value (NULL, or text that does not decode).
 */
export function previewOfStored(head: string | null): ValuePreview | null {
  if (head === null) return null;
  if ([...head].length > PREVIEW_CHARS) return { text: `${indentJson(head, PREVIEW_CHARS).slice(0, PREVIEW_CHARS)}…`, truncated: true };
  const value: unknown = jsonColumnTransformer.from(head);
  return value === null || value === undefined ? null : previewOf(value);
}

/**
 * JSON text, possibly cut anywhere, indented as `JSON.stringify(value, null, 2)` writes it (outside
 * strings: no whitespace of its own, a line per member, `": "`), until it is `max` characters long.
 */
function indentJson(text: string, max: number): string {
  let out = '';
  let depth = 0;
  let inString = false;
  let escaped = false;
  const newline = () => `\n${'  '.repeat(depth)}`;
  for (let i = 0; i < text.length && out.length <= max; i++) {
    const c = text[i];
    if (inString) {
      out += c;
      if (escaped) escaped = false;
      else if (c === '\\') escaped = true;
      else if (c === '"') inString = false;
    } else if (c === '"') {
      inString = true;
      out += c;
    } else if (c === '{' || c === '[') {
      const close = c === '{' ? '}' : ']';
      let next = i + 1;
      while (text[next] === ' ') next++;
      if (text[next] === close) {
        out += c + close; // an empty object or array stays on its line
        i = next;
      } else {
        depth++;
        out += c + newline();
      }
    } else if (c === '}' || c === ']') {
      depth--;
      out += newline() + c;
    } else if (c === ',') out += `,${newline()}`;
    else if (c === ':') out += ': ';
    else if (!/\s/.test(c)) out += c;
  }
  return out;
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
