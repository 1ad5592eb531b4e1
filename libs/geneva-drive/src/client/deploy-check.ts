import { Injectable } from '@nestjs/common';
import { stepsInFlight } from '../persistence/steps-in-flight.js';
import { TransactionRunner } from '../persistence/transaction-runner.js';
import { missingHere } from '../registry/runnable-steps.js';
import { WorkflowRegistry } from '../registry/workflow.registry.js';

/**
 * Why the code cannot take the workflows of a row: their class defines no step of that name and
 * declares none removed (`step-not-defined`), or the code registers no class of that type at all
 * (`class-not-registered`). @publicApi
 */
export type StrandedReason = 'step-not-defined' | 'class-not-registered';

/** Ongoing workflows of one class standing at one step the code cannot take, and how many. @publicApi */
export interface StrandedStep {
  workflowType: string;
  stepName: string;
  workflows: number;
  reason: StrandedReason;
}

/**
 * What `DeployCheck.run()` found: `stranded` is empty when every ongoing workflow stands at a step
 * its class defines or declares removed (`removedSteps`). @publicApi
 */
export interface DeployCheckReport {
  /** True when nothing is stranded. */
  ok: boolean;
  /** One row per workflow class and step, sorted by class then step. */
  stranded: StrandedStep[];
  /** How many ongoing workflows the rows hold together. */
  strandedWorkflows: number;
  /** The workflow types the code registers, sorted: what the check held the database against. */
  registeredTypes: string[];
}

/**
 * The pre-deploy check: the ongoing workflows whose current, scheduled or parked execution (or, with
 * none, the step `resume` would run) names a step the registered workflow classes neither define nor
 * declare removed, and those of types no registered class has; grouped by class and step. Run it with
 * the code about to be deployed against the production database (the `geneva-drive check` command
 * does), before the deploy: each row is work that code would leave where it stands. A class with
 * `skipUndefinedSteps` has an answer for every step (it skips them), so none of its rows is stranded.
 * One grouped read, no lock, nothing written. The module logs the same summary as one warning at boot.
 * @publicApi
 */
@Injectable()
export class DeployCheck {
  constructor(
    private readonly transactions: TransactionRunner,
    private readonly registry: WorkflowRegistry,
  ) {}

  async run(): Promise<DeployCheckReport> {
    const definitions = this.registry.all();
    const inFlight = await stepsInFlight(this.transactions.dataSource.manager);
    const stranded: StrandedStep[] = [];
    for (const { workflowType, stepName, workflows } of inFlight) {
      // The rule of what a process runs (registry/runnable-steps.ts), applied to the code being checked.
      const missing = missingHere(this.registry, workflowType, stepName);
      if (missing) stranded.push({ workflowType, stepName, workflows, reason: missing === 'class' ? 'class-not-registered' : 'step-not-defined' });
    }
    return {
      ok: stranded.length === 0,
      stranded,
      strandedWorkflows: stranded.reduce((sum, row) => sum + row.workflows, 0),
      registeredTypes: definitions.map((definition) => definition.name).sort(),
    };
  }
}

const REASON_TEXT: Record<StrandedReason, string> = {
  'step-not-defined': 'step not defined',
  'class-not-registered': 'class not registered',
};

/**
 * The report in words, one line per row after a first line with the totals: what the CLI's `check`
 * prints and the boot warning says. `text` renders each stored name (a terminal escapes them).
 */
export function deployCheckLines(report: DeployCheckReport, text: (stored: string) => string = String): string[] {
  const classes = `${report.registeredTypes.length} workflow class${report.registeredTypes.length === 1 ? '' : 'es'}`;
  if (report.ok) return [`No ongoing workflow is stranded: each stands at a step its class defines or declares removed (${classes} checked)`];
  const count = report.strandedWorkflows;
  return [
    `${count} ongoing workflow${count === 1 ? '' : 's'} stand${count === 1 ? 's' : ''} at a step this code cannot run (${classes} checked):`,
    ...report.stranded.map((row) => `  ${text(row.workflowType)}\t${text(row.stepName)}\t${row.workflows}\t${REASON_TEXT[row.reason]}`),
    'Declare each deleted step in @Workflow({ removedSteps }), register the missing classes, or move the workflows with resumeAt.',
  ];
}
