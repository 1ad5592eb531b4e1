import { Body, Get, HttpException, Inject, Param, Post, Query, Req, Res, UseGuards } from '@nestjs/common';
import { DASHBOARD_OPTIONS } from './dashboard.constants.js';
import { DashboardGuard } from './dashboard.guard.js';
import type { ResolvedDashboardOptions } from './dashboard.options.js';
import { DASHBOARD_CSS, DASHBOARD_JS } from './dashboard.assets.js';
import { DONE_MESSAGES, errorPage, flowKeysPage, listPage, overviewPage, workflowPage, type PageContext } from './dashboard.pages.js';
import { ensureCsrfToken } from './csrf.js';
import { statusOf, WorkflowActions, type SignalRequest } from '../operator/workflow-actions.js';
import { DETAIL_CURSOR_KEYS, LIST_FILTER_KEYS, WorkflowReader, type DetailCursors, type ListFilters } from '../operator/workflow-reader.js';
import { WorkflowCatalog } from '../operator/workflow-catalog.js';
import { DashboardInputError } from '../errors/dashboard-input.error.js';

/** The parts of Express's request and response the dashboard uses. */
interface HttpRequest {
  method: string;
  originalUrl?: string;
  url: string;
  secure?: boolean;
  headers: Record<string, string | string[] | undefined>;
  body?: unknown;
  user?: unknown;
}
interface HttpResponse {
  status(code: number): HttpResponse;
  setHeader(name: string, value: string): unknown;
  send(body: string): unknown;
  json(body: unknown): unknown;
  redirect(status: number, url: string): unknown;
}

/**
 * Pages and the JSON API. The mount path is set per module registration (a subclass gets
 * `@Controller(path)`), so links are built from the request's own URL: a global prefix is honoured.
 */
@UseGuards(DashboardGuard)
export class DashboardController {
  constructor(
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    private readonly reader: WorkflowReader,
    private readonly actions: WorkflowActions,
    private readonly catalog: WorkflowCatalog,
  ) {}

  // ------------------------------------------------------------------ pages

  @Get()
  async overview(@Req() req: HttpRequest, @Res() res: HttpResponse) {
    await this.page(req, res, async (ctx) => overviewPage(await this.reader.overview(), ctx));
  }

  @Get('workflows')
  async list(@Query() query: Record<string, unknown>, @Req() req: HttpRequest, @Res() res: HttpResponse) {
    const filters = listFilters(query);
    await this.page(req, res, async (ctx) => {
      const page = await this.reader.list(filters, this.options.pageSize);
      return listPage(page, filters, { types: this.catalog.types(), signalNames: this.catalog.allSignalNames() }, ctx);
    });
  }

  @Get('flow-keys')
  async flowKeys(@Req() req: HttpRequest, @Res() res: HttpResponse) {
    await this.page(req, res, async (ctx) => flowKeysPage(await this.reader.waitingKeys(), ctx));
  }

  @Get('workflows/:id')
  async workflow(@Param('id') id: string, @Query() query: Record<string, unknown>, @Req() req: HttpRequest, @Res() res: HttpResponse) {
    const done = query.done;
    const notice = typeof done === 'string' && done in DONE_MESSAGES ? DONE_MESSAGES[done as keyof typeof DONE_MESSAGES] : undefined;
    await this.page(req, res, async (ctx) => this.renderWorkflow(id, req, res, { ...ctx, message: notice ? { kind: 'notice', text: notice } : undefined }, detailCursors(query)));
  }

  /** The form posts of the workflow page: 303 back to the page, or the page with the error message. */
  @Post('workflows/:id/:action')
  async act(@Param('id') id: string, @Param('action') action: string, @Body() body: Record<string, unknown>, @Req() req: HttpRequest, @Res() res: HttpResponse) {
    const ctx = this.context(req);
    try {
      await this.perform(id, action, body ?? {});
      res.redirect(303, `${ctx.base}/workflows/${encodeURIComponent(id)}?done=${action}`);
    } catch (error) {
      const status = statusOf(error);
      if (status === null) throw error;
      const message = { kind: 'error' as const, text: (error as Error).message };
      const page = status === 404 ? errorPage(404, message.text, ctx) : await this.renderWorkflow(id, req, res, { ...ctx, message });
      res.status(status).setHeader('Content-Type', 'text/html; charset=utf-8');
      res.send(page);
    }
  }

  @Get('assets/dashboard.css')
  css(@Res() res: HttpResponse) {
    this.asset(res, 'text/css', DASHBOARD_CSS);
  }

  @Get('assets/dashboard.js')
  js(@Res() res: HttpResponse) {
    this.asset(res, 'text/javascript', DASHBOARD_JS);
  }

  // ------------------------------------------------------------------ JSON API (the same data as the pages)

  @Get('api/csrf')
  csrf(@Req() req: HttpRequest, @Res() res: HttpResponse) {
    res.json({ token: ensureCsrfToken(req, res, this.context(req).base, this.options.csrfSecret), header: 'x-csrf-token' });
  }

  @Get('api/overview')
  async apiOverview(@Res() res: HttpResponse) {
    await this.api(res, () => this.reader.overview());
  }

  @Get('api/flow-keys')
  async apiFlowKeys(@Res() res: HttpResponse) {
    await this.api(res, () => this.reader.waitingKeys());
  }

  @Get('api/workflows')
  async apiList(@Query() query: Record<string, unknown>, @Res() res: HttpResponse) {
    await this.api(res, () => this.reader.list(listFilters(query), this.options.pageSize));
  }

  @Get('api/workflows/:id')
  async apiWorkflow(@Param('id') id: string, @Query() query: Record<string, unknown>, @Res() res: HttpResponse) {
    await this.api(res, () => this.reader.detail(id, this.options.pageSize, detailCursors(query)));
  }

  /** A signal with its whole payload: where the workflow page's "full payload" links lead. */
  @Get('api/workflows/:id/signals/:signalId')
  async apiSignal(@Param('id') id: string, @Param('signalId') signalId: string, @Res() res: HttpResponse) {
    await this.api(res, async () => ({ signal: await this.reader.signal(id, signalId) }));
  }

  /** An execution with its whole cursor: where the workflow page's "full cursor" links lead. */
  @Get('api/workflows/:id/executions/:executionId')
  async apiExecution(@Param('id') id: string, @Param('executionId') executionId: string, @Res() res: HttpResponse) {
    await this.api(res, async () => ({ execution: await this.reader.execution(id, executionId) }));
  }

  @Post('api/workflows/:id/:action')
  async apiAct(@Param('id') id: string, @Param('action') action: string, @Body() body: Record<string, unknown>, @Res() res: HttpResponse) {
    await this.api(res, () => this.perform(id, action, body ?? {}));
  }

  // ------------------------------------------------------------------ shared

  private async perform(id: string, action: string, body: Record<string, unknown>) {
    if (action === 'signal') {
      const request: SignalRequest = {
        name: textField(body, 'name') ?? '',
        payload: typeof body.payload === 'string' ? body.payload : body.payload === undefined ? undefined : JSON.stringify(body.payload),
        idempotencyKey: textField(body, 'idempotencyKey'),
      };
      return { signal: await this.actions.signal(id, request) };
    }
    if (action === 'resume-at') return { workflow: await this.actions.resumeAt(id, textField(body, 'step') ?? '') };
    if (!this.actions.isAction(action)) throw new HttpException(`Unknown action ${JSON.stringify(action)}`, 404);
    return { workflow: await this.actions.run(id, action) };
  }

  private async renderWorkflow(id: string, req: HttpRequest, res: HttpResponse, ctx: PageContext, cursors: DetailCursors = {}): Promise<string> {
    const csrfToken = ensureCsrfToken(req, res, ctx.base, this.options.csrfSecret);
    return workflowPage(await this.reader.detail(id, this.options.pageSize, cursors), ctx, { csrfToken, readOnly: this.options.readOnly }, cursors);
  }

  private async page(req: HttpRequest, res: HttpResponse, render: (ctx: PageContext) => Promise<string>) {
    const ctx = this.context(req);
    let status = 200;
    let body: string;
    try {
      body = await render(ctx);
    } catch (error) {
      const known = statusOf(error);
      if (known === null) throw error;
      status = known;
      body = errorPage(known, (error as Error).message, ctx);
    }
    res.status(status).setHeader('Content-Type', 'text/html; charset=utf-8');
    res.setHeader('Cache-Control', 'no-store');
    res.send(body);
  }

  private async api(res: HttpResponse, run: () => Promise<unknown>) {
    try {
      res.setHeader('Cache-Control', 'no-store');
      res.json(await run());
    } catch (error) {
      const status = statusOf(error);
      if (status === null) throw error;
      res.status(status).json({ statusCode: status, error: (error as Error).name, message: (error as Error).message });
    }
  }

  private asset(res: HttpResponse, type: string, body: string) {
    res.setHeader('Content-Type', `${type}; charset=utf-8`);
    res.setHeader('Cache-Control', 'public, max-age=3600');
    res.send(body);
  }

  /**
   * The dashboard's base URL as the browser sees it (the mount path, after any global prefix), without
   * a trailing slash: links are `${base}/workflows`, so at the root the base is '' and never '/'
   * (`//workflows` would be another host).
   */
  private context(req: HttpRequest): PageContext {
    if (this.options.path === '/') return { base: '' };
    const pathname = (req.originalUrl ?? req.url).split('?')[0];
    const at = pathname.indexOf(this.options.path);
    return { base: at < 0 ? this.options.path : pathname.slice(0, at + this.options.path.length) };
  }
}

function detailCursors(query: Record<string, unknown>): DetailCursors {
  const cursors: DetailCursors = {};
  for (const key of DETAIL_CURSOR_KEYS) if (typeof query[key] === 'string' && query[key] !== '') cursors[key] = query[key];
  return cursors;
}

function listFilters(query: Record<string, unknown>): ListFilters {
  const filters: ListFilters = {};
  for (const key of LIST_FILTER_KEYS) {
    const value = query[key];
    if (typeof value === 'string' && value.trim() !== '') filters[key] = value.trim();
  }
  return filters;
}

/**
 * A text field of an action's body: a string, or undefined when absent (or JSON null). Any other
 * value is refused rather than dropped: a numeric idempotency key ignored would deliver its event
 * again at every retry.
 */
function textField(body: Record<string, unknown>, field: string): string | undefined {
  const value = body[field];
  if (value === undefined || value === null || typeof value === 'string') return value ?? undefined;
  throw new DashboardInputError(field, JSON.stringify(value) ?? String(value), 'a string');
}
