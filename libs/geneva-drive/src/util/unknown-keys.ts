import { InvalidOptionError } from '../errors/invalid-option.error.js';

/** Throws for the first key of `value` that is not in `known`, naming it as `prefix + key`. */
export function rejectUnknownKeys(where: string, value: object, known: readonly string[], prefix = '', hint?: (key: string) => string | undefined): void {
  for (const key of Object.keys(value)) {
    if (known.includes(key)) continue;
    const extra = hint?.(key);
    throw new InvalidOptionError(where, prefix + key, `unknown option "${prefix}${key}"${extra ? `: ${extra}` : ''} (the options are ${known.map((k) => prefix + k).join(', ')})`);
  }
}
