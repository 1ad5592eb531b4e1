import { AssertionError, deepStrictEqual } from 'node:assert';
import { inspect } from 'node:util';
import type { INestApplicationContext } from '@nestjs/common';
import { Signal, type SignalState } from '../entities/signal.entity.js';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { ExecutorService, type ExecuteOptions } from '../execution/executor.service.js';
import { QUEUE_PORT } from '../geneva-drive.constants.js';
import { TransactionRunner } from '../persistence/transaction-runner.js';
import { idOf, WorkflowStore } from '../persistence/workflow-store.js';
import type { QueuePort, StepJob } from '../interfaces/queue.port.js';
import { isDeadlineJob } from '../queue/deadline-job.js';
import { ManualQueueAdapter } from '../queue/manual-queue.adapter.js';
import { WorkflowRegistry } from '../registry/workflow.registry.js';
import { describeMatcher } from '../workflow/signal-matcher.js';
import { WaitDeadline } from '../execution/wait-deadline.js';
import type { StepExecutionState } from '../state/step-execution-state.js';
import { isRunnable, type WorkflowState } from '../state/workflow-state.js';

type WorkflowRef = WorkflowRecord | string;

/**
 * Drives and inspects workflows from a test. Create it from a compiled testing module whose
 * GenevaDriveModule uses the `manual` queue: `const gd = GenevaDriveTesting.create(moduleRef)`.
 * Driving helpers run executions immediately (ignoring `scheduledFor`), run resumable steps without
 * interruptions (only `skipTo` hands on), and throw, naming the signal, instead of spinning on a
 * parked execution.
 * @publicApi
 */
export class GenevaDriveTesting {
  private constructor(
    private readonly executor: ExecutorService,
    private readonly transactions: TransactionRunner,
    private readonly store: WorkflowStore,
    private readonly registry: WorkflowRegistry,
    private readonly queue: QueuePort,
    private readonly deadline: WaitDeadline,
  ) {}

  static create(app: INestApplicationContext): GenevaDriveTesting {
    const get = <T>(token: unknown) => app.get<T>(token as never, { strict: false });
    return new GenevaDriveTesting(get(ExecutorService), get(TransactionRunner), get(WorkflowStore), get(WorkflowRegistry), get(QUEUE_PORT), get(WaitDeadline));
  }

  /** Jobs recorded by the manual queue (empty with other adapters). */
  get enqueuedJobs(): readonly StepJob[] {
    return this.queue instanceof ManualQueueAdapter ? this.queue.jobs : [];
  }

  /** Reloads the workflow row. */
  reload(workflow: WorkflowRef): Promise<WorkflowRecord> {
    return this.manager.findOneOrFail(WorkflowRecord, { where: { id: idOf(workflow) } });
  }

  /**
   * Runs the current execution once (even if it is scheduled for later) and returns it reloaded, or
   * null when there is none. The step's own error propagates after its outcome is committed.
   */
  async performNextStep(workflow: WorkflowRef): Promise<StepExecution | null> {
    const current = await this.store.currentExecution(this.manager, idOf(workflow));
    if (!current) return null;
    await this.refuseParked(current);
    return this.executeAndReload(workflow, current.id);
  }

  /** Runs executions until the workflow is no longer ready (finished, canceled, paused) or has none. */
  async speedrunWorkflow(workflow: WorkflowRef, options: { maxSteps?: number } = {}): Promise<WorkflowRecord> {
    const maxSteps = options.maxSteps ?? 100;
    for (let steps = 0; ; steps++) {
      const record = await this.reload(workflow);
      if (!isRunnable(record.state)) return this.sync(workflow, record);
      const current = await this.store.currentExecution(this.manager, record.id);
      if (!current) return this.sync(workflow, record);
      if (steps >= maxSteps) throw new Error(`speedrunWorkflow ran ${maxSteps} steps without the workflow ending: an infinite loop? (raise maxSteps if intended)`);
      await this.refuseParked(current);
      await this.executeAndReload(workflow, current.id);
    }
  }

  /**
   * Runs one step now, out of order if need be (default: the next one), without touching
   * `nextStepName`: the active scheduled or waiting execution is superseded (canceled).
   */
  async performStepInline(workflow: WorkflowRef, stepName?: string): Promise<StepExecution> {
    const record = await this.reload(workflow);
    const definition = this.registry.findByName(record.type);
    const name = stepName ?? record.nextStepName;
    if (!name || !definition?.step(name)) {
      throw new Error(`Step "${name}" is not defined in ${record.type}. Available steps: ${definition?.stepNames.join(', ') ?? 'none'}`);
    }
    const execution = await this.transactions.run(async (manager) => {
      await this.store.lockWorkflow(manager, record.id);
      await this.store.supersedeActive(manager, record.id);
      return this.store.insertExecution(manager, record.id, name);
    });
    return this.executeAndReload(workflow, execution.id);
  }

  /**
   * Runs the current step to its end — following a resumable step's chain of successors — without
   * going on to the next step. Returns the step's last execution, or null when there is none.
   */
  async speedrunCurrentStep(workflow: WorkflowRef, options: { maxExecutions?: number } = {}): Promise<StepExecution | null> {
    const maxExecutions = options.maxExecutions ?? 100;
    let current = await this.store.currentExecution(this.manager, idOf(workflow));
    if (!current) return null;
    const stepName = current.stepName;
    let last: StepExecution | null = null;
    for (let runs = 0; current && current.stepName === stepName && (last === null || current.continuesFromId === last.id); runs++) {
      if (runs >= maxExecutions) throw new Error(`speedrunCurrentStep ran ${maxExecutions} executions of "${stepName}" without it ending`);
      await this.refuseParked(current);
      last = await this.executeAndReload(workflow, current.id);
      current = await this.store.currentExecution(this.manager, idOf(workflow));
    }
    return last;
  }

  /**
   * Runs the current (resumable) execution for `count` checkpoints, then lets it hand on to a
   * successor as an interruption would. Returns the execution.
   */
  async runIterations(workflow: WorkflowRef, count: number): Promise<StepExecution | null> {
    const current = await this.store.currentExecution(this.manager, idOf(workflow));
    if (!current) return null;
    await this.refuseParked(current);
    return this.executeAndReload(workflow, current.id, { maxIterations: count });
  }

  /** The current execution's cursor equals `expected` (deep equality). */
  async assertCursor(workflow: WorkflowRef, expected: unknown): Promise<void> {
    const current = await this.store.currentExecution(this.manager, idOf(workflow));
    if (!current) throw new AssertionError({ message: `Expected workflow ${idOf(workflow)} to have a current execution with a cursor, but it has none` });
    try {
      deepStrictEqual(current.cursor, expected);
    } catch {
      throw new AssertionError({ message: `Expected the cursor of "${current.stepName}" to be ${inspect(expected)}, but it is ${inspect(current.cursor)}`, actual: current.cursor, expected });
    }
  }

  async assertWorkflowState(workflow: WorkflowRef, expected: WorkflowState): Promise<void> {
    const record = await this.reload(workflow);
    if (record.state !== expected) {
      throw new AssertionError({ message: `Expected workflow ${record.id} (${record.type}) to be ${expected}, but it is ${record.state}`, actual: record.state, expected });
    }
  }

  async assertStepExecuted(workflow: WorkflowRef, stepName: string, options: { state?: StepExecutionState } = {}): Promise<void> {
    const state = options.state ?? 'completed';
    const rows = await this.manager.find(StepExecution, { where: { workflowId: idOf(workflow), stepName }, order: { createdAt: 'ASC', id: 'ASC' } });
    if (!rows.some((row) => row.state === state)) {
      if (rows.length === 0) await this.refuseUnknownStep(workflow, stepName);
      const seen = rows.map((row) => `${row.state}/${row.outcome ?? '-'}`).join(', ') || 'no executions';
      throw new AssertionError({ message: `Expected step "${stepName}" to have a ${state} execution; found ${seen}`, actual: seen, expected: state });
    }
  }

  /** The current execution is parked; with a name, the step waits for that signal. */
  async assertWaitingForSignal(workflow: WorkflowRef, name?: string): Promise<void> {
    const record = await this.reload(workflow);
    const current = await this.store.currentExecution(this.manager, record.id);
    if (current?.state !== 'waiting') {
      throw new AssertionError({ message: `Expected workflow ${record.id} to be parked waiting for a signal, but its current execution is ${current ? `${current.stepName} (${current.state})` : 'none'}` });
    }
    const matcher = this.registry.findByName(record.type)?.step(current.stepName)?.waitFor;
    const awaited = matcher ? (matcher.signalName ?? describeMatcher(matcher)) : undefined;
    if (name !== undefined && awaited !== name && (matcher ? describeMatcher(matcher) : undefined) !== name) {
      throw new AssertionError({ message: `Expected step "${current.stepName}" to wait for "${name}", but it waits for "${awaited}"`, actual: awaited, expected: name });
    }
  }

  /**
   * Ends the parked wait now, as its deadline would (the step's `onTimeout`), without waiting for the
   * `timeout`; returns the execution. With `onTimeout: 'run'` the step is then due: `performNextStep`
   * runs it with `timedOut` set. Throws when the workflow is not parked on a step with a `timeout`.
   */
  async expireWait(workflow: WorkflowRef): Promise<StepExecution> {
    const record = await this.reload(workflow);
    const current = await this.store.currentExecution(this.manager, record.id);
    const step = current ? this.registry.findByName(record.type)?.step(current.stepName) : undefined;
    if (current?.state !== 'waiting' || step?.timeoutMs === undefined) {
      throw new Error(
        `expireWait: workflow ${record.id} is not parked on a step with a timeout (${record.state}; current execution ${current ? `${current.stepName} (${current.state})` : 'none'})`,
      );
    }
    const expired = await this.deadline.fire(current.id, { force: true });
    if (!expired) throw new Error(`expireWait: the wait of "${current.stepName}" could not be expired (workflow ${record.state})`);
    this.sync(workflow, await this.reload(workflow));
    return this.manager.findOneOrFail(StepExecution, { where: { id: current.id } });
  }

  /** Some execution of the step timed out waiting for its signal (its `timeout` passed, or `expireWait`). */
  async assertTimedOut(workflow: WorkflowRef, stepName: string): Promise<void> {
    const rows = await this.manager.find(StepExecution, { where: { workflowId: idOf(workflow), stepName }, order: { createdAt: 'ASC', id: 'ASC' } });
    if (!rows.some((row) => row.metadata?.timedOut === true)) {
      if (rows.length === 0) await this.refuseUnknownStep(workflow, stepName);
      const seen = rows.map((row) => `${row.state}/${row.outcome ?? '-'}`).join(', ') || 'no executions';
      throw new AssertionError({ message: `Expected step "${stepName}" to have timed out waiting; found ${seen}, none timed out`, actual: seen, expected: 'timedOut' });
    }
  }

  /** The most recent signal with this name is in `state`. */
  async assertSignalState(workflow: WorkflowRef, name: string, state: SignalState): Promise<void> {
    const signal = await this.manager.findOne(Signal, { where: { workflowId: idOf(workflow), name }, order: { createdAt: 'DESC', id: 'DESC' } });
    if (!signal) throw new AssertionError({ message: `Expected a signal "${name}" on workflow ${idOf(workflow)}, but there is none` });
    if (signal.state !== state) {
      throw new AssertionError({ message: `Expected signal "${name}" to be ${state}, but it is ${signal.state}`, actual: signal.state, expected: state });
    }
  }

  /** A step name the workflow's class does not define (a typo) is said as such, not as "no executions". */
  private async refuseUnknownStep(workflow: WorkflowRef, stepName: string): Promise<void> {
    const record = await this.reload(workflow);
    const definition = this.registry.findByName(record.type);
    if (!definition || definition.knowsStep(stepName)) return;
    throw new AssertionError({
      message: `${record.type} has no step "${stepName}": its steps are ${definition.stepNames.map((name) => `"${name}"`).join(', ') || 'none'}`,
      actual: stepName,
      expected: definition.stepNames,
    });
  }

  private async refuseParked(execution: StepExecution): Promise<void> {
    if (execution.state !== 'waiting') return;
    const record = await this.reload(execution.workflowId);
    const matcher = this.registry.findByName(record.type)?.step(execution.stepName)?.waitFor;
    throw new Error(
      `Step "${execution.stepName}" of workflow ${record.id} is parked waiting for signal ${matcher ? `"${describeMatcher(matcher)}"` : '(unknown)'}: send it with SignalService.signal() first`,
    );
  }

  private async executeAndReload(workflow: WorkflowRef, executionId: string, options: ExecuteOptions = { interruptible: false }): Promise<StepExecution> {
    // Run as the manual queue's latest job for the execution would be, so the row records its job id.
    const job = this.enqueuedJobs.findLast((candidate) => candidate.executionId === executionId && !isDeadlineJob(candidate.jobId));
    try {
      await this.executor.execute(executionId, job ? { ...options, jobId: job.jobId ?? job.executionId } : options);
    } finally {
      if (typeof workflow !== 'string') this.sync(workflow, await this.reload(workflow));
    }
    return this.manager.findOneOrFail(StepExecution, { where: { id: executionId } });
  }

  private sync(target: WorkflowRef, record: WorkflowRecord): WorkflowRecord {
    if (typeof target !== 'string') Object.assign(target, record);
    return record;
  }

  private get manager() {
    return this.transactions.dataSource.manager;
  }
}
