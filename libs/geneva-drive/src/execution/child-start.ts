import { In, type DataSource, type EntityManager } from 'typeorm';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { ResultTooLargeError } from '../errors/result-too-large.error.js';
import { WorkflowAlreadyOngoingError } from '../errors/workflow-already-ongoing.error.js';
import { childIdsByKey, firstExecutionIds, insertRows, startedChildKeys } from '../persistence/child-queries.js';
import { heroReference } from '../persistence/hero.js';
import { newExecution, newSignal, newWorkflow } from '../persistence/new-rows.js';
import type { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import { isUniqueViolation } from '../persistence/unique-violation.js';
import { isSqlite } from '../persistence/row-lock.js';
import { ONGOING_WORKFLOW_STATES } from '../state/workflow-state.js';
import { jobOptionsFor, type WorkflowStore } from '../persistence/workflow-store.js';
import type { WorkflowDefinition } from '../registry/workflow-definition.js';
import type { WorkflowRegistry } from '../registry/workflow.registry.js';
import { rejectUnknownKeys } from '../util/unknown-keys.js';
import { decodePayload, encodedSize, encodePayload } from '../util/payload-codec.js';
import type { ChildHandle, ChildWorkflowClass, OnParentCancel, StartChildOptions, StepOutputSink } from '../workflow/start-child.js';
import { identifierProblem, isPlainObject, prepareStartSignals, show, type PreparedSignal } from './signal-input.js';

const OPTION_KEYS: Array<keyof StartChildOptions> = ['key', 'signals', 'onParentCancel', 'allowMultiple'];
const ON_PARENT_CANCEL: readonly OnParentCancel[] = ['cancel', 'abandon'];

/** One child a body started, validated at the call, written with the step's outcome. */
interface ChildRequest {
  definition: WorkflowDefinition;
  heroType: string;
  heroId: string;
  key: string;
  signals: PreparedSignal[];
  onParentCancel: OnParentCancel;
  allowMultiple: boolean;
  handle: ChildHandle;
}

/** What the outputs of a body need to validate what it hands over. */
interface OutputRules {
  registry: WorkflowRegistry;
  dataSource: DataSource;
  schema: SchemaCapabilities;
  /** maxSignalPayloadSize: a result travels in its parent's signal. */
  payloadLimit: number | null;
}

/**
 * What one run of a step body hands over to be written with its outcome (`this.startChild`,
 * `this.setResult`): validated at the call, so that a bad argument is the body's own exception,
 * and kept in memory until the outcome is recorded — a body that does not complete writes none of it.
 */
export class StepOutputs implements StepOutputSink {
  readonly children: ChildRequest[] = [];
  /** The value `setResult` stored, as it will read back. */
  result: { value: unknown } | undefined;

  constructor(private readonly rules: OutputRules) {}

  startChild(workflowClass: ChildWorkflowClass, hero: object, given: StartChildOptions = {}): ChildHandle {
    const { registry, dataSource, schema, payloadLimit } = this.rules;
    schema.assertChildren('startChild');
    const definition = registry.getByClass(workflowClass);
    if (!isPlainObject(given)) throw new InvalidOptionError('startChild', 'options', `the options must be an object, got ${show(given)}`);
    const options: StartChildOptions = given;
    rejectUnknownKeys('startChild', options, OPTION_KEYS);
    const key = this.keyOf(options.key);
    const onParentCancel = options.onParentCancel ?? 'cancel';
    if (!ON_PARENT_CANCEL.includes(onParentCancel)) {
      throw new InvalidOptionError('startChild', 'onParentCancel', `onParentCancel must be 'cancel' or 'abandon', got ${show(onParentCancel)}`);
    }
    const allowMultiple = options.allowMultiple ?? false;
    if (typeof allowMultiple !== 'boolean') throw new InvalidOptionError('startChild', 'allowMultiple', `allowMultiple must be a boolean, got ${show(allowMultiple)}`);
    const { heroType, heroId } = heroReference(dataSource, definition.name, hero, definition.heroEntity?.(), true);
    // Two children of one class and hero from one body: the second could never be written.
    const twin = this.children.find((child) => child.definition === definition && child.heroType === heroType && child.heroId === heroId);
    if (twin && !(twin.allowMultiple && allowMultiple)) throw new WorkflowAlreadyOngoingError(definition.name, heroType, heroId);
    const signals = prepareStartSignals(options.signals, definition, payloadLimit, schema.hasSignals);
    const handle: ChildHandle = { key, workflowClass: definition.name, id: null };
    this.children.push({ definition, heroType, heroId, key, signals, onParentCancel, allowMultiple, handle });
    return handle;
  }

  setResult(value: unknown): void {
    const encoded = encodePayload(value, 'Workflow result');
    const limit = this.rules.payloadLimit;
    const size = encodedSize(encoded);
    if (limit !== null && size > limit) throw new ResultTooLargeError(size, limit);
    this.result = { value: decodePayload(encoded) };
  }

  /** The key given (a non-blank string of at most 255 bytes, or a safe integer), or the call's position; unique in the body. */
  private keyOf(given: unknown): string {
    let key: string;
    if (given === undefined) key = String(this.children.length);
    else if (typeof given === 'number' && Number.isSafeInteger(given)) key = String(given);
    else if (typeof given === 'string' && given.trim() !== '') key = given;
    else throw new InvalidOptionError('startChild', 'key', `key must be a non-blank string or a safe integer, got ${show(given)}`);
    const problem = identifierProblem(key);
    if (problem) throw new InvalidOptionError('startChild', 'key', `key ${problem}`);
    if (this.children.some((child) => child.key === key)) throw new InvalidOptionError('startChild', 'key', `the key ${show(key)} names another child of this step already`);
    return key;
  }
}

/**
 * Writes a step's outputs in the transaction that records its outcome, under the parent's row lock:
 * the result on the workflow, and the children with their first executions (jobs sent after the
 * commit, like any start's). A thousand children are a handful of statements: one multi-row INSERT of
 * workflows and one of executions per 500, and a read of their ids each. A child whose key this step
 * started already (a completed step run again) is not started twice.
 */
export class ChildStart {
  constructor(
    private readonly store: WorkflowStore,
    private readonly schema: SchemaCapabilities,
    private readonly rules: () => OutputRules,
  ) {}

  /** Fresh outputs for one run of a body. */
  outputs(): StepOutputs {
    return new StepOutputs(this.rules());
  }

  /** Writes the result and starts the children; `WorkflowAlreadyOngoingError` when a child's hero has an ongoing workflow of its class. */
  async write(manager: EntityManager, parent: WorkflowRecord, stepName: string, outputs: StepOutputs): Promise<void> {
    if (outputs.result) await this.store.updateWorkflow(manager, parent, { result: outputs.result.value });
    if (outputs.children.length === 0) return;
    await this.store.flush(manager);
    const started = await startedChildKeys(manager, parent.id, stepName);
    const now = this.store.now();
    const children = outputs.children
      .filter((request) => !started.has(request.key))
      .map((request) => {
        const { definition, heroType, heroId, allowMultiple, key, onParentCancel } = request;
        const workflow = newWorkflow(manager, this.schema, now, { type: definition.name, heroType, heroId, allowMultiple }, definition.firstStep?.name ?? null);
        Object.assign(workflow, { parentId: parent.id, parentStepName: stepName, childKey: key, onParentCancel });
        return { request, workflow };
      });
    if (children.length === 0) return;
    try {
      await insertRows(manager, WorkflowRecord, children.map((child) => child.workflow));
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      const request = await ongoingTwin(manager, children.map((child) => child.request), error);
      throw new ChildrenRefused(new WorkflowAlreadyOngoingError(request.definition.name, request.heroType, request.heroId, { cause: error }));
    }
    const ids = await childIdsByKey(manager, parent.id, stepName);
    for (const child of children) child.workflow.id = ids.get(child.request.key)!;
    const firsts = children.flatMap(({ request, workflow }) => {
      const first = request.definition.firstStep;
      return first ? [{ workflow, definition: request.definition, first, execution: newExecution(manager, this.schema, now, workflow.id, first.name, { waitMs: first.waitMs }) }] : [];
    });
    await insertRows(manager, StepExecution, firsts.map(({ execution }) => execution));
    const executionIds = await firstExecutionIds(manager, firsts.map(({ workflow }) => workflow.id));
    for (const { workflow, execution } of firsts) execution.id = executionIds.get(workflow.id)!;
    // Signals cost a statement each (signal-with-start is rare in a fan-out).
    for (const { request, workflow } of children) {
      for (const signal of request.signals) await this.store.sql(manager).insertSignal(manager, newSignal(manager, this.schema, now, workflow.id, signal), false);
    }
    for (const { request, workflow } of children) {
      request.handle.id = workflow.id;
      // A class without steps finishes at once, as start() finishes it (its parent is told).
      if (!request.definition.firstStep) await this.store.transitionWorkflow(manager, workflow, 'finished');
    }
    for (const { workflow, definition, first, execution } of firsts) await this.store.enqueue(manager, workflow, execution, jobOptionsFor(definition, first));
    if (!parent.hasChildren) await this.store.updateWorkflow(manager, parent, { hasChildren: true });
  }
}

/**
 * Writing the children was refused: one of them has the hero of an ongoing workflow of its class
 * (the one-ongoing index). The step's outcome becomes `error` (FinalizePhase.childrenRefused).
 */
export class ChildrenRefused extends Error {
  constructor(readonly error: WorkflowAlreadyOngoingError) {
    super(error.message);
  }
}

/**
 * The child the one-ongoing index refused: the one whose type and hero id the database's message
 * names (PostgreSQL's detail, MySQL's duplicate entry); else (SQLite's message names the columns
 * only, and its transaction lives on after a failed statement) the one whose hero has an ongoing
 * workflow of its class; else the first that could collide.
 */
async function ongoingTwin(manager: EntityManager, requests: ChildRequest[], error: unknown): Promise<ChildRequest> {
  const { message, detail } = ((error as { driverError?: unknown }).driverError ?? error) as { message?: string; detail?: string };
  const text = `${detail ?? ''} ${message ?? ''}`;
  const candidates = requests.filter((request) => !request.allowMultiple);
  const named = candidates.find((request) => text.includes(request.definition.name) && text.includes(request.heroId));
  if (named || !isSqlite(manager)) return named ?? candidates[0] ?? requests[0];
  for (const request of candidates) {
    const { definition, heroType, heroId } = request;
    if (await manager.exists(WorkflowRecord, { where: { type: definition.name, heroType, heroId, allowMultiple: false, state: In([...ONGOING_WORKFLOW_STATES]) } })) return request;
  }
  return candidates[0] ?? requests[0];
}
