/**
 * The CLI's task-graph, task-lifecycle and notification commands, over `TaskAdmin`. Each handler is a
 * plain function of parsed arguments returning the lines to print (testable without a terminal);
 * `addTaskAdminCommands` mounts them:
 *
 *   agents task create --agent <id> --title <t> [--description <d>] [--priority <p>] [--parent <taskId>] [--depends-on <id,id>]
 *   agents task approve-pending|reject-pending <taskId> [--comment <text>] [--by <name>]
 *   agents task retry|rerun|archive <taskId> [--by <name>]
 *   agents task cancel-tree <taskId>        (cancel; subtasks and waiting tasks follow)
 *   agents task list [--agent <id>] [--state <s,s>] [--parent <taskId>]
 *   agents task tree <taskId>
 *   agents notifications list [--agent <id>] [--unread]
 *   agents notifications read <id...> [--by <name>]
 */
import type { Command } from 'commander';
import type { TaskRow } from '../schema/database';
import { TASK_PRIORITIES, type TaskPriority } from '../workflows/rules/priority';
import type { TaskAdmin, TaskTree } from './task-admin';

export type TaskAdminCommand =
  | {
      action: 'create';
      agentId: string;
      title: string;
      description?: string;
      priority?: string;
      parent?: string;
      dependsOn?: string;
    }
  | { action: 'approve-pending' | 'reject-pending'; taskId: string; comment?: string; by?: string }
  | { action: 'retry' | 'rerun' | 'archive'; taskId: string; by?: string }
  | { action: 'cancel-tree'; taskId: string }
  | { action: 'list'; agentId?: string; states?: string; parent?: string }
  | { action: 'tree'; taskId: string }
  | { action: 'notifications'; agentId?: string; unread?: boolean }
  | { action: 'read'; ids: string[]; by?: string };

const csv = (value: string | undefined): string[] =>
  (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

function taskLine(t: TaskRow, indent = ''): string {
  return `${indent}${t.id}  [${t.priority}] ${t.state.padEnd(11)} ${t.agent_id}  ${t.title}`;
}

function treeLines(tree: TaskTree, indent = ''): string[] {
  const deps = tree.dependsOn.length ? `  (after ${tree.dependsOn.map((d) => `${d.id} ${d.state}`).join(', ')})` : '';
  return [`${taskLine(tree.task, indent)}${deps}`, ...tree.subtasks.flatMap((s) => treeLines(s, `${indent}  `))];
}

/** Runs one command; returns the lines to print. Bad input throws with a message that says what to fix. */
export async function runTaskAdminCommand(admin: TaskAdmin, cmd: TaskAdminCommand): Promise<string[]> {
  switch (cmd.action) {
    case 'create': {
      if (cmd.priority !== undefined && !(TASK_PRIORITIES as readonly string[]).includes(cmd.priority)) {
        throw new Error(`--priority must be one of ${TASK_PRIORITIES.join(', ')}, got ${cmd.priority}`);
      }
      const { taskId, workflowId } = await admin.createTask({
        agentId: cmd.agentId,
        title: cmd.title,
        ...(cmd.description ? { description: cmd.description } : {}),
        ...(cmd.priority ? { priority: cmd.priority as TaskPriority } : {}),
        ...(cmd.parent ? { parentTaskId: cmd.parent } : {}),
        dependsOn: csv(cmd.dependsOn),
        createdBy: process.env.USER ?? 'human',
      });
      return [`task ${taskId} created as workflow ${workflowId}`];
    }
    case 'approve-pending':
      await admin.approve(cmd.taskId, { by: cmd.by, comment: cmd.comment });
      return [`approved task ${cmd.taskId}: it starts once its dependencies are complete`];
    case 'reject-pending':
      await admin.reject(cmd.taskId, { by: cmd.by, comment: cmd.comment });
      return [`rejected task ${cmd.taskId}`];
    case 'retry':
    case 'rerun': {
      const { workflowId, round } = await admin[cmd.action](cmd.taskId, { by: cmd.by });
      return [`task ${cmd.taskId}: ${cmd.action} started as round ${round} (workflow ${workflowId})`];
    }
    case 'archive':
      await admin.archive(cmd.taskId, { by: cmd.by });
      return [`archived task ${cmd.taskId}`];
    case 'cancel-tree':
      await admin.cancel(cmd.taskId);
      return [
        `cancellation requested for task ${cmd.taskId}; its unfinished subtasks and the tasks waiting on it follow`,
      ];
    case 'list': {
      const rows = await admin.list({ agentId: cmd.agentId, states: csv(cmd.states), parentTaskId: cmd.parent });
      return rows.length ? rows.map((t) => taskLine(t)) : ['no tasks'];
    }
    case 'tree':
      return treeLines(await admin.tree(cmd.taskId));
    case 'notifications': {
      const rows = await admin.notifications({ agentId: cmd.agentId, unreadOnly: cmd.unread });
      if (!rows.length) return ['no notifications'];
      return rows.map((n) => {
        const about = n.task_id ? ` (task ${n.task_id})` : '';
        const options = n.options?.length ? ` [${n.options.join(' / ')}]` : '';
        return `${n.read_at ? ' ' : '*'} ${n.id}  ${n.created_at.toISOString().slice(0, 16)}  ${n.priority.padEnd(6)} ${n.agent_id}${about}  ${n.kind === 'approval_request' ? 'QUESTION: ' : ''}${n.title}${options}`;
      });
    }
    case 'read': {
      const changed = await admin.markRead(cmd.ids, cmd.by);
      return [`${changed} notification${changed === 1 ? '' : 's'} marked read`];
    }
  }
}

/** Mounts the commands on the CLI's `task` command and a new `notifications` command. `open` connects lazily. */
export function addTaskAdminCommands(program: Command, open: () => Promise<TaskAdmin>): void {
  const run = async (cmd: TaskAdminCommand) => {
    for (const line of await runTaskAdminCommand(await open(), cmd)) console.log(line);
  };
  const task = program.commands.find((c) => c.name() === 'task') ?? program.command('task');
  task
    .command('create')
    .description('create a task, optionally as a subtask and after other tasks')
    .requiredOption('--agent <id>', 'assignee agent id')
    .requiredOption('--title <title>')
    .option('--description <text>')
    .option('--priority <priority>', TASK_PRIORITIES.join(', '))
    .option('--parent <taskId>', 'make it a subtask of this task')
    .option('--depends-on <ids>', 'comma-separated task ids that must complete first')
    .action(
      (o: {
        agent: string;
        title: string;
        description?: string;
        priority?: string;
        parent?: string;
        dependsOn?: string;
      }) =>
        run({
          action: 'create',
          agentId: o.agent,
          title: o.title,
          description: o.description,
          priority: o.priority,
          parent: o.parent,
          dependsOn: o.dependsOn,
        }),
    );
  for (const action of ['approve-pending', 'reject-pending'] as const) {
    task
      .command(`${action} <taskId>`)
      .description(
        `${action === 'approve-pending' ? 'approve' : 'reject'} a task an agent created that waits for approval`,
      )
      .option('--comment <text>')
      .option('--by <name>', 'who decides', process.env.USER)
      .action((taskId: string, o: { comment?: string; by?: string }) =>
        run({ action, taskId, comment: o.comment, by: o.by }),
      );
  }
  const descriptions = {
    retry: 'run a failed task again in a fresh round',
    rerun: 'run a completed or cancelled task again',
    archive: 'archive a finished task',
  };
  for (const action of ['retry', 'rerun', 'archive'] as const) {
    task
      .command(`${action} <taskId>`)
      .description(descriptions[action])
      .option('--by <name>', 'who asks', process.env.USER)
      .action((taskId: string, o: { by?: string }) => run({ action, taskId, by: o.by }));
  }
  task
    .command('cancel-tree <taskId>')
    .description('cancel a task; its unfinished subtasks and the tasks waiting on it are cancelled too')
    .action((taskId: string) => run({ action: 'cancel-tree', taskId }));
  task
    .command('list')
    .option('--agent <id>')
    .option('--state <states>', 'comma-separated states')
    .option('--parent <taskId>')
    .action((o: { agent?: string; state?: string; parent?: string }) =>
      run({ action: 'list', agentId: o.agent, states: o.state, parent: o.parent }),
    );
  task
    .command('tree <taskId>')
    .description('a task with its subtasks and dependencies')
    .action((taskId: string) => run({ action: 'tree', taskId }));

  const notifications = program
    .command('notifications')
    .description("the humans' inbox: what agents notified or asked");
  notifications
    .command('list')
    .option('--agent <id>')
    .option('--unread', 'only unread ones')
    .action((o: { agent?: string; unread?: boolean }) =>
      run({ action: 'notifications', agentId: o.agent, unread: o.unread }),
    );
  notifications
    .command('read <ids...>')
    .option('--by <name>', 'who read them', process.env.USER)
    .action((ids: string[], o: { by?: string }) => run({ action: 'read', ids, by: o.by }));
}
