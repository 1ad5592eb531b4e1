import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * The application has no TypeORM DataSource of the name geneva-drive is configured with. Thrown at
 * boot.
 * @publicApi
 */
export class DataSourceNotFoundError extends GenevaDriveError {
  constructor(readonly dataSource: string) {
    super(
      `No TypeORM DataSource "${dataSource}" for geneva-drive: import TypeOrmModule.forRoot(...)` +
        (dataSource === 'default' ? '' : ` with name: '${dataSource}'`) +
        ' in the application, or set GenevaDriveModule\'s dataSource option to the name of one it has. ' +
        'If it is imported, check that the application and geneva-drive share one copy of typeorm and @nestjs/typeorm (npm ls typeorm)',
    );
  }
}
