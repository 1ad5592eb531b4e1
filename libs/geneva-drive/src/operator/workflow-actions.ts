import { Injectable } from '@nestjs/common';
import type { Signal } from '../entities/signal.entity.js';
import type { WorkflowRecord } from '../entities/workflow.entity.js';
import { InvalidStateError } from '../errors/invalid-state.error.js';
import { StepNotDefinedError } from '../errors/step-not-defined.error.js';
import { InvalidSignalError, SignalPayloadTooLargeError, SignalsNotMigratedError, WorkflowNotOngoingError } from '../errors/signal.errors.js';
import { UnencodableValueError } from '../errors/unencodable-value.error.js';
import { WorkflowNotFoundError } from '../errors/workflow-not-found.error.js';
import { SignalService } from '../client/signal.service.js';
import { WorkflowService } from '../client/workflow.service.js';
import { DashboardInputError } from '../errors/dashboard-input.error.js';
import { WorkflowCatalog } from './workflow-catalog.js';

export const OPERATOR_ACTIONS = ['pause', 'resume', 'skip', 'cancel'] as const;
export type OperatorAction = (typeof OPERATOR_ACTIONS)[number];

/** What an operator sends with a signal: the payload as JSON text (empty for `{}`). */
export interface SignalRequest {
  name: string;
  payload?: string;
  idempotencyKey?: string;
}

/** The operator actions of the dashboard and the CLI, each through the engine's public services. */
@Injectable()
export class WorkflowActions {
  constructor(
    private readonly workflows: WorkflowService,
    private readonly signals: SignalService,
    private readonly catalog: WorkflowCatalog,
  ) {}

  isAction(value: string): value is OperatorAction {
    return (OPERATOR_ACTIONS as readonly string[]).includes(value);
  }

  run(id: string, action: OperatorAction): Promise<WorkflowRecord> {
    return this.workflows[action](id);
  }

  /**
   * Moves the workflow to one of the steps its class defines (`WorkflowService.resumeAt`). A step the
   * class does not define, or a workflow whose class this application does not register, throws
   * DashboardInputError before anything is written.
   */
  async resumeAt(id: string, stepName: string): Promise<WorkflowRecord> {
    const workflow = await this.workflows.find(id);
    const step = typeof stepName === 'string' ? stepName : '';
    const steps = this.catalog.steps(workflow.type)?.map((summary) => summary.name);
    if (!steps) throw new DashboardInputError('step', step, `a step of ${workflow.type}, whose class this application does not register`);
    if (!steps.includes(step)) {
      throw new DashboardInputError('step', step, steps.length > 0 ? `one of ${steps.join(', ')} (the steps ${workflow.type} defines)` : `a step of ${workflow.type} (it defines none)`);
    }
    return this.workflows.resumeAt(workflow.id, step);
  }

  /**
   * Sends a signal named by one of the class's `waitFor` steps (any name when a step has a custom
   * matcher without one). Bad JSON or an unknown name throws DashboardInputError before anything is written.
   */
  async signal(id: string, request: SignalRequest): Promise<Signal> {
    const workflow = await this.workflows.find(id);
    const name = request.name?.trim() ?? '';
    const names = this.catalog.signalNames(workflow.type);
    if (!names.includes(name) && !this.catalog.acceptsAnySignalName(workflow.type)) {
      throw new DashboardInputError('signal name', name, names.length > 0 ? `one of ${names.join(', ')} (the names ${workflow.type} waits for)` : `a signal ${workflow.type} waits for (it waits for none)`);
    }
    const key = request.idempotencyKey?.trim();
    return this.signals.signal(workflow, name, { payload: parsePayload(request.payload), ...(key ? { idempotencyKey: key } : {}) });
  }
}

function parsePayload(text: string | undefined): unknown {
  if (text === undefined || text.trim() === '') return {};
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new DashboardInputError('payload', text.length > 80 ? `${text.slice(0, 80)}…` : text, `JSON (${(error as Error).message})`);
  }
}

/** The HTTP status of an error an action may throw on purpose, or null for anything else (a bug: rethrown). */
export function statusOf(error: unknown): number | null {
  if (error instanceof WorkflowNotFoundError) return 404;
  // StepNotDefinedError: `resume` of a workflow standing at a step this code lacks (resumeAt moves it).
  if (error instanceof InvalidStateError || error instanceof WorkflowNotOngoingError || error instanceof SignalsNotMigratedError || error instanceof StepNotDefinedError) return 409;
  if (error instanceof SignalPayloadTooLargeError) return 413;
  // A key or name the engine refuses (too long, NUL, lone surrogate), a payload nested too deep: the operator's input.
  if (error instanceof DashboardInputError || error instanceof InvalidSignalError || error instanceof UnencodableValueError) return 400;
  return null;
}
