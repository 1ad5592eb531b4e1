/**
 * A PostgreSQL row's version, as SQL: the transaction that wrote the tuple (`xmin`) and where it
 * lies (`ctid`). Every write of a row makes a new tuple, so no two writes leave the same version —
 * not two in one transaction (two tuples), not two in one millisecond (two transactions), unlike
 * `updated_at`. A rewrite of the table (VACUUM FULL, CLUSTER) moves the tuples: a version taken
 * before it no longer matches, which sends a guarded write under the locks, never past them.
 * `alias` qualifies the columns; without it they are the statement's target's (RETURNING).
 */
export function pgRowVersion(alias?: string): string {
  const of = alias === undefined ? '' : `${alias}.`;
  return `${of}xmin::text || '/' || ${of}ctid::text`;
}
