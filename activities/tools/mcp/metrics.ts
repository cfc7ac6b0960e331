import { Counter, type Registry } from 'prom-client';

/** What an MCP call ended as, for the per-server counter. */
export type McpCallOutcome = 'ok' | 'tool_error' | 'failed' | 'timeout' | 'cancelled';

/**
 * MCP calls per server and outcome, for the worker's `/metrics`. One counter for the process (the
 * pool is per process too); each worker telemetry registry exposes it.
 */
const MCP_CALLS_METRIC = 'durable_agents_mcp_calls_total';
const mcpCalls = new Counter({
  name: MCP_CALLS_METRIC,
  help: 'MCP tool calls by server and outcome: ok, tool_error (the server answered isError), failed, timeout, cancelled',
  labelNames: ['server', 'outcome'] as const,
  registers: [],
});

export function recordMcpCall(server: string, outcome: McpCallOutcome): void {
  mcpCalls.inc({ server, outcome });
}

export function registerMcpMetrics(registry: Registry): void {
  if (!registry.getSingleMetric(MCP_CALLS_METRIC)) registry.registerMetric(mcpCalls);
}
