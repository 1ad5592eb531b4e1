import type { QueryRunner } from 'typeorm';

/**
 * The columns of `table` as the database's catalog reports them (name → data type, lowercase), or
 * null when the table does not exist. One query per table, read from information_schema or PRAGMA:
 * on MySQL `QueryRunner.getTable` fails on geneva-drive's tables (MYSQL_NOTE in the first
 * migration); other drivers go through it.
 */
export async function tableColumns(queryRunner: QueryRunner, table: string): Promise<Map<string, string> | null> {
  const driver = queryRunner.connection.driver;
  const { database, schema, tableName } = driver.parseTableName(table);
  let rows: Array<{ name: string; type: string }>;
  switch (driver.options.type) {
    case 'postgres':
      rows = await queryRunner.query(
        `SELECT column_name AS "name", data_type AS "type" FROM information_schema.columns ` +
          `WHERE table_schema = ${schema ? '$2' : 'current_schema()'} AND table_name = $1`,
        schema ? [tableName, schema] : [tableName],
      );
      break;
    case 'mysql':
    case 'mariadb':
      rows = await queryRunner.query(
        'SELECT `COLUMN_NAME` AS `name`, `DATA_TYPE` AS `type` FROM `INFORMATION_SCHEMA`.`COLUMNS` ' +
          `WHERE \`TABLE_SCHEMA\` = ${database ? '?' : 'DATABASE()'} AND \`TABLE_NAME\` = ?`,
        database ? [database, tableName] : [tableName],
      );
      break;
    case 'better-sqlite3':
    case 'sqljs':
      rows = await queryRunner.query(`PRAGMA table_info(${driver.escape(tableName)})`);
      break;
    default: {
      const found = await queryRunner.getTable(table);
      rows = found ? found.columns.map((column) => ({ name: column.name, type: column.type })) : [];
    }
  }
  if (rows.length === 0) return null;
  return new Map(rows.map((row) => [String(row.name), String(row.type).toLowerCase()]));
}
