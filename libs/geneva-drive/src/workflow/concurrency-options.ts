/**
 * Flow control by concurrency key: at most `limit` executions holding the key are `in_progress` at
 * once, across every process and host. An execution over the limit waits, `scheduled`, holding no
 * queue slot and no timer, until the end of one holding the key lets it start (oldest first).
 * @publicApi
 */
export interface ConcurrencyOptions<W = any> {
  /**
   * The key, from the workflow instance (`this.hero`, ids): a non-empty string of at most 255 UTF-8
   * bytes. Keys are one namespace across workflow classes (two classes naming the key 'stripe' share
   * its limit): prefix a key to keep it apart. A key function that throws fails the step under its
   * exception policy.
   */
  key: (workflow: W) => string;
  /** How many executions may hold the key at once: a positive integer. */
  limit: number;
}
