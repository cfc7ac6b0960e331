import { applyStreamEvent, emptyTranscript, transcriptText, type StreamEvent } from '../../workflows/stream-contract';

let seq = 0;
const ev = (kind: StreamEvent['kind'], fields: Partial<StreamEvent> = {}): StreamEvent => ({
  streamId: 's',
  seq: ++seq,
  kind,
  attempt: 1,
  part: 0,
  createdAt: new Date(0),
  ...fields,
});

describe('folding a run stream into text', () => {
  beforeEach(() => {
    seq = 0;
  });

  test('deltas of a step concatenate in order; steps are separated', () => {
    const t = emptyTranscript();
    for (const e of [
      ev('step-start', { stepKey: 'a' }),
      ev('delta', { stepKey: 'a', text: 'Hel' }),
      ev('delta', { stepKey: 'a', text: 'lo' }),
      ev('step-end', { stepKey: 'a' }),
      ev('delta', { stepKey: 'b', text: 'Bye' }),
    ])
      applyStreamEvent(t, e);
    expect(transcriptText(t)).toBe('Hello\n\nBye');
    expect(t.steps[0]!.ended).toBe(true);
    expect(t.lastSeq).toBe(5);
  });

  test('a rewind drops the superseded attempt, and a late delta from it is ignored', () => {
    const t = emptyTranscript();
    applyStreamEvent(t, ev('delta', { stepKey: 'a', text: 'The ans' }));
    applyStreamEvent(t, ev('rewind', { stepKey: 'a', attempt: 2 }));
    applyStreamEvent(t, ev('delta', { stepKey: 'a', attempt: 2, text: 'The answer' }));
    applyStreamEvent(t, ev('delta', { stepKey: 'a', attempt: 1, text: 'wer (stale)' }));
    applyStreamEvent(t, ev('delta', { stepKey: 'a', attempt: 2, text: ' is 42.' }));
    expect(transcriptText(t)).toBe('The answer is 42.');
    expect(t.steps[0]!.rewinds).toBe(1);
  });

  test('a provider fallback (new part within one attempt) supersedes the failed part', () => {
    const t = emptyTranscript();
    applyStreamEvent(t, ev('delta', { stepKey: 'a', text: 'from the first provider' }));
    applyStreamEvent(t, ev('rewind', { stepKey: 'a', part: 1 }));
    applyStreamEvent(t, ev('delta', { stepKey: 'a', part: 1, text: 'from the fallback' }));
    applyStreamEvent(t, ev('delta', { stepKey: 'a', part: 0, text: ' (late)' }));
    expect(transcriptText(t)).toBe('from the fallback');
  });

  test('events already folded (overlapping pages after a resume) change nothing; end marks the run ended', () => {
    const t = emptyTranscript();
    const a = ev('delta', { stepKey: 'a', text: 'once' });
    applyStreamEvent(t, a);
    applyStreamEvent(t, a);
    applyStreamEvent(t, ev('end'));
    expect(transcriptText(t)).toBe('once');
    expect(t.ended).toBe(true);
  });
});
