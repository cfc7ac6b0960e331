import type { Command } from 'commander';
import type { AgentsClient } from './index';
import type { BudgetReport } from '../workflows/subagent-contract';

/** One line per node (the round and each sub-agent) and the tree's total. */
export function describeBudget(report: BudgetReport): string {
  const usd = (n: number | null): string => (n === null ? 'no limit' : `$${n.toFixed(4)}`);
  const lines = [
    `tree: ${usd(report.spentUsd)} spent of ${usd(report.limitUsd)}${report.held ? ' · HELD: waiting for a budget decision' : ''}`,
  ];
  for (const node of report.nodes)
    lines.push(`  ${node.workflowId}: ${usd(node.spentUsd)} (cap ${usd(node.limitUsd)}) · ${node.state}`);
  return lines.join('\n');
}

/** `task budget`, `task budget-raise`, `task budget-stop`: the cost governor of a task's tree. */
export function addBudgetCommands(task: Command, open: () => Promise<{ client: AgentsClient }>): void {
  task
    .command('budget <taskId>')
    .description("the task tree's spend per node (round and sub-agents) and in total")
    .action(async (taskId: string) => console.log(describeBudget(await (await open()).client.getBudget(taskId))));
  task
    .command('budget-raise <taskId>')
    .description('a tree held at its cost budget continues with a higher limit')
    .requiredOption('--limit <usd>', 'the new limit in USD, above what was spent', Number)
    .option('--by <name>', 'who decides', process.env.USER)
    .action(async (taskId: string, opts: { limit: number; by?: string }) => {
      const recorded = await (
        await open()
      ).client.decideBudget(taskId, { decision: 'raise', newLimitUsd: opts.limit, decidedBy: opts.by });
      console.log(`budget of task ${taskId} raised to $${opts.limit} (spent $${recorded.spentUsd.toFixed(4)})`);
    });
  task
    .command('budget-stop <taskId>')
    .description('stop a tree held at its cost budget: sub-agents are cancelled, the task fails (BudgetStopped)')
    .option('--by <name>', 'who decides', process.env.USER)
    .action(async (taskId: string, opts: { by?: string }) => {
      const recorded = await (await open()).client.decideBudget(taskId, { decision: 'stop', decidedBy: opts.by });
      console.log(
        `task ${taskId} stopped at $${recorded.spentUsd.toFixed(4)}: its sub-agents are cancelled and it fails (BudgetStopped)`,
      );
    });
}
