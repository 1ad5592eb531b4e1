import type { DataSource } from 'typeorm';

/** A statement as TypeORM logs it: its text and the values bound to it. */
export interface LoggedStatement {
  query: string;
  parameters: unknown[] | undefined;
}

/** The statements sent on `dataSource` while `work` runs, with their values, as TypeORM logs them (the engine's too). */
export async function statementsDuring(dataSource: DataSource, work: () => Promise<unknown>): Promise<LoggedStatement[]> {
  const sent: LoggedStatement[] = [];
  const logger = dataSource.logger;
  Object.assign(dataSource, { logger: Object.assign(Object.create(logger) as typeof logger, { logQuery: (query: string, parameters?: unknown[]) => void sent.push({ query, parameters }) }) });
  try {
    await work();
  } finally {
    Object.assign(dataSource, { logger });
  }
  return sent;
}

/** The statements sent on `dataSource` while `work` runs, as TypeORM logs them (the engine's too). */
export async function loggedDuring(dataSource: DataSource, work: () => Promise<unknown>): Promise<string[]> {
  return (await statementsDuring(dataSource, work)).map((statement) => statement.query);
}
