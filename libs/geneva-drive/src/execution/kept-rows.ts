/**
 * Rows kept in this process for a job that may start here, by job id: taken once, the oldest
 * dropped first past `capacity` (a job that ran in another process never comes for its own).
 */
export class KeptRows<T> {
  private readonly rows = new Map<string, T>();

  constructor(private readonly capacity: number) {}

  keep(jobId: string, rows: T): void {
    this.rows.delete(jobId);
    this.rows.set(jobId, rows);
    if (this.rows.size > this.capacity) this.rows.delete(this.rows.keys().next().value!);
  }

  take(jobId: string): T | undefined {
    const rows = this.rows.get(jobId);
    this.rows.delete(jobId);
    return rows;
  }
}
