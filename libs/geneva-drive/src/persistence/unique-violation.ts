/** True when a database error is a unique-constraint violation, on PostgreSQL, MySQL/MariaDB or SQLite. */
export function isUniqueViolation(error: unknown): boolean {
  const driverError = (error as { driverError?: { code?: string; errno?: number } })?.driverError ?? (error as { code?: string; errno?: number });
  return (
    driverError?.code === '23505' ||
    driverError?.code === 'ER_DUP_ENTRY' ||
    driverError?.errno === 1062 ||
    driverError?.code === 'SQLITE_CONSTRAINT_UNIQUE' ||
    driverError?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY'
  );
}
