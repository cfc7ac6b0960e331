/**
 * The CLI's fork and eval commands, over `ForkClient`:
 *
 *   agents task fork <taskId> --at <step> [--round <n>] [--model <m>] [--provider <p>] [--soul <file>] [--agents-md <file>]
 *                    [--tool-result <file>] [--tool-result-error] [--instructions <text>] [--budget <usd>] [--allow-tool <name>...]
 *   agents task fork-report <forkTaskId>
 *   agents eval run (--task <id>... | --query <list query>) --candidate <file.json>... [--budget <usd>] [--concurrency <n>]
 *                   [--judge-rubric <file>] [--judge-model <m>] [--no-wait]
 *   agents eval show <evalId>
 *   agents eval list
 */
import type { Command } from 'commander';
import { readUserTextFile } from '../activities/store/user-files';
import type { ForkOverrides } from '../workflows/contract';
import { ForkError, type ForkClient } from './forks';

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

async function fileText(file: string | undefined, what: string): Promise<string | undefined> {
  if (file === undefined) return undefined;
  const text = await readUserTextFile(file);
  if (text === undefined) throw new ForkError(`${what} file ${file} does not exist`);
  return text;
}

export function addForkCommands(program: Command, open: () => Promise<ForkClient>): void {
  const task = program.commands.find((c) => c.name() === 'task') ?? program.command('task');
  task
    .command('fork <taskId>')
    .description(
      'start a new task from a copy of a recorded round up to a step, with another model, identity, tool result or instructions',
    )
    .requiredOption('--at <step>', 'steps of the source round to keep (0: start from the task prompt)')
    .option('--round <n>', 'the source round (default 1)')
    .option('--model <model>', 'another model')
    .option('--provider <name>', 'another provider')
    .option('--soul <file>', 'another SOUL.md')
    .option('--agents-md <file>', 'another AGENTS.md')
    .option('--tool-result <file>', "replace the fork step's (last) tool result with this file's text")
    .option('--tool-result-index <i>', 'which call of the fork step the result replaces (0-based)')
    .option('--tool-result-error', 'the replaced result is an error')
    .option('--instructions <text>', 'extra instructions after the copied session')
    .option('--budget <usd>', "the fork's cost budget")
    .option('--allow-tool <name>', 'run this tool with outside effects for real (repeatable)', collect)
    .option('--id <taskId>', "the fork's task id")
    .action(async (taskId: string, opts: Record<string, string | boolean | string[] | undefined>) => {
      const soul = await fileText(opts.soul as string | undefined, 'the --soul');
      const agents = await fileText(opts.agentsMd as string | undefined, 'the --agents-md');
      const result = await fileText(opts.toolResult as string | undefined, 'the --tool-result');
      const overrides: ForkOverrides = {
        ...(opts.model ? { model: String(opts.model) } : {}),
        ...(opts.provider ? { provider: String(opts.provider) } : {}),
        ...(soul !== undefined || agents !== undefined
          ? { identity: { ...(soul !== undefined ? { soul } : {}), ...(agents !== undefined ? { agents } : {}) } }
          : {}),
        ...(result !== undefined
          ? {
              toolResult: {
                content: result,
                ...(opts.toolResultError ? { isError: true } : {}),
                ...(opts.toolResultIndex !== undefined ? { callIndex: Number(opts.toolResultIndex) } : {}),
              },
            }
          : {}),
        ...(opts.instructions ? { instructions: String(opts.instructions) } : {}),
      };
      const started = await (
        await open()
      ).forkTask(taskId, {
        at: Number(opts.at),
        ...(opts.round !== undefined ? { round: Number(opts.round) } : {}),
        ...(Object.keys(overrides).length ? { overrides } : {}),
        ...(opts.allowTool ? { allowTools: opts.allowTool as string[] } : {}),
        ...(opts.budget !== undefined ? { costBudgetUsd: Number(opts.budget) } : {}),
        ...(opts.id ? { taskId: String(opts.id) } : {}),
        createdBy: 'cli',
      });
      console.log(
        `fork ${started.taskId} of ${started.sourceTaskId} at step ${started.atStep} of ${started.steps} (${started.copiedToolCalls} recorded call(s) copied)`,
      );
      console.log(`workspace ${started.workspaceDir}: ${started.workspaceNote}`);
      if (started.incompleteCalls.length)
        console.log(
          `the source's records are incomplete: ${started.incompleteCalls.map((c) => `${c.tool} at position ${c.position}`).join(', ')} never finished (outcome unknown)`,
        );
    });
  task
    .command('fork-report <forkTaskId>')
    .description(
      "a fork's tool calls, one by one: replayed (recorded result), executed (in its own workspace) or refused",
    )
    .action(async (forkTaskId: string) => {
      const r = await (await open()).forkReport(forkTaskId);
      console.log(
        `fork ${r.taskId} of ${r.sourceTaskId} at step ${r.atStep}; workspace ${r.workspaceDir} (${r.workspaceNote})`,
      );
      if (r.incompleteCalls.length)
        console.log(`incomplete source records: ${r.incompleteCalls.length} interrupted call(s)`);
      for (const c of r.calls)
        console.log(
          `${String(c.position).padStart(4)}  ${c.outcome.padEnd(8)}  ${c.tool}${c.note ? `  (${c.note})` : ''}`,
        );
      console.log(`${r.counts.replayed} replayed, ${r.counts.executed} executed, ${r.counts.refused} refused`);
    });

  const evals = program.command('eval').description('regression evals on recorded tasks');
  evals
    .command('run')
    .description('fork recorded tasks at step 0 under candidate configurations and grade them against the originals')
    .option('--task <taskId>', 'a recorded task (repeatable)', collect)
    .option('--query <query>', 'a Temporal list query, e.g. AgentId="scribe" AND TaskState="completed"')
    .option('--candidate <file>', 'a candidate configuration file (JSON; repeatable)', collect)
    .option('--budget <usd>', "the whole eval's cost budget")
    .option('--concurrency <n>', 'forks at once (default 4)')
    .option('--judge-rubric <file>', 'grade with an LLM judge by this rubric (its cost counts)')
    .option('--judge-model <model>', "the judge's model")
    .option('--no-wait', 'start it and print its id')
    .action(
      async (opts: {
        task?: string[];
        query?: string;
        candidate?: string[];
        budget?: string;
        concurrency?: string;
        judgeRubric?: string;
        judgeModel?: string;
        wait: boolean;
      }) => {
        const client = await open();
        const { evalId } = await client.startEval({
          selection: opts.task?.length ? { taskIds: opts.task } : { query: opts.query ?? '' },
          candidateFiles: opts.candidate ?? [],
          ...(opts.budget !== undefined ? { budgetUsd: Number(opts.budget) } : {}),
          ...(opts.concurrency !== undefined ? { concurrency: Number(opts.concurrency) } : {}),
          ...(opts.judgeRubric ? { judgeRubricFile: opts.judgeRubric } : {}),
          ...(opts.judgeModel ? { judge: { model: opts.judgeModel } } : {}),
        });
        console.log(`eval ${evalId} started`);
        if (!opts.wait) return;
        const result = await client.evalResult(evalId);
        console.log(result.table);
        console.log(`spent $${result.spentUsd.toFixed(4)}`);
      },
    );
  evals
    .command('show <evalId>')
    .description("an eval's table (per task and candidate) and totals per candidate")
    .action(async (evalId: string) => {
      const t = await (await open()).evalTable(evalId);
      console.log(
        `eval ${t.evalId} · ${t.state} · spent $${t.spentUsd.toFixed(4)}${t.budgetUsd !== null ? ` of $${t.budgetUsd}` : ''}`,
      );
      console.log(t.table);
    });
  evals
    .command('list')
    .description('recent evals')
    .action(async () => {
      for (const e of await (await open()).listEvals())
        console.log(
          `${e.evalId}  ${e.state.padEnd(9)} $${e.spentUsd.toFixed(4)}  ${e.candidates.join(' vs ')}  ${e.createdAt.toISOString()}`,
        );
    });
}
