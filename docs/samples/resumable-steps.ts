/** Manual § Resumable steps. */
import { InjectDataSource } from '@nestjs/typeorm';
import { GenevaWorkflow, ResumableStep, Step, StepIteration, Workflow } from 'geneva-drive';
import { DataSource } from 'typeorm';
import { Campaign, Mailer, Subscriber } from './shop.js';

// #region over-records
@Workflow({ hero: () => Campaign })
export class NewsletterWorkflow extends GenevaWorkflow<Campaign> {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly mailer: Mailer,
  ) {
    super();
  }

  /** One execution runs for at most 30 seconds; the next one continues after the last id mailed. */
  @ResumableStep({ maxRuntime: '30s' })
  async mailSubscribers(iter: StepIteration<number>) {
    const subscribers = this.dataSource
      .getRepository(Subscriber)
      .createQueryBuilder('s')
      .where('s.campaignId = :campaign', { campaign: this.hero.id });
    for await (const subscriber of iter.overRecords(subscribers, { cursor: 'id', batchSize: 200 })) {
      await this.mailer.send(subscriber.email, this.hero.subject);
    }
  }

  @Step()
  async report() {
    this.logger.log(`campaign ${this.hero.id} mailed`);
  }
}
// #endregion over-records

// #region over-batches
@Workflow({ hero: () => Campaign })
export class MarkMailedWorkflow extends GenevaWorkflow<Campaign> {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {
    super();
  }

  /** 500 rows per checkpoint; at most 20 checkpoints per execution. */
  @ResumableStep({ maxIterations: 20 })
  async markMailed(iter: StepIteration<number>) {
    const query = this.dataSource.getRepository(Subscriber).createQueryBuilder('s').where('s.campaignId = :campaign', { campaign: this.hero.id });
    for await (const batch of iter.overBatches(query, { batchSize: 500 })) {
      const ids = (await batch.getMany()).map((subscriber) => subscriber.id);
      await this.dataSource.getRepository(Subscriber).update(ids, { mailed: true });
    }
  }
}
// #endregion over-batches

// #region over-array
@Workflow({ hero: () => Campaign })
export class TranslationWorkflow extends GenevaWorkflow<Campaign> {
  /** The cursor is the index of the next language; the list must be the same on every run. */
  @ResumableStep()
  async translate(iter: StepIteration<number>) {
    for await (const language of iter.over(['de', 'fr', 'it', 'rm'])) {
      this.logger.log(`translating "${this.hero.subject}" into ${language}`);
    }
  }
}
// #endregion over-array

// #region manual-cursor
interface ApiPage {
  items: string[];
  next: string | null;
  rateLimited: boolean;
}

@Workflow({ hero: () => Campaign })
export class BounceImportWorkflow extends GenevaWorkflow<Campaign> {
  /** Walks a paginated API; the cursor is the provider's page token. */
  @ResumableStep({ maxRuntime: '1m' })
  async importBounces(iter: StepIteration<{ page: string | null; imported: number }>) {
    let { page, imported } = iter.cursor ?? { page: null, imported: 0 };
    for (;;) {
      const result = await this.fetchPage(page);
      if (result.rateLimited) await iter.skipTo({ page, imported }, { wait: '15m' }); // hands on, resumes in 15 min
      imported += result.items.length;
      if (result.next === null) break;
      page = result.next;
      await iter.set({ page, imported }); // persisted: a crash after this line resumes from here
    }
    this.logger.log(`${imported} bounces imported${iter.resumed ? ' (resumed)' : ''}`);
  }

  private async fetchPage(page: string | null): Promise<ApiPage> {
    return { items: page === null ? ['a@example.com'] : [], next: page === null ? 'p2' : null, rateLimited: false };
  }
}
// #endregion manual-cursor

// #region resumable-wait-for
@Workflow({ hero: () => Campaign })
export class ExportWorkflow extends GenevaWorkflow<Campaign> {
  /** Parks once, until the export is ready; every execution of the chain sees the same signal. */
  @ResumableStep({ waitFor: 'export_ready', maxIterations: 10, onException: 'reattempt' })
  async downloadParts(iter: StepIteration<number>) {
    const { parts } = this.receivedSignal!.payload as { parts: number };
    if (iter.cursor === null) await iter.set(0);
    while (iter.cursor! < parts) {
      this.logger.log(`downloading part ${iter.cursor! + 1} of ${parts}`);
      await iter.advance();
    }
  }
}
// #endregion resumable-wait-for
