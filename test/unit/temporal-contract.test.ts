import { readFileSync } from 'node:fs';
import Ajv2020 from 'ajv/dist/2020';
import { renderTemporalContract, TEMPORAL_CONTRACT_FILE, temporalContractDocument } from '../../api/temporal-contract';
import { TASK_INPUT_FIELDS, taskInputProblem } from '../../workflows/rules/task-input';

/**
 * The committed JSON Schema of the Temporal contract is what the zod schemas generate (run
 * `npm run contract:schema` after changing them), every schema in it compiles under draft 2020-12,
 * and it accepts a real start and refuses a wrong one.
 */
describe('the Temporal contract as JSON Schema', () => {
  const doc = temporalContractDocument() as {
    workflows: Record<
      string,
      {
        input: object;
        result: object;
        queries: Record<string, { result: object }>;
        signals: Record<string, { args: object[] }>;
        updates: Record<string, { args: object[]; result: object }>;
      }
    >;
    enums: Record<string, string[]>;
  };

  test('the committed copy is up to date', () => {
    expect(readFileSync(TEMPORAL_CONTRACT_FILE, 'utf8')).toBe(renderTemporalContract());
  });

  test('every input, result, query, signal and update has a schema that compiles', () => {
    const ajv = new Ajv2020({ strict: false });
    const names: string[] = [];
    for (const [workflow, w] of Object.entries(doc.workflows)) {
      ajv.compile(w.input);
      ajv.compile(w.result);
      for (const [name, q] of Object.entries(w.queries)) {
        ajv.compile(q.result);
        names.push(`${workflow} query ${name}`);
      }
      for (const [name, s] of Object.entries(w.signals)) {
        for (const a of s.args) ajv.compile(a);
        names.push(`${workflow} signal ${name}`);
      }
      for (const [name, u] of Object.entries(w.updates)) {
        for (const a of u.args) ajv.compile(a);
        ajv.compile(u.result);
        names.push(`${workflow} update ${name}`);
      }
    }
    expect(names).toEqual(
      expect.arrayContaining([
        'taskWorkflow query status',
        'taskWorkflow signal approvalDecision',
        'taskWorkflow signal reviewDecision',
        'taskWorkflow signal comment',
        'taskWorkflow update decideApproval',
        'agentWorkflow update deliver',
        'agentWorkflow query mailbox',
      ]),
    );
    expect(doc.enums.TaskPhase).toContain('awaiting-approval');
    expect(doc.enums.TaskState).toContain('review');
  });

  test('a real start validates; a start without an agent, or with an unknown priority, does not', () => {
    const validate = new Ajv2020({ strict: false }).compile(doc.workflows.taskWorkflow!.input);
    expect(validate({ taskId: 'report-42', agentId: 'scribe', title: 'Weekly report', priority: 'high' })).toBe(true);
    expect(validate({ taskId: 'report-42', title: 'Weekly report' })).toBe(false);
    expect(validate({ agentId: 'scribe', priority: 'whenever' })).toBe(false);
  });

  test('the schema refuses the fields the workflow refuses, and lists exactly the fields it takes', () => {
    const input = doc.workflows.taskWorkflow!.input as { properties: object; additionalProperties?: boolean };
    const validate = new Ajv2020({ strict: false }).compile(input);
    expect(validate({ agentId: 'scribe', title: 'Weekly report', budget: 0.5 })).toBe(false);
    expect(input.additionalProperties).toBe(false);
    expect(Object.keys(input.properties).sort()).toEqual([...TASK_INPUT_FIELDS].sort());
    expect(taskInputProblem({ agentId: 'scribe', title: 'Weekly report', budget: 0.5 } as never, 'report-42')).toBe(
      `unknown field "budget": a task's input has only ${TASK_INPUT_FIELDS.join(', ')}`,
    );
  });
});
