import type { DataSource } from 'typeorm';

/** The statements sent on `dataSource` while `work` runs, as TypeORM logs them (the engine's too). */
export async function loggedDuring(dataSource: DataSource, work: () => Promise<unknown>): Promise<string[]> {
  const sent: string[] = [];
  const logger = dataSource.logger;
  Object.assign(dataSource, { logger: Object.assign(Object.create(logger) as typeof logger, { logQuery: (query: string) => void sent.push(query) }) });
  try {
    await work();
  } finally {
    Object.assign(dataSource, { logger });
  }
  return sent;
}
