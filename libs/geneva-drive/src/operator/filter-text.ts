import { hasUnstorableCharacters } from '../util/payload-codec.js';
import { DashboardInputError } from '../errors/dashboard-input.error.js';

/** Longest text filter: no identifier column holds more (type, hero type and id, step and signal names). */
const MAX_FILTER_LENGTH = 255;

/**
 * A text filter as every database can compare it: PostgreSQL refuses a NUL in a parameter and
 * drivers choke on lone surrogates, so both (and every other control character) are a
 * DashboardInputError here, the same on every database, before any SQL runs.
 */
export function checkFilterText(name: string, value: string): string {
  if (/[\u0000-\u001f\u007f]/.test(value) || hasUnstorableCharacters(value)) throw new DashboardInputError(name, value, 'text without control characters or lone surrogates');
  if (value.length > MAX_FILTER_LENGTH) throw new DashboardInputError(name, `${value.slice(0, 40)}…`, `at most ${MAX_FILTER_LENGTH} characters`);
  return value;
}

/**
 * A date filter every database can store: years 1 to 9999 (PostgreSQL's timestamp and MySQL's
 * DATETIME refuse what JavaScript's Date accepts beyond that).
 */
export function parseDateFilter(name: string, value: string): Date {
  const date = new Date(value);
  const year = date.getUTCFullYear();
  if (Number.isNaN(date.getTime()) || year < 1 || year > 9999) throw new DashboardInputError(name, value, 'a date from year 1 to 9999, such as 2026-12-01 or 2026-12-01T14:30:00Z');
  return date;
}
