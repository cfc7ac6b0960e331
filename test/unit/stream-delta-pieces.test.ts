import { deltaPieces } from '../../activities/streams/publisher';
import { storableText } from '../../activities/security/binary';

describe('streamed text as storable rows', () => {
  test('rows never split a surrogate pair, and rejoin to the text', () => {
    const text = `${'a'.repeat(3)}\u{1F600}${'b'.repeat(4)}`; // the emoji is code units 3 and 4
    const pieces = deltaPieces(text, 4);
    expect(pieces).toEqual(['aaa', '\u{1F600}bb', 'bb']);
    expect(pieces.join('')).toBe(text);
  });

  test('NUL is escaped and a lone surrogate replaced in every row; well-formed text is unchanged', () => {
    expect(deltaPieces('x\u0000y\ud800z', 100)).toEqual(['x\\0y\uFFFDz']);
    expect(storableText('\udc00 and \ud83d')).toBe('\uFFFD and \uFFFD');
    expect(storableText('ok \u{1F600}')).toBe('ok \u{1F600}');
  });
});
