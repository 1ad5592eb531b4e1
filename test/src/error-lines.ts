import type { LoggerService } from '@nestjs/common';

/** A logger that keeps the lines the engine writes at error level and drops the rest. */
export class ErrorLines implements LoggerService {
  readonly errors: string[] = [];
  log(): void {}
  warn(): void {}
  debug(): void {}
  verbose(): void {}
  error(message: unknown): void {
    this.errors.push(String(message));
  }
}
