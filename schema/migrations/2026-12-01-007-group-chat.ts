import { sql, type Kysely } from 'kysely';

// Frozen in time: `Kysely<any>`, no application imports. Later changes go in a new migration.
// Group chat: a channel `group:<name>` with several agents and humans, its members, and
// the transcript every member sees. Deliveries to the member agents go through their mailboxes.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('group_channels')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('created_by', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createTable('group_members')
    .addColumn('group_name', 'text', (c) => c.notNull().references('group_channels.name').onDelete('cascade'))
    .addColumn('member_type', 'text', (c) => c.notNull().check(sql`member_type in ('agent', 'human')`))
    .addColumn('member_id', 'text', (c) => c.notNull())
    .addColumn('joined_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('group_members_pk', ['group_name', 'member_type', 'member_id'])
    .execute();
  await db.schema
    .createTable('group_messages')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('group_name', 'text', (c) => c.notNull().references('group_channels.name').onDelete('cascade'))
    .addColumn('from_type', 'text', (c) => c.notNull())
    .addColumn('from_id', 'text', (c) => c.notNull())
    .addColumn('text', 'text', (c) => c.notNull())
    // The message this one answers, and the turn (the human message that started it) it belongs to:
    // agent replies are budgeted per turn, so a group conversation converges.
    .addColumn('reply_to', 'text')
    .addColumn('turn_id', 'text', (c) => c.notNull())
    // 0 for a human's message, the replied-to message's depth + 1 for an agent's reply.
    .addColumn('depth', 'integer', (c) => c.notNull())
    // Agent ids the message was delivered to, and why the others were not.
    .addColumn('delivered_to', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('routing', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('seq', 'bigserial', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('group_messages_group_idx').on('group_messages').columns(['group_name', 'seq']).execute();
  await db.schema.createIndex('group_messages_turn_idx').on('group_messages').column('turn_id').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('group_messages').execute();
  await db.schema.dropTable('group_members').execute();
  await db.schema.dropTable('group_channels').execute();
}
