import { Injectable } from '@nestjs/common';
import { In, type EntityManager } from 'typeorm';
import type { Signal } from '../entities/signal.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { InvalidSignalError, NoOngoingWorkflowError } from '../errors/signal.errors.js';
import { heroReference } from '../persistence/hero.js';
import { isMysqlFamily } from '../persistence/row-lock.js';
import { TransactionRunner } from '../persistence/transaction-runner.js';
import type { WorkflowDefinition } from '../registry/workflow-definition.js';
import { WorkflowRegistry } from '../registry/workflow.registry.js';
import { ONGOING_WORKFLOW_STATES } from '../state/workflow-state.js';
import type { GenevaWorkflow } from '../workflow/geneva-workflow.js';

type WorkflowClass = abstract new (...args: any[]) => GenevaWorkflow<any>;

/**
 * Delivery addressed by hero (`SignalService.signalHero`): a webhook knows the order, not the
 * workflow. Finds the hero's ongoing workflows of the class and delivers to each, in one transaction
 * (the caller's, when it passes a manager), each delivery exactly a `signal()` — so one
 * `idempotencyKey` deduplicates per workflow.
 */
@Injectable()
export class SignalHero {
  constructor(
    private readonly transactions: TransactionRunner,
    private readonly registry: WorkflowRegistry,
  ) {}

  /**
   * Runs `deliver` for every ongoing workflow of the class for the hero, oldest first, and returns
   * the rows. `NoOngoingWorkflowError` when there is none (nothing written).
   */
  async deliver<Payload>(
    workflowClass: WorkflowClass,
    hero: object | string | number,
    name: string,
    manager: EntityManager | undefined,
    deliver: (workflowId: string, manager: EntityManager) => Promise<Signal<Payload>>,
  ): Promise<Array<Signal<Payload>>> {
    const definition = this.registry.getByClass(workflowClass);
    const ref = this.referenceOf(definition, hero);
    return this.transactions.run(async (tx) => {
      const ongoing = await tx.find(WorkflowRecord, {
        where: { type: definition.name, ...ref, state: In([...ONGOING_WORKFLOW_STATES]) },
        select: { id: true },
        // Locked in one order (each delivery locks its workflow), so two such calls cannot deadlock.
        order: { id: 'ASC' },
        // MySQL/MariaDB: a plain read here would fix the transaction's read view before the workflow
        // locks, and every later plain read (the hero a matcher reads) would miss what their holder
        // committed; a locking read takes no read view.
        ...(isMysqlFamily(tx) ? { lock: { mode: 'pessimistic_write' as const } } : {}),
      });
      if (ongoing.length === 0) throw new NoOngoingWorkflowError(definition.name, ref.heroType, ref.heroId, name);
      const rows: Array<Signal<Payload>> = [];
      for (const workflow of ongoing) rows.push(await deliver(workflow.id, tx));
      return rows;
    }, manager);
  }

  /** The hero's reference: an entity (or a plain object with its key), or a bare id of the workflow's declared hero class. */
  private referenceOf(definition: WorkflowDefinition, hero: object | string | number): { heroType: string; heroId: string } {
    const dataSource = this.transactions.dataSource;
    const declared = definition.heroEntity?.();
    const action = `signal ${definition.name} by its hero`;
    if (typeof hero === 'object' && hero !== null) return heroReference(dataSource, definition.name, hero, declared, false, action);
    if ((typeof hero !== 'string' && typeof hero !== 'number') || String(hero) === '') {
      throw new InvalidSignalError('hero', `signalHero() needs a hero entity or a hero id, got ${hero === null ? 'null' : typeof hero === 'string' ? '""' : typeof hero}`);
    }
    if (!declared) {
      throw new InvalidSignalError('hero', `signalHero() got the hero id ${JSON.stringify(hero)}, but ${definition.name} declares no hero class: pass the hero entity, or declare @Workflow({ hero: () => Entity })`);
    }
    const key = dataSource.getMetadata(declared).primaryColumns[0].propertyName;
    return heroReference(dataSource, definition.name, { [key]: hero }, declared, false, action);
  }
}
