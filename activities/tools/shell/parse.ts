/**
 * Reduces a model-written shell command to plain argument vectors, or refuses.
 *
 * Commands never run through a shell (see `run.ts`), so a string is only accepted when it means the
 * same thing with and without one: a single simple command, or simple commands joined by `&&`, whose
 * every word is a literal (a plain word, a single-quoted string, or a double-quoted string without
 * expansions). Everything else fails closed with the reason, so that what is classified and shown to
 * an approver is exactly what runs. The string is parsed with tree-sitter-bash (WASM) rather than a
 * hand-written tokenizer or `shell-quote`, which merges newline-separated commands and misreads
 * backticks.
 *
 * Example: `git add -A && git commit -m "fix: x"` → `[['git','add','-A'], ['git','commit','-m','fix: x']]`;
 * `ls; rm -rf x` → `{ ok: false, reason: "';' joins several commands …" }`.
 */
import { readFile } from 'node:fs/promises';
import { Language, Parser, type Node } from 'web-tree-sitter';
import { MAX_COMMAND_CHARS } from './limits';

export type ParsedCommand = { ok: true; invocations: string[][] } | { ok: false; reason: string };

/** Characters an unquoted word may contain: nothing the shell would expand, split or interpret. */
const PLAIN_WORD = /^[A-Za-z0-9_\-./:=@%+,^]+$/;

/** A command name: ASCII only, so a Unicode look-alike (`gіt`, `ｌｓ`) cannot pass for a known command. */
const PLAIN_COMMAND_NAME = /^[A-Za-z0-9_\-./+]+$/;

/**
 * Characters that make displayed text differ from what runs: control characters (other than tab and
 * newline), format characters (bidi overrides, zero-width joiners) and Unicode line separators.
 */
const INVISIBLE_OR_CONTROL = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\p{Cf}\u2028\u2029]/u;

let parserPromise: Promise<Parser> | undefined;

/**
 * The tree-sitter parser, initialised once per process. A failed initialisation is not cached, so a
 * later call retries.
 */
export function getShellParser(): Promise<Parser> {
  parserPromise ??= (async () => {
    await Parser.init();
    // Read the grammar ourselves: given a path, web-tree-sitter uses a dynamic import('fs/promises'),
    // which Jest's CommonJS sandbox refuses.
    const grammar = await readFile(require.resolve('tree-sitter-bash/tree-sitter-bash.wasm'));
    const language = await Language.load(grammar);
    const parser = new Parser();
    parser.setLanguage(language);
    return parser;
  })().catch((error: unknown) => {
    parserPromise = undefined;
    throw error;
  });
  return parserPromise;
}

/**
 * Parses `command` into invocations. An array is taken as an argv as it is (after validation); a
 * string must reduce to clean invocations or the result says why not. Never throws for bad input;
 * rejects only if the WASM parser itself cannot be loaded.
 */
export async function parseCommand(command: string | string[]): Promise<ParsedCommand> {
  if (Array.isArray(command)) return validateArgv(command);
  if (typeof command !== 'string') return refuse('the command must be a string or an array of strings');
  const problem = rawStringProblem(command);
  if (problem) return refuse(problem);
  const parser = await getShellParser();
  const tree = parser.parse(command);
  if (!tree) return refuse('the command could not be parsed');
  try {
    return reduceProgram(tree.rootNode);
  } catch (error) {
    if (error instanceof Refusal) return refuse(error.message);
    throw error;
  } finally {
    tree.delete();
  }
}

/** Validates an argv given as an array: non-empty, strings only, nothing invisible, plain command name. */
export function validateArgv(argv: unknown[]): ParsedCommand {
  if (argv.length === 0) return refuse('the argument vector is empty');
  for (const [index, arg] of argv.entries()) {
    if (typeof arg !== 'string') return refuse(`argument ${index} is not a string`);
    if (arg.includes('\0')) return refuse(`argument ${index} contains a NUL byte`);
    if (INVISIBLE_OR_CONTROL.test(arg)) {
      return refuse(`argument ${index} contains a control or invisible formatting character`);
    }
  }
  const name = argv[0] as string;
  const nameProblem = commandNameProblem(name);
  if (nameProblem) return refuse(nameProblem);
  return { ok: true, invocations: [argv as string[]] };
}

class Refusal extends Error {}

function refuse(reason: string): ParsedCommand {
  return { ok: false, reason };
}

function rawStringProblem(command: string): string | undefined {
  if (command.trim() === '') return 'the command is empty';
  if (command.length > MAX_COMMAND_CHARS) return `the command is longer than ${MAX_COMMAND_CHARS} characters`;
  if (command.includes('\0')) return 'the command contains a NUL byte';
  if (command.includes('\r')) return 'the command contains a carriage return';
  if (INVISIBLE_OR_CONTROL.test(command)) {
    return 'the command contains a control or invisible formatting character (e.g. a bidi override or zero-width space)';
  }
  return undefined;
}

function commandNameProblem(name: string): string | undefined {
  if (name === '') return 'the command name is empty';
  if (!PLAIN_COMMAND_NAME.test(name)) {
    return `the command name ${JSON.stringify(name)} must be plain ASCII letters, digits and . _ - / +`;
  }
  return undefined;
}

function reduceProgram(root: Node): ParsedCommand {
  if (root.hasError) return refuse('the command is not valid shell syntax');
  const statements: Node[] = [];
  for (const child of root.children) {
    if (child.type === 'comment') throw new Refusal("a comment ('#') is not allowed: it can hide text from a reader");
    if (child.type === ';') throw new Refusal("';' joins several commands: use '&&' or separate tool calls");
    if (child.type === '&') throw new Refusal("'&' runs a command in the background, which is not allowed");
    if (!child.isNamed) throw new Refusal(`unexpected ${JSON.stringify(child.type)} between commands`);
    statements.push(child);
  }
  if (statements.length === 0) return refuse('the command is empty');
  if (statements.length > 1) {
    return refuse("several commands separated by newlines or ';' are not allowed: join them with '&&'");
  }
  const invocations: string[][] = [];
  collectStatement(statements[0] as Node, invocations);
  return { ok: true, invocations };
}

function collectStatement(node: Node, out: string[][]): void {
  if (node.type === 'command') {
    out.push(reduceCommand(node));
    return;
  }
  if (node.type === 'list') {
    for (const child of node.children) {
      if (child.type === '&&') continue;
      if (child.type === '||') throw new Refusal("'||' is not allowed: only '&&' may join commands");
      if (child.type === 'comment') throw new Refusal("a comment ('#') is not allowed: it can hide text from a reader");
      if (!child.isNamed) throw new Refusal(`${JSON.stringify(child.type)} is not allowed between commands`);
      collectStatement(child, out);
    }
    return;
  }
  throw new Refusal(describeUnsupported(node));
}

function reduceCommand(node: Node): string[] {
  const argv: string[] = [];
  for (const child of node.children) {
    if (child.type === 'command_name') {
      if (argv.length > 0) throw new Refusal('unexpected command name position');
      const name = reduceCommandName(child);
      const nameProblem = commandNameProblem(name);
      if (nameProblem) throw new Refusal(nameProblem);
      argv.push(name);
      continue;
    }
    if (argv.length === 0) throw new Refusal(describeUnsupported(child));
    argv.push(reduceWord(child));
  }
  if (argv.length === 0) throw new Refusal('a command without a command name is not allowed');
  return argv;
}

function reduceCommandName(node: Node): string {
  const parts = node.children;
  if (parts.length !== 1) throw new Refusal('the command name must be a single word');
  return reduceWord(parts[0] as Node);
}

/** Turns one shell word into its literal value, or refuses if the shell would do anything to it. */
function reduceWord(node: Node): string {
  switch (node.type) {
    case 'word':
    case 'number':
      return plainWord(node.text);
    case 'raw_string':
      return node.text.slice(1, -1);
    case 'string':
      return doubleQuoted(node);
    case 'concatenation':
      // A lone `{}` (find -exec's placeholder) is literal in bash: braces expand only around a ',' or '..'.
      if (node.text === '{}') return '{}';
      return node.children.map(reduceWord).join('');
    default:
      throw new Refusal(describeUnsupported(node));
  }
}

function plainWord(text: string): string {
  if (PLAIN_WORD.test(text)) return text;
  if (/[*?[\]]/.test(text)) return refuseWord(text, 'contains a glob pattern (* ? [ ]): quote it or list the files');
  if (/[{}]/.test(text)) return refuseWord(text, 'contains braces, which the shell may expand: quote it');
  // `HEAD~1` is literal; a tilde at the start of a word or after '=' / ':' expands to a home directory.
  if (/(^|[=:])~/.test(text))
    return refuseWord(text, 'contains a tilde, which the shell expands to a home directory: quote it or use a path');
  if (/^[A-Za-z0-9_\-./:=@%+,^~]+$/.test(text)) return text;
  if (text.includes('$')) return refuseWord(text, 'contains a $ expansion');
  if (text.includes('\\')) return refuseWord(text, 'contains a backslash escape: quote the word instead');
  if (/[^\x00-\x7F]/.test(text)) return refuseWord(text, 'contains non-ASCII characters outside quotes: quote it');
  return refuseWord(text, 'contains a character the shell treats specially: quote it');
}

function refuseWord(text: string, why: string): never {
  throw new Refusal(`the word ${JSON.stringify(text)} ${why}`);
}

function doubleQuoted(node: Node): string {
  for (const child of node.children) {
    if (child.type === '"' || child.type === 'string_content') continue;
    if (child.type === '$') throw new Refusal("a '$' inside double quotes is not allowed: use single quotes");
    throw new Refusal(`${describeUnsupported(child)} (inside double quotes; use single quotes for literal text)`);
  }
  // The text between the quotes, decoded by bash's rules: a backslash escapes only $ ` " \ and newline.
  const raw = node.text.slice(1, -1);
  let value = '';
  for (let i = 0; i < raw.length; i += 1) {
    const char = raw[i] as string;
    if (char === '\\' && i + 1 < raw.length) {
      const next = raw[i + 1] as string;
      if ('$`"\\'.includes(next)) {
        value += next;
        i += 1;
        continue;
      }
      if (next === '\n') {
        i += 1;
        continue;
      }
    }
    if (char === '$' || char === '`') {
      throw new Refusal('an expansion inside double quotes is not allowed: use single quotes');
    }
    value += char;
  }
  return value;
}

const UNSUPPORTED_SYNTAX = new Map(
  Object.entries({
    pipeline: "a pipe ('|') is not allowed: run the commands separately",
    subshell: "a subshell '( … )' is not allowed",
    compound_statement: "a command group '{ …; }' is not allowed",
    redirected_statement: "a redirection ('>', '<', '2>&1' …) is not allowed: output is captured for you",
    file_redirect: "a redirection ('>', '<', '2>&1' …) is not allowed: output is captured for you",
    heredoc_redirect: "a here-document ('<<') is not allowed",
    herestring_redirect: "a here-string ('<<<') is not allowed",
    command_substitution: 'command substitution ($(…) or backticks) is not allowed',
    process_substitution: 'process substitution (<(…) or >(…)) is not allowed',
    simple_expansion: 'parameter expansion ($NAME) is not allowed',
    expansion: 'parameter expansion (${…}) is not allowed',
    arithmetic_expansion: 'arithmetic expansion ($((…))) is not allowed',
    brace_expression: 'brace expansion ({a..b}) is not allowed',
    variable_assignment: 'a variable assignment (NAME=value) is not allowed: commands run with a fixed environment',
    declaration_command: 'a declaration (export, declare, local …) is not allowed',
    unset_command: 'unset is not allowed',
    negated_command: "negation ('!') is not allowed",
    comment: "a comment ('#') is not allowed: it can hide text from a reader",
    ansi_c_string: "ANSI-C quoting ($'…') is not allowed",
    translated_string: 'locale translation ($"…") is not allowed',
    $: 'a \'$\' expansion or $"…" locale string is not allowed',
    test_command: 'a test expression ([[ … ]]) is not allowed',
    if_statement: 'an if statement is not allowed',
    while_statement: 'a loop is not allowed',
    for_statement: 'a loop is not allowed',
    c_style_for_statement: 'a loop is not allowed',
    case_statement: 'a case statement is not allowed',
    function_definition: 'a function definition is not allowed',
  }),
);

function describeUnsupported(node: Node): string {
  if (node.type === 'redirected_statement' && node.descendantsOfType('heredoc_redirect').length > 0) {
    return UNSUPPORTED_SYNTAX.get('heredoc_redirect') as string;
  }
  return UNSUPPORTED_SYNTAX.get(node.type) ?? `unsupported shell syntax (${node.type})`;
}
