import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable, Scope } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import {
  GenevaDriveModule,
  InvalidOptionError,
  GenevaWorkflow,
  InvalidHeroError,
  Step,
  StepConfigurationError,
  UnknownWorkflowError,
  Workflow,
  WorkflowRecord,
  WorkflowService,
} from 'geneva-drive';
import { GenevaDriveTesting } from 'geneva-drive/testing';
import type { DataSource } from 'typeorm';
import { engineLogger } from '../src/test-app.js';
import { dataSourceOptions, prepareDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

@Workflow()
class OneStepWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async only() {}
}

@Workflow()
class NotRegisteredWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async only() {}
}

@Workflow()
@Injectable({ scope: Scope.REQUEST })
class RequestScopedWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async only() {}
}

@Injectable()
@Workflow()
class SingletonWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async only() {}
}

const typeorm = () => TypeOrmModule.forRoot({ ...dataSourceOptions('sqlite'), migrations: [], migrationsRun: false });

describe('module configuration [sqlite]', () => {
  const opened: Array<{ close(): Promise<void> }> = [];
  afterEach(async () => {
    while (opened.length) await opened.pop()!.close();
  });

  it('forRootAsync builds the options with injected dependencies', async () => {
    await prepareDatabase('sqlite');
    const moduleRef = await Test.createTestingModule({
      imports: [typeorm(), GenevaDriveModule.forRootAsync({ useFactory: async () => ({ queue: { adapter: 'manual' as const }, housekeeping: false as const }) })],
      providers: [OneStepWorkflow],
    })
      .setLogger(engineLogger())
      .compile();
    opened.push(moduleRef);
    await moduleRef.init();
    const heroes = moduleRef.get<DataSource>(getDataSourceToken()).getRepository(TestHero);
    const wf = await moduleRef.get(WorkflowService).start(OneStepWorkflow, await heroes.save(heroes.create({ name: 'a' })));
    const finished = await GenevaDriveTesting.create(moduleRef).speedrunWorkflow(wf);
    expect(finished.state).toBe('finished');
  });

  // An option error fails the compilation, before there is an application to close: these tests
  // leave TypeORM out, or the DataSource it had opened would stay open.
  it('rejects an unknown queue adapter at boot with a message naming the option', async () => {
    const build = Test.createTestingModule({
      imports: [GenevaDriveModule.forRoot({ queue: { adapter: 'rabbit' } as never })],
    })
      .setLogger(engineLogger())
      .compile();
    await expect(build).rejects.toThrow(/queue\.adapter must be one of bull, bullmq, local, manual/);
  });

  it.each([[-1], [1.5], [Number.NaN], ['3']])('rejects maxRecoveries %p at boot with an InvalidOptionError naming the option', async (maxRecoveries) => {
    const build = Test.createTestingModule({
      imports: [GenevaDriveModule.forRoot({ maxRecoveries: maxRecoveries as number })],
    })
      .setLogger(engineLogger())
      .compile();
    const error = await build.then(() => undefined, (thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect((error as InvalidOptionError).option).toBe('maxRecoveries');
    expect((error as Error).message).toMatch(/maxRecoveries must be a non-negative integer or null/);
  });

  it('rejects a request-scoped workflow at boot', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [typeorm(), GenevaDriveModule.forRoot({ queue: { adapter: 'manual' }, housekeeping: false })],
      providers: [RequestScopedWorkflow],
    })
      .setLogger(engineLogger())
      .compile();
    opened.push(moduleRef);
    await expect(moduleRef.init()).rejects.toThrow(StepConfigurationError);
    await expect(moduleRef.init()).rejects.toThrow(/RequestScopedWorkflow.*request-scoped/);
  });

  it('refuses a workflow whose @Injectable() above @Workflow() made it a singleton', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [typeorm(), GenevaDriveModule.forRoot({ queue: { adapter: 'manual' }, housekeeping: false })],
      providers: [SingletonWorkflow],
    })
      .setLogger(engineLogger())
      .compile();
    opened.push(moduleRef);
    await expect(moduleRef.init()).rejects.toThrow(/SingletonWorkflow.*remove @Injectable\(\)/);
  });

  it('refuses to start an unregistered class or a hero that is not a saved entity, writing nothing', async () => {
    await prepareDatabase('sqlite');
    const moduleRef = await Test.createTestingModule({
      imports: [typeorm(), GenevaDriveModule.forRoot({ queue: { adapter: 'manual' }, housekeeping: false })],
      providers: [OneStepWorkflow],
    })
      .setLogger(engineLogger())
      .compile();
    opened.push(moduleRef);
    await moduleRef.init();
    const workflows = moduleRef.get(WorkflowService);
    const dataSource = moduleRef.get<DataSource>(getDataSourceToken());
    const heroes = dataSource.getRepository(TestHero);
    await expect(workflows.start(NotRegisteredWorkflow, await heroes.save(heroes.create({ name: 'a' })))).rejects.toThrow(UnknownWorkflowError);
    await expect(workflows.start(OneStepWorkflow, { name: 'plain object' })).rejects.toThrow(InvalidHeroError);
    await expect(workflows.start(OneStepWorkflow, heroes.create({ name: 'unsaved' }))).rejects.toThrow(/save it first/);
    expect(await dataSource.getRepository(WorkflowRecord).count()).toBe(0);
  });
});
