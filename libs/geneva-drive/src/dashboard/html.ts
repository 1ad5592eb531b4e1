/**
 * The dashboard's only way to build HTML: `html` tagged templates escape every interpolated value
 * unless it is itself the result of `html` (or `raw`), so a payload, an error message or a backtrace
 * can never become markup.
 */
export class SafeHtml {
  constructor(readonly value: string) {}

  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for an HTML element body or a quoted attribute value. */
export function escapeHtml(value: unknown): string {
  return String(value ?? '').replace(/[&<>"']/g, (char) => ESCAPES[char]);
}

type Part = SafeHtml | string | number | boolean | null | undefined | Date | Part[];

function render(part: Part): string {
  if (part === null || part === undefined || part === false) return '';
  if (Array.isArray(part)) return part.map(render).join('');
  if (part instanceof SafeHtml) return part.value;
  if (part instanceof Date) return escapeHtml(part.toISOString());
  return escapeHtml(part);
}

/** `html\`<td>${value}</td>\``: values are escaped, nested `html` results and arrays of them are kept. */
export function html(strings: TemplateStringsArray, ...values: Part[]): SafeHtml {
  let out = strings[0];
  values.forEach((value, index) => {
    out += render(value) + strings[index + 1];
  });
  return new SafeHtml(out);
}
