/**
 * The public surface of the package: every name each entry point exports, as values (what `import`
 * yields at run time) and as types (what only the type-checker sees), against the lists below. A
 * name added to or removed from an entry point, by hand or through an `export *` of a module that
 * grew, fails here until the list says so too: a change of the surface is a deliberate diff, with
 * its line in the CHANGELOG.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

type Entry = 'geneva-drive' | 'geneva-drive/testing' | 'geneva-drive/dashboard' | 'geneva-drive/terminus' | 'geneva-drive/metrics' | 'geneva-drive/tracing';

/** Each entry point of package.json's `exports`: its source file, and its module as an application imports it. */
const ENTRIES: Record<Entry, { file: string; load: () => Promise<object> }> = {
  'geneva-drive': { file: 'index.ts', load: () => import('geneva-drive') },
  'geneva-drive/testing': { file: 'testing/index.ts', load: () => import('geneva-drive/testing') },
  'geneva-drive/dashboard': { file: 'dashboard/index.ts', load: () => import('geneva-drive/dashboard') },
  'geneva-drive/terminus': { file: 'terminus/index.ts', load: () => import('geneva-drive/terminus') },
  'geneva-drive/metrics': { file: 'metrics/index.ts', load: () => import('geneva-drive/metrics') },
  'geneva-drive/tracing': { file: 'tracing/index.ts', load: () => import('geneva-drive/tracing') },
};

/** The surface, sorted: change it together with the entry point and the CHANGELOG. */
const SURFACE: Record<Entry, { values: string[]; types: string[] }> = {
  'geneva-drive': {
    values: [
      'CHILD_FINISHED', 'ChildrenMatcher', 'ChildrenNotMigratedError',
      'CommitOutcomeUnknownError', 'ConcurrencyKeyError', 'CursorTooLargeError', 'DataSourceNotFoundError',
      'DeadlinesNotMigratedError', 'DeployCheck', 'EntitiesNotRegisteredError', 'ExceptionPolicy', 'ExecutorService',
      'FlowControlNotMigratedError', 'FlowControlSignal', 'GENEVA_DRIVE_CHANNELS', 'GENEVA_DRIVE_ENTITIES', 'GENEVA_DRIVE_MIGRATIONS',
      'GENEVA_DRIVE_TRACING_CHANNELS', 'GenevaDriveError', 'GenevaDriveModule', 'GenevaWorkflow',
      'HeroTypeNotFoundError', 'HousekeepingService', 'InvalidHeroError', 'InvalidOptionError',
      'InvalidSignalError', 'InvalidStateError', 'InvalidTransitionError', 'MissingDependencyError',
      'NoOngoingWorkflowError', 'NotInitialisedError', 'NotTransactionalError', 'QUEUE_PORT', 'QueueConfigurationError', 'ResultTooLargeError', 'ResumableStep',
      'SchemaNotMigratedError', 'Signal', 'SignalMatcher', 'SignalNotReceivedError', 'SignalOutcomeUnknownError',
      'SignalPayloadTooLargeError', 'SignalService', 'SignalsNotMigratedError', 'Step',
      'StepConfigurationError', 'StepExecution', 'StepIteration', 'StepNotDefinedError',
      'StepRecoveryLimitError', 'TransactionTimeoutError', 'UnencodableValueError', 'UnknownSignalNameError', 'UnknownWorkflowError', 'Workflow',
      'WorkflowAlreadyOngoingError', 'WorkflowNotFoundError', 'WorkflowNotOngoingError', 'WorkflowRecord',
      'WorkflowService', 'addStep', 'childrenOf', 'genevaDriveMigrations', 'isFlowControl', 'isGenevaDriveError',
      'setJobContextPropagator',
    ],
    types: [
      'Backoff', 'BullMqQueueAdapterOptions', 'BullQueueAdapterOptions', 'ChildEndState', 'ChildFinishedPayload', 'ChildHandle',
      'ChildSignal', 'ChildWorkflow', 'ChildrenCount', 'ChildrenOfOptions', 'ChildrenPageOptions', 'ClassExceptionPolicy', 'ConcurrencyOptions',
      'CustomQueueAdapterOptions', 'DeployCheckReport', 'Duration', 'EnqueueOptions', 'ErrorMatcher', 'ExceptionAction', 'ExceptionHandler',
      'ExceptionPolicyOptions', 'ExecuteOptions', 'ExecutionEvent', 'FinalizeEvent', 'Gauge',
      'GenevaDriveCliConfig', 'GenevaDriveMigrationsOptions', 'GenevaDriveModuleOptions',
      'HousekeepingSummary', 'JobContextPropagator', 'LocalQueueAdapterOptions', 'ManualQueueAdapterOptions', 'OnParentCancel',
      'PreconditionEvent', 'PrimaryKeyType', 'ProgrammaticStepOptions', 'QueueAdapterOptions', 'QueuePort', 'RateLimitOptions',
      'ReattemptWait', 'RedisConnectionOptions', 'RemovedStepInFlight', 'RemovedStepOptions', 'ResumableStepOptions', 'SignalCall', 'SignalEvent',
      'SignalMatcherLike', 'SignalOptions', 'SignalState', 'SignalTimeoutEvent', 'StartCall', 'StartChildOptions', 'StartOptions',
      'StartSignal', 'StepEvent', 'StepExecutionMetadata', 'StepExecutionState', 'StepGauge', 'StepJob', 'StepJobHandler',
      'StepJobHints', 'StepJobOptions', 'StepOptions', 'StepOutcome', 'StrandedReason', 'StrandedStep', 'TimeoutAction', 'WorkflowCondition',
      'WorkflowOptions', 'WorkflowState',
    ],
  },
  'geneva-drive/testing': {
    values: ['GenevaDriveTesting', 'ManualQueueAdapter'],
    types: [],
  },
  'geneva-drive/dashboard': {
    values: ['DashboardInputError', 'DashboardPathError', 'DashboardUnguardedError', 'GenevaDriveDashboardModule'],
    types: [
      'GenevaDriveDashboardModuleAsyncOptions', 'GenevaDriveDashboardModuleOptions',
      'GenevaDriveDashboardOptions',
    ],
  },
  'geneva-drive/terminus': {
    values: ['GenevaDriveHealthIndicator'],
    types: ['GenevaDriveHealthThresholds'],
  },
  'geneva-drive/metrics': {
    values: ['GenevaDriveMetrics', 'GenevaDriveMetricsModule'],
    types: ['GenevaDriveAsyncModuleOptions', 'GenevaDriveMetricsOptions'],
  },
  'geneva-drive/tracing': {
    values: ['GENEVA_DRIVE_SPAN_ATTRIBUTES', 'GenevaDriveTracing', 'GenevaDriveTracingModule'],
    types: ['GenevaDriveAsyncModuleOptions', 'GenevaDriveTracingOptions'],
  },
};

const SRC = fileURLToPath(new URL('./', import.meta.url));

/**
 * Every name each file exports, types included, as the type-checker resolves them (`export *`,
 * `export type *`, renames). Only the files the entries reach through relative imports are read,
 * which keeps this fast: packages are left unresolved (an entry point re-exports none).
 */
function declaredExports(files: string[]): Map<string, string[]> {
  const options: ts.CompilerOptions = { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, noLib: true, types: [], noEmit: true };
  const host = ts.createCompilerHost(options);
  host.resolveModuleNameLiterals = (literals, containingFile, _redirected, compilerOptions) =>
    literals.map((literal) => (/^\.\.?\//.test(literal.text) ? ts.resolveModuleName(literal.text, containingFile, compilerOptions, host) : { resolvedModule: undefined }));
  const program = ts.createProgram(files, options, host);
  const checker = program.getTypeChecker();
  return new Map(
    files.map((file) => {
      const source = program.getSourceFile(file);
      const module = source && checker.getSymbolAtLocation(source);
      if (!module) throw new Error(`${file} is not a module`);
      return [file, checker.getExportsOfModule(module).map((symbol) => symbol.name).sort()];
    }),
  );
}

describe('the public surface', () => {
  let declared: Map<string, string[]>;
  beforeAll(() => {
    declared = declaredExports(Object.values(ENTRIES).map(({ file }) => join(SRC, file)));
  });

  describe.each(Object.keys(ENTRIES) as Entry[])('%s', (entry) => {
    it('exports exactly the listed values', async () => {
      const values = Object.keys(await ENTRIES[entry].load()).sort();
      expect(values).toEqual(SURFACE[entry].values);
    });

    it('exports exactly the listed types besides them', async () => {
      const names = declared.get(join(SRC, ENTRIES[entry].file))!;
      const values = new Set(Object.keys(await ENTRIES[entry].load()));
      expect([...values].filter((name) => !names.includes(name))).toEqual([]);
      expect(names.filter((name) => !values.has(name))).toEqual(SURFACE[entry].types);
    });
  });

  it('lists every entry point of the package', () => {
    const manifest = JSON.parse(readFileSync(join(SRC, '../package.json'), 'utf8')) as { exports: Record<string, unknown> };
    const subpaths = Object.keys(manifest.exports).filter((subpath) => subpath !== './package.json');
    expect(subpaths.map((subpath) => join('geneva-drive', subpath)).sort()).toEqual(Object.keys(ENTRIES).sort());
  });
});

describe('the list of declared exports', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'gd-surface-'));
    writeFileSync(join(dir, 'values.ts'), 'export const shown = 1;\nexport function leaked(): void {}\n');
    writeFileSync(join(dir, 'types.ts'), 'export interface Options { a?: number }\nexport type Resolved = Required<Options>;\n');
    writeFileSync(join(dir, 'classes.ts'), 'export class Service {}\nexport enum Mode { A }\n');
    writeFileSync(
      join(dir, 'entry.ts'),
      "export * from './values.js';\nexport type * from './types.js';\nexport { Service as Renamed, type Mode } from './classes.js';\nexport type Local = string;\n",
    );
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('sees what `export *` and `export type *` pass on, renames, and local declarations', () => {
    expect(declaredExports([join(dir, 'entry.ts')]).get(join(dir, 'entry.ts'))).toEqual(['Local', 'Mode', 'Options', 'Renamed', 'Resolved', 'leaked', 'shown']);
  });
});
