import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { sql } from 'kysely';
import { z } from 'zod';
import { freeLoopbackPort } from '../../activities/store/db';
import { appendMessage, ensureSession, loadMessages } from '../../activities/store/sessions';
import { DEFAULT_ORG } from '../../activities/store/tenancy';
import { effectBegins, localCallKey, localCalls, startsItsOwnEffect } from '../../activities/tools/effect-starts';
import { executeToolCall, settleUnansweredCalls, type ExecuteToolResult } from '../../activities/tools/execute';
import { defineTool, type ToolSpec } from '../../activities/tools/types';
import { eventually } from '../support/eventually';
import { createHarness, type Harness } from '../support/harness';
import { startOwnPostgres, type OwnPostgres } from '../support/services';

/**
 * The tool ledger when PostgreSQL goes away at the worst moments of one call, in this process (no
 * worker stops): before a tool's effect begins, right after it, and while two executions of the
 * same call race. Each effect is a line appended to a file, counted: exactly one line per call, and
 * what the model reads is what happened (the tool's own output, never "interrupted").
 */
describe('the tool ledger through a PostgreSQL outage', () => {
  let postgres: OwnPostgres;
  let h: Harness;
  let agentId: string;
  const effects = () => path.join(h.workspaceDir, 'effects.log');
  const lines = (): string[] =>
    existsSync(effects()) ? readFileSync(effects(), 'utf8').split('\n').filter(Boolean) : [];

  beforeAll(async () => {
    postgres = startOwnPostgres(await freeLoopbackPort());
    h = await createHarness({ databaseUrl: postgres.url });
    agentId = await h.createAgent();
  });
  afterAll(async () => {
    await h.close();
    postgres.close();
  });

  /** PostgreSQL back, and a statement through the harness's pool that works again. */
  async function restart(): Promise<void> {
    postgres.start();
    await eventually(
      () =>
        sql`select 1`.execute(h.db.db).then(
          () => true,
          () => false,
        ),
      'PostgreSQL to answer again',
      10_000,
      50,
    );
  }

  let session = 0;
  /** A session whose reply holds one call of `tool`; returns how to execute it (as the step's retry would). */
  async function oneCall(tool: ToolSpec, input: Record<string, unknown>) {
    const sessionId = `outage-${++session}-${agentId}`;
    const toolCallId = `call-${session}`;
    await ensureSession(h.db.db, { id: sessionId, agentId, kind: 'task' });
    const call = { type: 'tool_use' as const, id: toolCallId, name: tool.name, input };
    await appendMessage(h.db.db, sessionId, 'assistant-a1-t0', { role: 'assistant', content: [call] });
    const ctx = {
      db: h.db.db,
      agentId,
      org: DEFAULT_ORG,
      sessionId,
      workspaceDir: h.workspaceDir,
      signal: new AbortController().signal,
      agentConfig: {},
      heartbeat: () => undefined,
    };
    const execute = (): Promise<ExecuteToolResult> =>
      executeToolCall({ agentId, sessionId, attempt: 1, turn: 0, toolCallId }, new Map([[tool.name, tool]]), ctx, call);
    const ledger = () => h.db.db.selectFrom('tool_calls').selectAll().where('session_id', '=', sessionId).execute();
    const modelRead = async () =>
      (await loadMessages(h.db.db, sessionId)).flatMap((m) =>
        m.content.flatMap((b) => (b.type === 'tool_result' ? [b.content as string] : [])),
      );
    return { execute, ledger, modelRead, ctx, sessionId };
  }

  const schema = z.object({ line: z.string() }).strict();

  /** A side-effecting tool whose effect lands, after which the database goes away (`outage.left` times) before its result is stored. */
  const appendsThenLosesDatabase = (name: string, outage: { left: number }) =>
    defineTool({
      name,
      description: 'test',
      schema,
      sideEffecting: true,
      run: async ({ line }) => {
        appendFileSync(effects(), `${line}\n`);
        if (outage.left-- > 0) postgres.stopImmediately();
        return { content: `appended ${line}` };
      },
    });

  test('an outage before a tool reaches its effect leaves no started row: the retry runs the call, once', async () => {
    let outages = 1;
    // Like shell_execute: reads the database (judging the call again) before its effect begins.
    const readsThenAppends = startsItsOwnEffect(
      defineTool({
        name: 'reads_then_appends',
        description: 'test',
        schema,
        sideEffecting: true,
        run: async ({ line }, ctx) => {
          if (outages-- > 0) postgres.stopImmediately();
          await ctx.db.selectFrom('agents').select('id').where('id', '=', ctx.agentId).execute();
          await effectBegins(ctx);
          appendFileSync(effects(), `${line}\n`);
          return { content: `appended ${line}` };
        },
      }),
    );
    const before = lines().length;
    const call = await oneCall(readsThenAppends, { line: 'first' });
    await expect(call.execute()).rejects.toThrow();
    await restart();
    // Nothing ran, and the ledger says so: no row claims the call started.
    expect(lines().length).toBe(before);
    expect(await call.ledger()).toEqual([]);

    const retried = await call.execute();
    expect(retried).toMatchObject({ kind: 'done', isError: false, preview: 'appended first' });
    expect(lines().slice(before)).toEqual(['first']);
    expect(await call.ledger()).toMatchObject([{ status: 'completed', executions: 1, result: 'appended first' }]);
    expect(await call.modelRead()).toEqual(['appended first']);
  });

  test('an outage right after the effect: the retry in this process stores the real result, not "interrupted"', async () => {
    const outage = { left: 1 };
    const appends = appendsThenLosesDatabase('appends', outage);
    const before = lines().length;
    const call = await oneCall(appends, { line: 'second' });
    await expect(call.execute()).rejects.toThrow();
    await restart();
    expect(await call.ledger()).toMatchObject([{ status: 'started', executions: 1 }]);

    const retried = await call.execute();
    expect(retried).toMatchObject({ kind: 'done', isError: false, preview: 'appended second' });
    expect(retried).not.toHaveProperty('interrupted');
    expect(lines().slice(before)).toEqual(['second']);
    expect(await call.ledger()).toMatchObject([{ status: 'completed', executions: 1, result: 'appended second' }]);
    expect(await call.modelRead()).toEqual(['appended second']);

    // The same when the round's next attempt settles the call instead of the step's retry.
    outage.left = 1;
    const settled = await oneCall(appends, { line: 'third' });
    await expect(settled.execute()).rejects.toThrow();
    await restart();
    const messages = await loadMessages(h.db.db, settled.sessionId);
    expect(await settleUnansweredCalls(messages, new Map([[appends.name, appends]]), settled.ctx)).toBe(1);
    expect(lines().slice(before)).toEqual(['second', 'third']);
    expect(await settled.modelRead()).toEqual(['appended third']);
  });

  test('an outage right after the effect, retried in another process: the model reads an unknown outcome, not a stopped worker', async () => {
    const appends = appendsThenLosesDatabase('appends_elsewhere', { left: 1 });
    const before = lines().length;
    const call = await oneCall(appends, { line: 'fourth' });
    await expect(call.execute()).rejects.toThrow();
    await restart();
    // Another worker picks the step up: it has no memory of this process's run.
    localCalls.forget(localCallKey(call.sessionId, `call-${session}`));

    const retried = await call.execute();
    expect(retried).toMatchObject({ kind: 'done', isError: true });
    expect(lines().slice(before)).toEqual(['fourth']);
    const [text] = await call.modelRead();
    expect(text).toMatch(/interrupted: it began, but its result was never stored/);
    expect(text).toMatch(/stopped, or lost its database/);
    expect(text).toMatch(/NOT run again/);
  });

  test('two executions of one call racing to its effect: one runs it, the other does not', async () => {
    let releaseFirst!: () => void;
    const firstWaits = new Promise<void>((r) => (releaseFirst = r));
    let runs = 0;
    let firstReachedRun!: () => void;
    const firstAtRun = new Promise<void>((r) => (firstReachedRun = r));
    const racing = startsItsOwnEffect(
      defineTool({
        name: 'racing_append',
        description: 'test',
        schema,
        sideEffecting: true,
        run: async ({ line }, ctx) => {
          // The first execution is held before its effect (a stalled zombie); the second runs through.
          if (++runs === 1) {
            firstReachedRun();
            await firstWaits;
          }
          await effectBegins(ctx);
          appendFileSync(effects(), `${line}\n`);
          return { content: `appended ${line}` };
        },
      }),
    );
    const before = lines().length;
    const call = await oneCall(racing, { line: 'raced' });
    const first = call.execute();
    await firstAtRun;
    const second = await call.execute();
    expect(second).toMatchObject({ kind: 'done', preview: 'appended raced' });
    releaseFirst();
    await expect(first).rejects.toThrow(/begun by another execution/);
    expect(lines().slice(before)).toEqual(['raced']);
    expect(await call.ledger()).toMatchObject([{ status: 'completed', executions: 1, result: 'appended raced' }]);
  });
});
