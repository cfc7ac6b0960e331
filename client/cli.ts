import path from 'node:path';
import { Command } from 'commander';
import { connectFromEnv } from './connect';
import { describeStatus, printProgress, uiLinks } from './progress';
import { addChatCommands } from './chat-command';
import { addScheduleCommands } from './schedule-commands';
import { AgentSchedules } from './schedules';
import { TaskAdmin } from './task-admin';
import { addTaskAdminCommands } from './task-admin-commands';
import { RecurringTasks } from './recurring-tasks';
import { addRecurringTaskCommands } from './recurring-task-commands';
import { addTokenCommands } from './token-commands';
import { addDbCommands } from './db-commands';
import { addBudgetCommands } from './budget-commands';
import { addApprovalCommands } from './approval-commands';
import { addForkCommands } from './fork-commands';
import { ForkClient } from './forks';
import { describeFailure } from './failure-text';

/**
 * The `agents` CLI (`npm run agents -- <command>`): define agents, start and follow tasks, decide
 * approvals and reviews, manage schedules. Configured by the same environment as the worker.
 */
const program = new Command('agents')
  .description('durable-agents: run AI agents durably on Temporal')
  .showHelpAfterError();

let session: Awaited<ReturnType<typeof connectFromEnv>> | undefined;
async function open() {
  session ??= await connectFromEnv();
  return session;
}

const agent = program.command('agent').description('agents and their identity files');
agent
  .command('upsert <folder>')
  .description(
    'create or update an agent from a folder with SOUL.md, AGENTS.md, HEARTBEAT.md, TOOLS.md (and optional agent.json)',
  )
  .option('--id <id>', 'agent id (default: the folder name)')
  .option(
    '--workspace <dir>',
    "the agent's workspace folder, under its organisation's root or an allowed root (default: $AGENTS_WORKSPACE_ROOT/<org>/<id>, " +
      'the root defaulting to $DATA_DIR/workspaces; see docs/configuration.md)',
  )
  .option('--force', 'overwrite identity files the agent edited itself (edit_agent_file)')
  .action(async (folder: string, opts: { id?: string; workspace?: string; force?: boolean }) => {
    const { client } = await open();
    const id = opts.id ?? path.basename(path.resolve(folder)).toLowerCase();
    const result = await client.upsertAgentFromFolder(folder, { id, workspaceDir: opts.workspace, force: opts.force });
    console.log(
      `agent ${result.id} (content hash ${result.contentHash.slice(0, 12)}), workspace ${result.workspaceDir}`,
    );
  });

const org = program.command('org').description('organisations: CONTEXT.md, announcements, users/*.md, shared skills');
org
  .command('upsert <folder>')
  .description(
    'create or update an organisation from a folder (CONTEXT.md, ANNOUNCEMENTS.md, users/*.md, skills/<name>/SKILL.md)',
  )
  .option('--name <name>', 'organisation name (default: the folder name)')
  .action(async (folder: string, opts: { name?: string }) => {
    const result = await (
      await open()
    ).client.upsertOrganisationFromFolder(folder, opts.name ? { name: opts.name } : {});
    console.log(`organisation ${result.name}: ${result.users} user profile(s), ${result.skills} skill(s)`);
  });
org
  .command('announce <text>')
  .description('post a system announcement to the agents of an organisation (or all agents)')
  .option('--org <name>', 'only this organisation')
  .option('--hours <n>', 'expires after this many hours')
  .action(async (text: string, opts: { org?: string; hours?: string }) => {
    const expiresAt = opts.hours ? new Date(Date.now() + Number(opts.hours) * 3_600_000) : undefined;
    const { id } = await (
      await open()
    ).client.announce(text, { ...(opts.org ? { org: opts.org } : {}), ...(expiresAt ? { expiresAt } : {}) });
    console.log(`announcement ${id} posted`);
  });
program
  .command('skills <folder>')
  .description('create or update shared skills from a folder of <name>/SKILL.md')
  .action(async (folder: string) =>
    console.log(`skills: ${(await (await open()).client.upsertSkillsFromFolder(folder)).skills.join(', ')}`),
  );

const task = program.command('task').description('start, follow and steer tasks');
task
  .command('start')
  .requiredOption('--agent <id>', 'agent id')
  .requiredOption('--title <title>', 'task title')
  .option('--description <text>', 'what to do', '')
  .option('--follow', 'print progress until the task reaches review or ends')
  .option(
    '--budget <usd>',
    "the task's cost budget in USD (its LLM calls and its sub-agents'); reaching it waits for a decision",
    Number,
  )
  .action(async (opts: { agent: string; title: string; description: string; follow?: boolean; budget?: number }) => {
    const { client } = await open();
    const { taskId, workflowId } = await client.startTask({
      agentId: opts.agent,
      title: opts.title,
      description: opts.description || opts.title,
      ...(opts.budget !== undefined ? { costBudgetUsd: opts.budget } : {}),
    });
    const links = uiLinks(taskId, opts.agent);
    console.log(`task ${taskId} started as workflow ${workflowId}\n  Temporal UI: ${links.task}`);
    if (opts.follow) await printProgress(client, taskId);
  });
task
  .command('status <taskId>')
  .action(async (taskId: string) => console.log(describeStatus(await (await open()).client.getStatus(taskId))));
task
  .command('follow <taskId>')
  .action(async (taskId: string) => void (await printProgress((await open()).client, taskId)));
task.command('cancel <taskId>').action(async (taskId: string) => {
  await (await open()).client.cancel(taskId);
  console.log(`cancellation requested for task ${taskId}`);
});
for (const decision of ['approve', 'reject'] as const) {
  task
    .command(`${decision} <taskId> <requestId>`)
    .description(`${decision} a pending tool call (validated: unknown or decided ids are refused)`)
    .option('--comment <text>')
    .option('--by <name>', 'who decides', process.env.USER)
    .action(async (taskId: string, requestId: string, opts: { comment?: string; by?: string }) => {
      const recorded = await (
        await open()
      ).client.decideApproval(taskId, {
        requestId,
        decision: decision === 'approve' ? 'approved' : 'rejected',
        comment: opts.comment,
        decidedBy: opts.by,
      });
      console.log(
        `${recorded.decision}: ${recorded.tool} [${recorded.requestId}] at ${recorded.decidedAt}${recorded.waitingFor ? ` · ${recorded.waitingFor}` : ''}`,
      );
    });
}
task
  .command('accept <taskId>')
  .option('--by <name>', 'reviewer', process.env.USER)
  .action(async (taskId: string, opts: { by?: string }) => {
    await (await open()).client.review(taskId, { decision: 'accept', decidedBy: opts.by });
    console.log(`accepted task ${taskId}`);
  });
task
  .command('revise <taskId>')
  .requiredOption('--feedback <text>', 'what to change')
  .option('--by <name>', 'reviewer', process.env.USER)
  .action(async (taskId: string, opts: { feedback: string; by?: string }) => {
    await (await open()).client.review(taskId, { decision: 'revise', feedback: opts.feedback, decidedBy: opts.by });
    console.log(`revision requested for task ${taskId}`);
  });
addBudgetCommands(task, open);
task
  .command('comment <taskId> <text>')
  .description('comment on a task: its agent answers in the thread, and agents it @mentions are asked too')
  .action(async (taskId: string, text: string) => {
    const { itemId, mentioned } = await (await open()).client.comment(taskId, text, process.env.USER || 'user');
    console.log(`comment ${itemId} sent${mentioned.length ? `; mentioned: ${mentioned.join(', ')}` : ''}`);
  });

addForkCommands(
  program,
  async () =>
    new ForkClient((await open()).temporal, (await open()).database.db, { taskQueue: (await open()).client.taskQueue }),
);
addTaskAdminCommands(
  program,
  async () =>
    new TaskAdmin((await open()).temporal, (await open()).database.db, { taskQueue: (await open()).client.taskQueue }),
);
addChatCommands(program, open);
addApprovalCommands(program, open);
addTokenCommands(program);
addDbCommands(program);
addRecurringTaskCommands(
  program,
  async () =>
    new RecurringTasks((await open()).temporal, (await open()).database.db, {
      taskQueue: (await open()).client.taskQueue,
    }),
);
addScheduleCommands(
  program,
  async () => new AgentSchedules((await open()).temporal, { taskQueue: (await open()).client.taskQueue }),
);

program
  .parseAsync(process.argv)
  .then(async () => session?.close())
  .catch(async (error: unknown) => {
    console.error(describeFailure(error));
    await session?.close().catch(() => undefined);
    process.exit(1);
  });
