import {
  CIRCUIT_AUTH_OPEN_MS,
  CIRCUIT_MODEL_UNAVAILABLE_OPEN_MS,
  CIRCUIT_OPEN_AFTER_FAILURES,
  CIRCUIT_OPEN_MS,
  CIRCUIT_RATE_LIMIT_OPEN_MS,
  CIRCUIT_TRIAL_LEASE_MS,
  CircuitBreaker,
  circuitKey,
} from '../../activities/llm/circuit-breaker';

function setup() {
  const clock = { t: 1_000_000 };
  const breaker = new CircuitBreaker({ now: () => clock.t });
  return { clock, breaker };
}

describe('constants (seed D1 F7)', () => {
  it('pins the numbers', () => {
    expect(CIRCUIT_OPEN_AFTER_FAILURES).toBe(2);
    expect(CIRCUIT_OPEN_MS).toBe(5 * 60 * 1000);
    expect(CIRCUIT_AUTH_OPEN_MS).toBe(30 * 60 * 1000);
    expect(CIRCUIT_RATE_LIMIT_OPEN_MS).toBe(30 * 1000);
    expect(CIRCUIT_MODEL_UNAVAILABLE_OPEN_MS).toBe(30 * 60 * 1000);
    expect(CIRCUIT_TRIAL_LEASE_MS).toBe(5 * 60 * 1000);
    expect(circuitKey('anthropic', 'claude-sonnet-4-5')).toBe('anthropic:claude-sonnet-4-5');
  });
});

describe('transient failures', () => {
  it('opens after 2 consecutive failures, for 5 minutes', () => {
    const { clock, breaker } = setup();
    breaker.recordFailure('anthropic', 'm', 'transient');
    expect(breaker.snapshot('anthropic', 'm')).toEqual({ state: 'closed', consecutiveFailures: 1 });
    expect(breaker.tryAcquire('anthropic', 'm')).toBe(true);

    breaker.recordFailure('anthropic', 'm', 'transient');
    expect(breaker.snapshot('anthropic', 'm')).toEqual({
      state: 'open',
      openUntil: clock.t + CIRCUIT_OPEN_MS,
      reason: 'transient',
      consecutiveFailures: 2,
    });
    expect(breaker.tryAcquire('anthropic', 'm')).toBe(false);

    clock.t += CIRCUIT_OPEN_MS - 1;
    expect(breaker.snapshot('anthropic', 'm').state).toBe('open');
    clock.t += 1;
    expect(breaker.snapshot('anthropic', 'm').state).toBe('half_open');
  });

  it('a success in between resets the count', () => {
    const { breaker } = setup();
    breaker.recordFailure('p', 'm', 'transient');
    breaker.recordSuccess('p', 'm');
    breaker.recordFailure('p', 'm', 'transient');
    expect(breaker.snapshot('p', 'm')).toEqual({ state: 'closed', consecutiveFailures: 1 });
  });

  it('is per provider:model', () => {
    const { breaker } = setup();
    breaker.recordFailure('p', 'a', 'transient');
    breaker.recordFailure('p', 'a', 'transient');
    expect(breaker.snapshot('p', 'a').state).toBe('open');
    expect(breaker.snapshot('p', 'b').state).toBe('closed');
    expect(breaker.snapshot('q', 'a').state).toBe('closed');
  });
});

describe('half-open', () => {
  function openedAndExpired() {
    const s = setup();
    s.breaker.recordFailure('p', 'm', 'transient');
    s.breaker.recordFailure('p', 'm', 'transient');
    s.clock.t += CIRCUIT_OPEN_MS;
    return s;
  }

  it('lets exactly one trial through', () => {
    const { breaker } = openedAndExpired();
    expect(breaker.tryAcquire('p', 'm')).toBe(true);
    expect(breaker.tryAcquire('p', 'm')).toBe(false);
  });

  it('closes on the trial succeeding', () => {
    const { breaker } = openedAndExpired();
    breaker.tryAcquire('p', 'm');
    breaker.recordSuccess('p', 'm');
    expect(breaker.snapshot('p', 'm')).toEqual({ state: 'closed', consecutiveFailures: 0 });
    expect(breaker.tryAcquire('p', 'm')).toBe(true);
    expect(breaker.tryAcquire('p', 'm')).toBe(true);
  });

  it('reopens for a full window on the trial failing once', () => {
    const { clock, breaker } = openedAndExpired();
    breaker.tryAcquire('p', 'm');
    breaker.recordFailure('p', 'm', 'transient');
    expect(breaker.snapshot('p', 'm')).toMatchObject({ state: 'open', openUntil: clock.t + CIRCUIT_OPEN_MS });
  });

  it('release() hands the trial back without a verdict', () => {
    const { breaker } = openedAndExpired();
    expect(breaker.tryAcquire('p', 'm')).toBe(true);
    breaker.release('p', 'm');
    expect(breaker.snapshot('p', 'm').state).toBe('half_open');
    expect(breaker.tryAcquire('p', 'm')).toBe(true);
  });

  it('a trial that never reports is presumed lost after the lease', () => {
    const { clock, breaker } = openedAndExpired();
    expect(breaker.tryAcquire('p', 'm')).toBe(true);
    clock.t += CIRCUIT_TRIAL_LEASE_MS - 1;
    expect(breaker.tryAcquire('p', 'm')).toBe(false);
    clock.t += 1;
    expect(breaker.tryAcquire('p', 'm')).toBe(true);
  });
});

describe('rate limits', () => {
  it('open the model at once for 30 seconds', () => {
    const { clock, breaker } = setup();
    breaker.recordFailure('openai', 'gpt-4.1', 'rate_limit');
    expect(breaker.snapshot('openai', 'gpt-4.1')).toEqual({
      state: 'open',
      openUntil: clock.t + CIRCUIT_RATE_LIMIT_OPEN_MS,
      reason: 'rate_limit',
      consecutiveFailures: 1,
    });
    expect(breaker.snapshot('openai', 'gpt-5').state).toBe('closed');
    clock.t += CIRCUIT_RATE_LIMIT_OPEN_MS;
    expect(breaker.tryAcquire('openai', 'gpt-4.1')).toBe(true);
  });

  it('never shorten a longer window already running', () => {
    const { clock, breaker } = setup();
    breaker.recordFailure('p', 'm', 'model_unavailable');
    breaker.recordFailure('p', 'm', 'rate_limit');
    expect(breaker.snapshot('p', 'm')).toMatchObject({
      openUntil: clock.t + CIRCUIT_MODEL_UNAVAILABLE_OPEN_MS,
      reason: 'model_unavailable',
    });
  });
});

describe('auth and billing failures', () => {
  it('open the whole provider at once for 30 minutes', () => {
    const { clock, breaker } = setup();
    breaker.recordFailure('anthropic', 'claude-sonnet-4-5', 'auth');
    const expected = { state: 'open', openUntil: clock.t + CIRCUIT_AUTH_OPEN_MS, reason: 'auth', providerWide: true };
    expect(breaker.snapshot('anthropic', 'claude-sonnet-4-5')).toMatchObject(expected);
    expect(breaker.snapshot('anthropic', 'claude-haiku-4-5')).toMatchObject(expected);
    expect(breaker.tryAcquire('anthropic', 'claude-haiku-4-5')).toBe(false);
    expect(breaker.snapshot('openai', 'gpt-4.1').state).toBe('closed');

    clock.t += CIRCUIT_AUTH_OPEN_MS - 1;
    expect(breaker.snapshot('anthropic', 'claude-haiku-4-5').state).toBe('open');
    clock.t += 1;
    expect(breaker.snapshot('anthropic', 'claude-haiku-4-5').state).toBe('half_open');
    // One trial for the provider, whichever model carries it.
    expect(breaker.tryAcquire('anthropic', 'claude-haiku-4-5')).toBe(true);
    expect(breaker.tryAcquire('anthropic', 'claude-sonnet-4-5')).toBe(false);
    breaker.recordSuccess('anthropic', 'claude-haiku-4-5');
    expect(breaker.snapshot('anthropic', 'claude-sonnet-4-5').state).toBe('closed');
  });
});

describe('unknown model (404)', () => {
  it('opens only that model, at once, for 30 minutes', () => {
    const { clock, breaker } = setup();
    breaker.recordFailure('openai', 'gpt-nope', 'model_unavailable');
    expect(breaker.snapshot('openai', 'gpt-nope')).toMatchObject({
      state: 'open',
      openUntil: clock.t + CIRCUIT_MODEL_UNAVAILABLE_OPEN_MS,
    });
    expect(breaker.snapshot('openai', 'gpt-4.1').state).toBe('closed');
  });
});

describe('reset', () => {
  it('forgets everything', () => {
    const { breaker } = setup();
    breaker.recordFailure('p', 'm', 'auth');
    breaker.recordFailure('p', 'n', 'rate_limit');
    breaker.reset();
    expect(breaker.snapshot('p', 'm').state).toBe('closed');
    expect(breaker.snapshot('p', 'n').state).toBe('closed');
  });
});
