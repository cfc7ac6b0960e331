import { createInterface } from 'node:readline/promises';
import type { Command } from 'commander';
import { ConversationClient, type ChatEvent } from './chat';
import type { connectFromEnv } from './connect';

type Open = () => Promise<Awaited<ReturnType<typeof connectFromEnv>>>;

/** Printed where a retried LLM call superseded text already on screen (a terminal cannot unprint it). */
const REWIND_NOTICE = '\n  ⟲ the model call was retried; the answer restarts:\n';

/**
 * `agents chat <agentId>`: an interactive terminal chat with streamed answers (or one message with
 * `--message`), and `agents mailbox <agentId>`: the agent's mailbox with each item's triage state.
 */
export function addChatCommands(program: Command, open: Open): void {
  program
    .command('chat <agentId>')
    .description('chat with an agent in the terminal; answers stream as they are written (/exit or Ctrl-D to leave)')
    .option('--as <name>', 'who you are (your channel with the agent is dm:human:<name>)', process.env.USER ?? 'user')
    .option('--channel <channel>', 'channel to talk in (default: your direct channel)')
    .option('--message <text>', 'send one message, print the answer, exit')
    .action(async (agentId: string, opts: { as: string; channel?: string; message?: string }) => {
      const { client, database } = await open();
      const conv = new ConversationClient(client, { connectionString: database.url });
      const send = async (text: string): Promise<void> => {
        process.stdout.write(`${agentId}> `);
        await printAnswer(
          conv.chat(agentId, text, {
            from: { type: 'human', id: opts.as },
            ...(opts.channel ? { channel: opts.channel } : {}),
          }),
        );
      };
      if (opts.message !== undefined) return send(opts.message);

      const rl = createInterface({ input: process.stdin, output: process.stdout, terminal: process.stdin.isTTY });
      console.log(`chatting with ${agentId} as ${opts.as} (/exit to leave)`);
      try {
        for (;;) {
          let line: string;
          try {
            line = (await rl.question('you> ')).trim();
          } catch {
            break; // Ctrl-D / closed input
          }
          if (line === '/exit' || line === '/quit') break;
          if (!line) continue;
          try {
            await send(line);
          } catch (error) {
            console.log(`\n  ! ${error instanceof Error ? error.message : String(error)}`);
          }
        }
      } finally {
        rl.close();
      }
    });

  const group = program
    .command('group')
    .description('group chats: several agents and humans in a channel group:<name>');
  group
    .command('create <name>')
    .description('create a group with its members')
    .requiredOption('--agents <ids>', 'member agent ids, comma-separated')
    .option('--humans <names>', 'member humans, comma-separated', process.env.USER ?? 'user')
    .action(async (name: string, opts: { agents: string; humans: string }) => {
      const { client, database } = await open();
      const split = (s: string): string[] =>
        s
          .split(',')
          .map((x) => x.trim())
          .filter(Boolean);
      const members = [
        ...split(opts.agents).map((id) => ({ type: 'agent' as const, id })),
        ...split(opts.humans).map((id) => ({ type: 'human' as const, id })),
      ];
      await new ConversationClient(client, { connectionString: database.url }).createGroup(name, members);
      console.log(`group:${name} created with ${members.map((m) => m.id).join(', ')}`);
    });
  group
    .command('post <name> <text>')
    .description('post to a group (mention agents with @id); prints who it was delivered to')
    .option('--as <name>', 'who you are (a human member)', process.env.USER ?? 'user')
    .action(async (name: string, text: string, opts: { as: string }) => {
      const { client, database } = await open();
      const m = await new ConversationClient(client, { connectionString: database.url }).postToGroup(
        name,
        { type: 'human', id: opts.as },
        text,
      );
      console.log(`posted ${m.id} · delivered to ${m.deliveredTo.join(', ') || 'no agent'} (${m.routing})`);
    });
  group
    .command('show <name>')
    .description("the group's members and transcript")
    .option('--limit <n>', 'last n messages', '50')
    .action(async (name: string, opts: { limit: string }) => {
      const { client, database } = await open();
      const g = await new ConversationClient(client, { connectionString: database.url }).group(
        name,
        Number(opts.limit),
      );
      console.log(`group:${name} · ${g.members.map((m) => `${m.id} (${m.type})`).join(', ')}`);
      for (const m of g.messages) console.log(`  ${m.from.id}> ${m.text}`);
    });

  program
    .command('mailbox <agentId>')
    .description("the agent's mailbox: items, their triage decision and state")
    .action(async (agentId: string) => {
      const { client, database } = await open();
      const view = await new ConversationClient(client, { connectionString: database.url }).mailbox(agentId);
      console.log(
        `${agentId}: ${view.attention}${view.focus ? ` on ${view.focus.kind} ${view.focus.itemId}` : ''} · ${JSON.stringify(view.counters)}`,
      );
      for (const i of view.items)
        console.log(
          `  [${i.status}] p${i.priority} ${i.kind} from ${i.from.type}:${i.from.id} (${i.decision}: ${i.reason}) ${JSON.stringify(i.preview)}`,
        );
    });
}

async function printAnswer(events: AsyncIterable<ChatEvent>): Promise<void> {
  for await (const e of events) {
    if (e.type === 'delta') process.stdout.write(e.text);
    else if (e.type === 'rewind') process.stdout.write(REWIND_NOTICE);
    else if (e.type === 'tool') process.stdout.write(`\n  · used ${e.names.join(', ')}\n`);
    else if (e.type === 'end')
      process.stdout.write(
        e.error
          ? `\n  ! the answer failed: ${e.error}\n`
          : e.stoppedBy && e.stoppedBy !== 'answer'
            ? `\n  (stopped: ${e.stoppedBy})\n`
            : '\n',
      );
  }
}
