/**
 * The pre-deploy check on every database. The code before a deploy (deploy-check-workflows.ts) leaves
 * workflows at steps the code after it (cli-workflows.ts) deletes: with a gravestone (not stranded),
 * without one (stranded, whether scheduled, paused or parked waiting for a signal), or with the whole
 * class (stranded); workflows that finished or were canceled after passing through such a step are
 * not read. The same report comes from
 * `DeployCheck.run()`, from the one warning the application logs at boot, and from the CLI's `check`
 * (text and --json, exit 1); once the workflows are moved or canceled, the check is clean (exit 0).
 */
import { jest } from '@jest/globals';
import type { LoggerService } from '@nestjs/common';
import { DeployCheck, SignalService, WorkflowService, type DeployCheckReport, type WorkflowRecord } from 'geneva-drive';
import { compileCli, type CompiledCli } from '../src/cli-runner.js';
import { InvoiceFlow, ShippingFlow } from '../src/cli-workflows.js';
import { ArchiveFlow, BEFORE_DEPLOY, InvoiceFlowBeforeDeploy, ShippingFlowBeforeDeploy } from '../src/deploy-check-workflows.js';
import { createTestApp, warningsLogger, type TestApp } from '../src/test-app.js';
import { describeEachDatabase, prepareDatabase, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

// Each CLI command is a process that boots Nest.
jest.setTimeout(180_000);

let cli: CompiledCli;

beforeAll(async () => {
  cli = await compileCli('deploy-check');
}, 120_000);

/** The code after the deploy, booted on the database the code before it left. */
function afterDeploy(kind: DatabaseKind, logger: LoggerService): Promise<TestApp> {
  return createTestApp(kind, [InvoiceFlow, ShippingFlow], { prepare: false, logger });
}

interface LeftBehind {
  /** InvoiceFlows about to send a fax (the last paused by an operator): stranded. */
  atSendFax: WorkflowRecord[];
  /** A ShippingFlow parked waiting for 'courier_booked' at awaitCourier: stranded. */
  atAwaitCourier: WorkflowRecord;
  /** Its ArchiveFlows: stranded, the class is gone. */
  archives: WorkflowRecord[];
}

/**
 * Runs the code before the deploy on a fresh database: besides what LeftBehind lists, an InvoiceFlow
 * parked at awaitPayment (defined after the deploy), a ShippingFlow at printLabel (declared removed
 * after the deploy), and workflows whose history holds the deleted steps but which are not ongoing:
 * an InvoiceFlow canceled at sendFax, a ShippingFlow canceled while parked at awaitCourier, an
 * InvoiceFlow and a ShippingFlow finished after running them, a finished ArchiveFlow. None of them
 * is stranded.
 */
async function beforeDeploy(kind: DatabaseKind): Promise<LeftBehind> {
  const before = await createTestApp(kind, BEFORE_DEPLOY);
  try {
    const workflows = before.moduleRef.get(WorkflowService);
    const signals = before.moduleRef.get(SignalService);
    const heroes = before.dataSource.getRepository(TestHero);
    const start = async (workflowClass: (typeof BEFORE_DEPLOY)[number], steps: number) => {
      const workflow = await workflows.start(workflowClass, await heroes.save(heroes.create({ name: workflowClass.name })));
      for (let i = 0; i < steps; i++) await before.gd.performNextStep(workflow);
      return workflow;
    };
    const atSendFax = [await start(InvoiceFlowBeforeDeploy, 1), await start(InvoiceFlowBeforeDeploy, 1), await start(InvoiceFlowBeforeDeploy, 1)];
    await workflows.pause(atSendFax[2]);
    await start(InvoiceFlowBeforeDeploy, 3); // parked at awaitPayment
    await workflows.cancel(await start(InvoiceFlowBeforeDeploy, 1));
    await start(ShippingFlowBeforeDeploy, 1); // at printLabel
    const atAwaitCourier = await start(ShippingFlowBeforeDeploy, 3);
    await before.gd.assertWaitingForSignal(atAwaitCourier, 'courier_booked');
    await workflows.cancel(await start(ShippingFlowBeforeDeploy, 3)); // canceled while parked at awaitCourier
    const finish = async (workflow: WorkflowRecord, signal: string) => {
      await signals.signal(workflow, signal);
      expect((await before.gd.speedrunWorkflow(workflow)).state).toBe('finished');
      return (await workflows.executionHistory(workflow)).map((execution) => execution.stepName);
    };
    expect(await finish(await start(InvoiceFlowBeforeDeploy, 3), 'payment_confirmed')).toEqual(['prepare', 'sendFax', 'awaitPayment', 'issueReceipt']);
    expect(await finish(await start(ShippingFlowBeforeDeploy, 3), 'courier_booked')).toEqual(['pack', 'printLabel', 'awaitCourier', 'ship']);
    expect((await before.gd.speedrunWorkflow(await start(ArchiveFlow, 0))).state).toBe('finished');
    const archives = [await start(ArchiveFlow, 0), await start(ArchiveFlow, 0)];
    return { atSendFax, atAwaitCourier, archives };
  } finally {
    await before.close();
  }
}

const STRANDED: DeployCheckReport = {
  ok: false,
  stranded: [
    { workflowType: 'ArchiveFlow', stepName: 'archive', workflows: 2, reason: 'class-not-registered' },
    { workflowType: 'InvoiceFlow', stepName: 'sendFax', workflows: 3, reason: 'step-not-defined' },
    { workflowType: 'ShippingFlow', stepName: 'awaitCourier', workflows: 1, reason: 'step-not-defined' },
  ],
  strandedWorkflows: 6,
  registeredTypes: ['InvoiceFlow', 'ShippingFlow'],
};

const STRANDED_TEXT = [
  '6 ongoing workflows stand at a step this code cannot run (2 workflow classes checked):',
  '  ArchiveFlow\tarchive\t2\tclass not registered',
  '  InvoiceFlow\tsendFax\t3\tstep not defined',
  '  ShippingFlow\tawaitCourier\t1\tstep not defined',
  'Declare each deleted step in @Workflow({ removedSteps }), register the missing classes, or move the workflows with resumeAt.',
].join('\n');

const CLEAN_TEXT = 'No ongoing workflow is stranded: each stands at a step its class defines or declares removed (2 workflow classes checked)';

describeEachDatabase('pre-deploy check', (kind) => {
  it('reports the stranded workflows by class and step: the function, the one boot warning, the CLI; clean once they are moved', async () => {
    const left = await beforeDeploy(kind);
    const booted = warningsLogger();
    const after = await afterDeploy(kind, booted.logger);
    try {
      expect(booted.warnings).toEqual([STRANDED_TEXT]);
      expect(await after.moduleRef.get(DeployCheck).run()).toEqual(STRANDED);

      const text = await cli.run(kind, ['check']);
      expect(text).toEqual({ code: 1, stdout: `${STRANDED_TEXT}\n`, stderr: '' });
      const json = await cli.run(kind, ['check', '--json']);
      expect(json.code).toBe(1);
      expect(JSON.parse(json.stdout)).toEqual(STRANDED);

      // The way out: each stranded InvoiceFlow and ShippingFlow moved to a step the code defines (resume refuses it), the ArchiveFlows canceled.
      const [first, second, paused] = left.atSendFax;
      const refused = await cli.run(kind, ['resume', paused.id]);
      expect(refused.code).toBe(4);
      expect(refused.stderr).toContain(`geneva-drive: StepNotDefinedError: Step "sendFax" is not defined in workflow InvoiceFlow (workflow ${paused.id}, execution `);
      expect((await cli.run(kind, ['resume-at', paused.id, 'awaitPayment'])).code).toBe(0);
      const workflows = after.moduleRef.get(WorkflowService);
      for (const workflow of [first, second]) await workflows.resumeAt(workflow, 'awaitPayment');
      await workflows.resumeAt(left.atAwaitCourier, 'ship');
      for (const workflow of left.archives) await workflows.cancel(workflow);
      const clean = { ok: true, stranded: [], strandedWorkflows: 0, registeredTypes: ['InvoiceFlow', 'ShippingFlow'] };
      expect(await after.moduleRef.get(DeployCheck).run()).toEqual(clean);
      expect(await cli.run(kind, ['check'])).toEqual({ code: 0, stdout: `${CLEAN_TEXT}\n`, stderr: '' });
      expect(JSON.parse((await cli.run(kind, ['check', '--json'])).stdout)).toEqual(clean);
    } finally {
      await after.close();
    }
    const rebooted = warningsLogger();
    await (await afterDeploy(kind, rebooted.logger)).close();
    expect(rebooted.warnings).toEqual([]);
  });

  it('exits 0 on a clean database, and refuses to check without the workflow classes', async () => {
    await prepareDatabase(kind);
    expect(await cli.run(kind, ['check'])).toEqual({ code: 0, stdout: `${CLEAN_TEXT}\n`, stderr: '' });
    const noClasses = await cli.run(kind, ['check'], { GD_CLI_NO_CLASSES: '1' });
    expect(noClasses.code).toBe(2);
    expect(noClasses.stderr).toBe(
      'geneva-drive: check needs the workflow classes of the code to check: list them in the genevaDrive.providers (or imports) export of the data source file\n',
    );
  });
});
