import { type Language, LANGUAGE_VERSION, MIN_COMPATIBLE_VERSION } from 'web-tree-sitter';
import { getShellParser, parseCommand } from '../../activities/tools/shell/parse';
import { MAX_COMMAND_CHARS } from '../../activities/tools/shell/limits';

describe('tree-sitter-bash under web-tree-sitter', () => {
  it('loads: the grammar ABI is within what the runtime supports', async () => {
    const parser = await getShellParser();
    const language = parser.language as Language;
    expect(language.abiVersion).toBeGreaterThanOrEqual(MIN_COMPATIBLE_VERSION);
    expect(language.abiVersion).toBeLessThanOrEqual(LANGUAGE_VERSION);
  });

  it('initialises the parser once', async () => {
    expect(await getShellParser()).toBe(await getShellParser());
  });
});

describe('parseCommand: strings that reduce to clean invocations', () => {
  it.each<[string, string[][]]>([
    ['ls', [['ls']]],
    ['ls -la src', [['ls', '-la', 'src']]],
    ["grep -rn 'a b' src", [['grep', '-rn', 'a b', 'src']]],
    ['grep -rn "a b" src', [['grep', '-rn', 'a b', 'src']]],
    ['echo "say \\"hi\\" \\\\ \\$5 \\`x\\`"', [['echo', 'say "hi" \\ $5 `x`']]],
    ['echo "keep \\n as is"', [['echo', 'keep \\n as is']]],
    ["echo '$(not expanded) `nor this` $HOME'", [['echo', '$(not expanded) `nor this` $HOME']]],
    ['git commit -m "line one\nline two"', [['git', 'commit', '-m', 'line one\nline two']]],
    ["git commit --message='x y'", [['git', 'commit', '--message=x y']]],
    ['git log --format=%h:%s -n 5', [['git', 'log', '--format=%h:%s', '-n', '5']]],
    ['git commit --message="fix: a"', [['git', 'commit', '--message=fix: a']]],
    ['echo a"b"\'c\'', [['echo', 'abc']]],
    ['echo ""', [['echo', '']]],
    ['"ls" -l', [['ls', '-l']]],
    ['echo "café ☕"', [['echo', 'café ☕']]],
    [
      "find . -name '*.ts' -exec grep -l x {} ';'",
      [['find', '.', '-name', '*.ts', '-exec', 'grep', '-l', 'x', '{}', ';']],
    ],
    [
      'git add -A && git commit -m "wip"',
      [
        ['git', 'add', '-A'],
        ['git', 'commit', '-m', 'wip'],
      ],
    ],
    ['a && b && c', [['a'], ['b'], ['c']]],
    ['ls \\\n  -la', [['ls', '-la']]],
    ['  ls   -la  ', [['ls', '-la']]],
    ["git push origin '+main'", [['git', 'push', 'origin', '+main']]],
  ])('%j', async (command, invocations) => {
    expect(await parseCommand(command)).toEqual({ ok: true, invocations });
  });
});

describe('parseCommand: everything else fails closed with a specific reason', () => {
  it.each<[string, RegExp]>([
    ['ls | wc -l', /pipe/],
    ['ls; rm -rf x', /';' joins/],
    ['ls || rm -rf x', /'\|\|'/],
    ['ls & rm -rf x', /background/],
    ['sleep 1 &', /background/],
    ['ls\nrm -rf x', /newlines/],
    ['ls && $(touch pwned)', /command substitution/],
    ['ls `touch pwned`', /command substitution/],
    ['echo "$(touch pwned)"', /command substitution/],
    ['cat <(touch pwned)', /process substitution/],
    ['echo $HOME', /parameter expansion/],
    ['echo "x${HOME}"', /parameter expansion/],
    ['echo "cost: 5$"', /'\$' inside double quotes/],
    ['echo $((1+1))', /arithmetic/],
    ['ls *.ts', /glob/],
    ['ls file?.txt', /glob/],
    ['ls [ab].txt', /glob/],
    ['echo {a,b}', /braces/],
    ['echo {1..3}', /brace/],
    ['ls ~', /tilde/],
    ['ls ~/x', /tilde/],
    ['cat a=~/x', /tilde/],
    ['ls > out.txt', /redirection/],
    ['ls 2>&1', /redirection/],
    ['cat < /etc/passwd', /redirection/],
    ['cat <<EOF\nx\nEOF', /here-document/],
    ['cat <<< hi', /here-string|redirection/],
    ['(ls)', /subshell/],
    ['{ ls; }', /group/],
    ['FOO=1 ls', /variable assignment/],
    ['FOO=1', /variable assignment/],
    ['export FOO=1', /declaration/],
    ['ls # ; rm -rf x', /comment/],
    ["echo $'\\x3b'", /ANSI-C/],
    ['echo $"hi"', /locale|'\$'/],
    ['! ls', /negation/],
    ['if true; then ls; fi', /if statement/],
    ['for f in a; do ls; done', /loop/],
    ['f() { ls; }', /function/],
    ['[[ -f x ]]', /test expression/],
    ['ls &&', /not valid shell syntax/],
    ['ls "unterminated', /not valid shell syntax/],
    ['ls a\\ b', /backslash/],
    ['ls !x', /specially/],
    ['', /empty/],
    ['   ', /empty/],
    ['ls\0rm', /NUL/],
    ['ls\rrm -rf x', /carriage return/],
    ['ls \u202e', /invisible/],
    ['ls\u200b', /invisible/],
    ['gіt status', /non-ASCII/], // Cyrillic і
    ['"gіt" status', /plain ASCII/],
    ['ls；rm -rf x', /non-ASCII/], // fullwidth semicolon
    ['ls ｜ rm', /non-ASCII/], // fullwidth vertical line
    ['""', /command name is empty/],
  ])('%j', async (command, reason) => {
    const parsed = await parseCommand(command);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.reason).toMatch(reason);
  });

  it('refuses a command longer than the limit', async () => {
    const parsed = await parseCommand(`echo ${'a'.repeat(MAX_COMMAND_CHARS)}`);
    expect(parsed).toEqual({ ok: false, reason: expect.stringMatching(/longer than/) });
  });
});

describe('parseCommand: argv arrays are taken as they are', () => {
  it('keeps shell metacharacters as literal arguments', async () => {
    expect(await parseCommand(['ls', 'x; rm -rf /', '$(touch pwned)'])).toEqual({
      ok: true,
      invocations: [['ls', 'x; rm -rf /', '$(touch pwned)']],
    });
  });

  it('accepts an empty argument after the command name', async () => {
    expect(await parseCommand(['grep', '', 'file'])).toEqual({ ok: true, invocations: [['grep', '', 'file']] });
  });

  it.each<[unknown[], RegExp]>([
    [[], /empty/],
    [[''], /command name is empty/],
    [['ls', 1], /not a string/],
    [['ls', 'a\0b'], /NUL/],
    [['ls\0'], /NUL/],
    [['ls', 'a\u202eb'], /invisible/],
    [['gіt', 'status'], /plain ASCII/],
  ])('refuses %j', async (argv, reason) => {
    const parsed = await parseCommand(argv as string[]);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.reason).toMatch(reason);
  });
});
