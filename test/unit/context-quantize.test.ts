import { formatMinuteTimestamp, mailboxElapsedLabel, notebookAgeLabel } from '../../activities/context/quantize';

const NOW = Date.parse('2026-05-25T12:00:00Z');
const minutes = (n: number) => NOW - n * 60_000;

describe('notebookAgeLabel (D1 B8)', () => {
  test.each([
    [0, 'just now'],
    [4.99, 'just now'],
    [5, 'recent'],
    [29.99, 'recent'],
    [30, '~1h ago'],
    [89, '~1h ago'],
    [90, '~2h ago'],
    [119.99, '~2h ago'],
    [120, '2h ago'],
    [179, '2h ago'],
    [180, '3h ago'],
    [60 * 50, '50h ago'],
  ])('%s min → %s', (age, label) => {
    expect(notebookAgeLabel(minutes(age), NOW)).toBe(label);
  });

  test('accepts Date, ISO string and epoch ms; a future time reads "just now"', () => {
    expect(notebookAgeLabel(new Date(minutes(10)), new Date(NOW))).toBe('recent');
    expect(notebookAgeLabel('2026-05-25T09:00:00Z', NOW)).toBe('3h ago');
    expect(notebookAgeLabel(NOW + 60_000, NOW)).toBe('just now');
  });
});

describe('mailboxElapsedLabel (D1 B8)', () => {
  test.each([
    [0, 'just started'],
    [0.99, 'just started'],
    [1, 'a few minutes'],
    [4.99, 'a few minutes'],
    [5, '~5min'],
    [17.5, '~17min'],
    [59.99, '~59min'],
    [60, '1h'],
    [150, '2h'],
  ])('%s min → %s', (elapsed, label) => {
    expect(mailboxElapsedLabel(minutes(elapsed), NOW)).toBe(label);
  });
});

describe('formatMinuteTimestamp (D1 B8)', () => {
  test('minute level, with zone name and UTC offset', () => {
    expect(formatMinuteTimestamp('2026-05-25T12:07:59.999Z', 'Europe/Berlin')).toBe(
      '2026-05-25 14:07 (Europe/Berlin, UTC+02:00)',
    );
    expect(formatMinuteTimestamp('2026-01-25T12:07:00Z', 'Europe/Berlin')).toBe(
      '2026-01-25 13:07 (Europe/Berlin, UTC+01:00)',
    );
    expect(formatMinuteTimestamp('2026-05-25T12:07:30Z', 'America/New_York')).toBe(
      '2026-05-25 08:07 (America/New_York, UTC-04:00)',
    );
    expect(formatMinuteTimestamp('2026-05-25T12:07:30Z', 'Asia/Kolkata')).toBe(
      '2026-05-25 17:37 (Asia/Kolkata, UTC+05:30)',
    );
    expect(formatMinuteTimestamp('2026-05-25T12:07:30Z')).toBe('2026-05-25 12:07 (UTC, UTC+00:00)');
  });

  test('midnight is 00, not 24', () => {
    expect(formatMinuteTimestamp('2026-05-25T22:00:00Z', 'Europe/Berlin')).toBe(
      '2026-05-26 00:00 (Europe/Berlin, UTC+02:00)',
    );
  });

  test('seconds never change the output', () => {
    expect(formatMinuteTimestamp('2026-05-25T12:07:01Z', 'UTC')).toBe(
      formatMinuteTimestamp('2026-05-25T12:07:59Z', 'UTC'),
    );
  });

  test('an unknown zone falls back to UTC instead of failing', () => {
    expect(formatMinuteTimestamp('2026-05-25T12:07:30Z', 'Mars/Olympus')).toBe('2026-05-25 12:07 (UTC, UTC+00:00)');
  });
});
