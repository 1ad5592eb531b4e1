import { CreateGenevaDriveTables1730000000000 } from './1730000000000-create-geneva-drive-tables.js';
import { AddGenevaDriveSignals1730000000001 } from './1730000000001-add-geneva-drive-signals.js';

export { AddGenevaDriveSignals1730000000001, CreateGenevaDriveTables1730000000000 };

/**
 * geneva-drive's migrations, in order, for the application's TypeORM `migrations` list. The class
 * names (and their timestamps) are part of the public contract: TypeORM records them in its
 * migrations table.
 * @publicApi
 */
export const GENEVA_DRIVE_MIGRATIONS = [CreateGenevaDriveTables1730000000000, AddGenevaDriveSignals1730000000001];
