/**
 * The baseline: a plain in-process tool loop with no durability engine. Same fake provider through the
 * same adapter (real Anthropic SDK), the same real system prompt (built once per task from the same
 * agent), the same file writes, and the conversation persisted to the same PostgreSQL tables (one
 * insert per message), so the gap to the durable loop is what durability costs.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Kysely } from 'kysely';
import type { Database } from '../../schema/database';
import type { ChatRouter } from '../../activities/llm/types';
import type { ChatMessage, ContentBlock, ToolUseBlock } from '../../activities/llm/types';
import { assembleContext, loadPromptInputs } from '../../activities/step/prompt';
import { findAgent } from '../../activities/store/agents';
import { appendMessage, ensureSession } from '../../activities/store/sessions';
import { findTask } from '../../activities/store/tasks';
import { toolDefinitions, toolsForScenario } from '../../activities/tools/registry';
import { taskPromptText } from '../../prompts/task';

/** Output tokens the in-process loop asks for (the fake ignores it). */
const IN_PROCESS_MAX_TOKENS = 4_096;

export async function runInProcessTask(db: Kysely<Database>, router: ChatRouter, taskId: string): Promise<number> {
  const task = (await findTask(db, taskId))!;
  const agent = (await findAgent(db, task.agent_id))!;
  const sessionId = `inproc_${taskId}`;
  await ensureSession(db, { id: sessionId, agentId: agent.id, taskId, kind: 'task' });
  const tools = toolDefinitions(toolsForScenario('task'));
  const model = router.candidates({})[0]?.model ?? 'unknown';
  const first: ChatMessage = {
    role: 'user',
    content: [
      { type: 'text', text: taskPromptText({ id: task.id, title: task.title, description: task.description }) },
    ],
  };
  const inputs = await loadPromptInputs(db, agent, 'task', task, tools, new Date(), model);
  const { system } = await assembleContext(router, inputs, [first], tools);
  const messages: ChatMessage[] = [first];
  await appendMessage(db, sessionId, 'task-prompt', first);
  let calls = 0;
  for (let turn = 0; ; turn += 1) {
    const result = await router.chat(
      { system, messages, tools, maxTokens: IN_PROCESS_MAX_TOKENS, messageCacheBreakpoint: messages.length - 2 },
      {},
    );
    calls += 1;
    const assistant: ChatMessage = { role: 'assistant', content: result.content };
    messages.push(assistant);
    await appendMessage(db, sessionId, `assistant-${turn}`, assistant);
    const uses = result.content.filter((b): b is ToolUseBlock => b.type === 'tool_use');
    if (uses.length === 0) return calls;
    const results: ContentBlock[] = [];
    let submitted = false;
    for (const use of uses) {
      const input = use.input as { path?: string; content?: string };
      if (use.name === 'file_write' && input.path) {
        const target = path.join(agent.workspace_dir, input.path);
        await mkdir(path.dirname(target), { recursive: true });
        await writeFile(target, input.content ?? '', 'utf8');
        results.push({
          type: 'tool_result',
          toolUseId: use.id,
          content: `wrote ${input.content?.length ?? 0} characters to ${input.path}`,
        });
      } else {
        submitted ||= use.name === 'task_submit_review';
        results.push({ type: 'tool_result', toolUseId: use.id, content: 'ok' });
      }
    }
    const user: ChatMessage = { role: 'user', content: results };
    messages.push(user);
    await appendMessage(db, sessionId, `result-${turn}`, user);
    if (submitted) return calls;
  }
}
