import type { DataSource } from 'typeorm';
import type { HotPathSql } from './hot-path-sql.js';
import { MysqlHotPathSql } from './mysql.js';
import { PostgresHotPathSql } from './postgres.js';
import { SqliteHotPathSql } from './sqlite.js';

export type { HotPathSql, WriteBatch } from './hot-path-sql.js';

/** The module options the hot path's SQL follows. */
export interface HotPathSqlOptions {
  /** PostgreSQL and MySQL: prepared statements (see GenevaDriveModuleOptions.preparedStatements). */
  preparedStatements: boolean;
  /** MySQL/MariaDB: the server's session timeouts bound a transactional step (SchemaCapabilities.hasSessionTimeouts). */
  sessionTimeouts: boolean;
}

/** The hot path's SQL for the DataSource's dialect. Built after the schema was detected (key type, signal columns). */
export function hotPathSqlFor(dataSource: DataSource, options: HotPathSqlOptions): HotPathSql {
  switch (dataSource.options.type) {
    case 'postgres':
      return new PostgresHotPathSql(dataSource, options.preparedStatements);
    case 'mysql':
    case 'mariadb':
      return new MysqlHotPathSql(dataSource, options.preparedStatements, options.sessionTimeouts);
    case 'better-sqlite3':
    case 'sqljs':
      return new SqliteHotPathSql(dataSource);
    default:
      throw new Error(`geneva-drive has no SQL for the "${dataSource.options.type}" driver (PostgreSQL, MySQL/MariaDB and SQLite are supported)`);
  }
}
