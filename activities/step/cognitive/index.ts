/** Cognitive preparation: depth selection (pure), prompts (pure), the pipeline (I/O). */
export * from './depth';
export * from '../../../prompts/cognitive';
export {
  CPP_CALL_PREFIX,
  FAILED_TASK_LOOKBACK_MS,
  evaluatePreparedContext,
  loadDepthSignals,
  prepareCognitiveContext,
  type CognitiveConfig,
  type CognitiveDeps,
  type CognitiveOutcome,
  type CognitiveRun,
} from './prepare';
