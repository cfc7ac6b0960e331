/**
 * The optional LangGraph JS row (`npm run bench:loop -- --langgraph`): the same task loop as a
 * LangGraph graph (model node → tools node → model …) checkpointed by PostgresSaver into the same
 * PostgreSQL, against the same fake provider (through LangChain's Anthropic adapter), with the same
 * system prompt, task prompt and file writes. LangGraph is not a dependency of durable-agents: the
 * packages are installed with npm into a folder under the system temp dir (reused while the pinned
 * versions stay the same) and loaded from there.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import type { ChatRouter } from '../../activities/llm/types';
import { assembleContext, loadPromptInputs } from '../../activities/step/prompt';
import { findAgent } from '../../activities/store/agents';
import { findTask } from '../../activities/store/tasks';
import { toolDefinitions, toolsForScenario } from '../../activities/tools/registry';
import { taskPromptText } from '../../prompts/task';

/** Pinned so that runs compare like with like; the newest releases when this row was added. */
export const LANGGRAPH_PACKAGES = [
  '@langchain/langgraph@1.7.3',
  '@langchain/langgraph-checkpoint-postgres@1.0.5',
  '@langchain/anthropic@1.5.11',
  '@langchain/core@1.4.0',
];
/** Checkpoint tables go to their own schema, apart from the product's tables. */
const CHECKPOINT_SCHEMA = 'bench_langgraph';
/** Output tokens asked for, as the in-process loop does (the fake ignores it). */
const LANGGRAPH_MAX_TOKENS = 4_096;
/** LangGraph stops a graph after this many steps; a task of n calls takes about 2n. */
const RECURSION_LIMIT = 1_000;

/** The few LangGraph and LangChain shapes the row uses (the packages' own types are not installed with the product). */
interface ToolCall {
  id?: string;
  name: string;
  args: Record<string, unknown>;
}
interface AiMessage {
  tool_calls?: ToolCall[];
}
type Message = unknown;
interface Runnable {
  invoke(input: unknown, options?: Record<string, unknown>): Promise<unknown>;
}
interface GraphBuilder {
  addNode(
    name: string,
    fn: (
      state: { messages: Message[] },
      config?: { configurable?: { thread_id?: string } },
    ) => Promise<{ messages: Message[] }>,
  ): GraphBuilder;
  addEdge(from: string, to: string): GraphBuilder;
  addConditionalEdges(from: string, fn: (state: { messages: Message[] }) => string): GraphBuilder;
  compile(options: { checkpointer: unknown }): Runnable;
}
interface Modules {
  StateGraph: new (annotation: unknown) => GraphBuilder;
  MessagesAnnotation: unknown;
  START: string;
  END: string;
  PostgresSaver: {
    fromConnString(url: string, options: { schema: string }): { setup(): Promise<void>; end(): Promise<void> };
  };
  ChatAnthropic: new (options: Record<string, unknown>) => { bindTools(tools: unknown[]): Runnable };
  SystemMessage: new (text: string) => Message;
  HumanMessage: new (text: string) => Message;
  ToolMessage: new (fields: { content: string; tool_call_id: string }) => Message;
}

/** Installs the pinned packages under the temp dir (once) and loads them. */
export function loadLangGraph(log: (text: string) => void): Modules {
  const dir = path.join(
    os.tmpdir(),
    `da-bench-langgraph-${LANGGRAPH_PACKAGES.join('_').replace(/[^a-z0-9.]+/gi, '-')}`,
  );
  if (!existsSync(path.join(dir, 'node_modules', '@langchain', 'langgraph-checkpoint-postgres'))) {
    log(`installing ${LANGGRAPH_PACKAGES.join(' ')} into ${dir}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ private: true, name: 'bench-langgraph' }));
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', ...LANGGRAPH_PACKAGES], {
      cwd: dir,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  }
  const load = createRequire(path.join(dir, 'package.json'));
  const langgraph = load('@langchain/langgraph') as Pick<
    Modules,
    'StateGraph' | 'MessagesAnnotation' | 'START' | 'END'
  >;
  const messages = load('@langchain/core/messages') as Pick<Modules, 'SystemMessage' | 'HumanMessage' | 'ToolMessage'>;
  return {
    StateGraph: langgraph.StateGraph,
    MessagesAnnotation: langgraph.MessagesAnnotation,
    START: langgraph.START,
    END: langgraph.END,
    PostgresSaver: (load('@langchain/langgraph-checkpoint-postgres') as Pick<Modules, 'PostgresSaver'>).PostgresSaver,
    ChatAnthropic: (load('@langchain/anthropic') as Pick<Modules, 'ChatAnthropic'>).ChatAnthropic,
    SystemMessage: messages.SystemMessage,
    HumanMessage: messages.HumanMessage,
    ToolMessage: messages.ToolMessage,
  };
}

/** One LangGraph runner for a bench run: the compiled graph and its checkpointer (close with `end`). */
export async function createLangGraphRunner(
  modules: Modules,
  databaseUrl: string,
  fakeUrl: string,
  db: Kysely<Database>,
  router: ChatRouter,
) {
  const {
    StateGraph,
    MessagesAnnotation,
    START,
    END,
    PostgresSaver,
    ChatAnthropic,
    SystemMessage,
    HumanMessage,
    ToolMessage,
  } = modules;
  const checkpointer = PostgresSaver.fromConnString(databaseUrl, { schema: CHECKPOINT_SCHEMA });
  await checkpointer.setup();
  // The same tools as the product offers the model (names, descriptions, JSON Schemas).
  const defs = toolDefinitions(toolsForScenario('task'));
  const model = new ChatAnthropic({
    model: router.candidates({})[0]?.model ?? 'claude-sonnet-4-5',
    apiKey: 'bench',
    anthropicApiUrl: fakeUrl,
    streaming: true,
    maxRetries: 0,
    maxTokens: LANGGRAPH_MAX_TOKENS,
  }).bindTools(defs.map((d) => ({ name: d.name, description: d.description, input_schema: d.inputSchema })));
  const workspaces = new Map<string, string>();
  const graph = new StateGraph(MessagesAnnotation)
    .addNode('agent', async (state) => ({ messages: [await model.invoke(state.messages)] }))
    .addNode('tools', async (state, config) => {
      const last = state.messages.at(-1) as AiMessage;
      const workspace = workspaces.get(config?.configurable?.thread_id ?? '') ?? os.tmpdir();
      const out: Message[] = [];
      for (const call of last.tool_calls ?? []) {
        const input = call.args as { path?: string; content?: string };
        let content = 'ok';
        if (call.name === 'file_write' && input.path) {
          const target = path.join(workspace, input.path);
          await mkdir(path.dirname(target), { recursive: true });
          await writeFile(target, input.content ?? '', 'utf8');
          content = `wrote ${input.content?.length ?? 0} characters to ${input.path}`;
        }
        out.push(new ToolMessage({ content, tool_call_id: call.id ?? '' }));
      }
      return { messages: out };
    })
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', (state) => ((state.messages.at(-1) as AiMessage).tool_calls?.length ? 'tools' : END))
    // The tools node's input was the model's last message: the task ends once it submitted.
    .addConditionalEdges('tools', (state) => {
      const reply = state.messages.findLast((m) => (m as AiMessage).tool_calls !== undefined) as AiMessage | undefined;
      return reply?.tool_calls?.some((c) => c.name === 'task_submit_review') ? END : 'agent';
    })
    .compile({ checkpointer });

  return {
    /** Runs one task to its submission, one checkpoint per graph step. */
    async run(taskId: string): Promise<void> {
      const task = (await findTask(db, taskId))!;
      const agent = (await findAgent(db, task.agent_id))!;
      workspaces.set(taskId, agent.workspace_dir);
      const inputs = await loadPromptInputs(
        db,
        agent,
        'task',
        task,
        defs,
        new Date(),
        router.candidates({})[0]?.model ?? 'unknown',
      );
      const prompt = taskPromptText({ id: task.id, title: task.title, description: task.description });
      const { system } = await assembleContext(
        router,
        inputs,
        [{ role: 'user', content: [{ type: 'text', text: prompt }] }],
        defs,
      );
      await graph.invoke(
        { messages: [new SystemMessage(system.map((s) => s.text).join('\n\n')), new HumanMessage(prompt)] },
        { configurable: { thread_id: taskId }, recursionLimit: RECURSION_LIMIT },
      );
    },
    end: () => checkpointer.end(),
  };
}
