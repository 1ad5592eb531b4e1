import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * geneva-drive's tables or columns are missing from the database: its migrations have not run.
 * Thrown at boot. (The signals migration alone may be missing: see `SignalsNotMigratedError`.)
 * @publicApi
 */
export class SchemaNotMigratedError extends GenevaDriveError {
  /**
   * @param missing the missing tables, or the missing columns as `table.column`
   * @param migration the migration that creates what is missing
   */
  constructor(
    readonly missing: readonly string[],
    readonly migration: string,
  ) {
    super(
      `geneva-drive's schema lacks ${missing.join(', ')}: run the ${migration} migration. ` +
        "List GENEVA_DRIVE_MIGRATIONS (or genevaDriveMigrations({ primaryKey: 'uuid' })) in the DataSource's migrations " +
        'and run them: migrationsRun: true, or the TypeORM CLI (migration:run)',
    );
  }
}
