/**
 * Stored text (signal keys and names, hero ids, error messages) on its way to a terminal: control
 * characters — ESC above all, which can retitle the window, clear the screen or rewrite what is shown
 * — and the bidirectional overrides that reorder a line are written as `\u001b`-style escapes, the way
 * `--json` writes them. Tabs and newlines inside a value are escaped too: they separate the columns.
 */
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

export function terminalSafe(value: unknown): string {
  return String(value).replace(UNSAFE, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** `tty\`${a}\t${b}\``: every interpolated value made {@link terminalSafe}, the template's own tabs kept. */
export function tty(strings: TemplateStringsArray, ...values: unknown[]): string {
  return strings.reduce((out, text, index) => out + text + (index < values.length ? terminalSafe(values[index]) : ''), '');
}
