/** Every workflow the worker registers (the bundle's entry point). */
export { taskWorkflow } from './task';
export { taskRoundWorkflow } from './task-round';
export { heartbeatWorkflow } from './heartbeat';
export { memoryConsolidationWorkflow } from './consolidation';
export { postTaskReflectionWorkflow } from './reflection';
export { streamPruneWorkflow } from './stream-prune';
export { agentWorkflow } from './agent';
export { chatRunWorkflow } from './scenario-run';
export { subagentWorkflow } from './subagent';
export { evalWorkflow } from './eval';
