/**
 * Text from outside (a sku, a document id, a signer's name) as it goes into a log line: quoted and
 * escaped like a JSON string, so a newline cannot forge the next log line and an escape sequence
 * cannot drive the terminal of whoever tails the log.
 */
export function logText(value: unknown): string {
  // JSON.stringify escapes C0 controls; DEL and the C1 controls are escaped as well.
  return JSON.stringify(String(value)).replace(/[\u007f-\u009f]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
