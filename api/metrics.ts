/** The API process's own Prometheus metrics: requests by route and status; approvals pending and tasks by state (from PostgreSQL at scrape time). */
import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Database } from '../schema/database';
import { TASK_STATES } from '../workflows/rules/task-state';

export function apiMetrics(db: Kysely<Database>) {
  const registry = new Registry();
  new Gauge({
    name: 'durable_agents_approvals_pending',
    help: 'Approval requests waiting for a human, across all tasks',
    registers: [registry],
    async collect() {
      const row = await db
        .selectFrom('approvals')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .where('status', '=', 'pending')
        .executeTakeFirst();
      this.set(Number(row?.n ?? 0));
    },
  });
  new Gauge({
    name: 'durable_agents_tasks',
    help: 'Tasks by state, across all agents',
    labelNames: ['state'],
    registers: [registry],
    async collect() {
      const rows = await db
        .selectFrom('tasks')
        .select(['state', (eb) => eb.fn.countAll<string>().as('n')])
        .groupBy('state')
        .execute();
      const counts = new Map(rows.map((r) => [r.state, Number(r.n)]));
      // Every state, zero included, so a query for a state that has no task yet still finds a series.
      for (const state of TASK_STATES) this.set({ state }, counts.get(state) ?? 0);
    },
  });
  const requests = new Counter({
    name: 'durable_agents_http_requests_total',
    help: 'HTTP requests by route and status',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'durable_agents_http_request_seconds',
    help: 'HTTP request latency (SSE: time to the first byte of the stream)',
    labelNames: ['method', 'route'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  return {
    registry,
    observe(app: FastifyInstance) {
      app.addHook('onResponse', async (request, reply) => {
        const route = request.routeOptions.url ?? 'unmatched';
        requests.inc({ method: request.method, route, status: String(reply.statusCode) });
        latency.observe({ method: request.method, route }, reply.elapsedTime / 1000);
      });
    },
  };
}
