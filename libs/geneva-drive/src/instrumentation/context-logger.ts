import type { LoggerService } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';

/**
 * A logger whose every line carries the workflow (class, id, hero) and, when given, the execution
 * (id, step) it is about: `[OrderWorkflow id=7 hero_type=Order hero_id=42] [execution_id=19 step_name=ship] ...`.
 */
export class ContextLogger implements LoggerService {
  private readonly prefix: string;

  constructor(
    private readonly base: LoggerService,
    workflow: Pick<WorkflowRecord, 'type' | 'id' | 'heroType' | 'heroId'>,
    execution?: Pick<StepExecution, 'id' | 'stepName'>,
  ) {
    const tags = [`[${workflow.type} id=${workflow.id}${workflow.heroId ? ` hero_type=${workflow.heroType} hero_id=${workflow.heroId}` : ''}]`];
    if (execution) tags.push(`[execution_id=${execution.id} step_name=${execution.stepName}]`);
    this.prefix = tags.join(' ');
  }

  log(message: unknown, ...rest: unknown[]): void {
    this.base.log(`${this.prefix} ${String(message)}`, ...rest);
  }
  error(message: unknown, ...rest: unknown[]): void {
    this.base.error(`${this.prefix} ${String(message)}`, ...rest);
  }
  warn(message: unknown, ...rest: unknown[]): void {
    this.base.warn(`${this.prefix} ${String(message)}`, ...rest);
  }
  debug(message: unknown, ...rest: unknown[]): void {
    this.base.debug?.(`${this.prefix} ${String(message)}`, ...rest);
  }
  verbose(message: unknown, ...rest: unknown[]): void {
    this.base.verbose?.(`${this.prefix} ${String(message)}`, ...rest);
  }

  /**
   * For code that knows only an execution id (a queue adapter): the logger tagged with that
   * execution and its workflow, read from the database; `base` itself when they cannot be read.
   */
  static async forExecution(base: LoggerService, manager: EntityManager, executionId: string): Promise<LoggerService> {
    try {
      const execution = await manager.findOne(StepExecution, { where: { id: executionId }, select: { id: true, stepName: true, workflowId: true } });
      const workflow = execution && (await manager.findOne(WorkflowRecord, { where: { id: execution.workflowId } }));
      return workflow ? new ContextLogger(base, workflow, execution) : base;
    } catch {
      return base;
    }
  }
}

