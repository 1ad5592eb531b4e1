/**
 * True when PostgreSQL refused to run a named prepared statement that needs preparing again: DDL
 * changed the type of a column it returns (0A000 "cached plan must not change result type", raised
 * by RevalidateCachedQuery), or the session no longer has it (26000, as after a pooler's DISCARD ALL).
 */
export function isStaleStatement(error: unknown): boolean {
  const driverError = (error as { driverError?: { code?: string; routine?: string } })?.driverError ?? (error as { code?: string; routine?: string });
  return (driverError?.code === '0A000' && driverError.routine === 'RevalidateCachedQuery') || driverError?.code === '26000';
}
