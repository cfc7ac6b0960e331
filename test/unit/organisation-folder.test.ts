import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  InvalidOrganisationError,
  ORG_DOCUMENT_MAX_CHARS,
  readOrganisationFolder,
} from '../../activities/store/organisations';

/**
 * An organisation folder is checked by the same rules as an API request (`organisationProblems`):
 * every problem named in one error, the folder's path first; a good folder reads as before.
 */
describe('organisation folder', () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(path.join(os.tmpdir(), 'da-org-'));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));
  const write = (file: string, text: string) => {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), text);
  };

  test('a good folder: documents trimmed, names from the profile heading, skills read', async () => {
    write('CONTEXT.md', '\nWe build parsers.\n');
    write('users/hana.md', '# Hana Ito\nPrefers numbers.\n');
    write('users/bo.md', 'No heading.');
    write('skills/csv/SKILL.md', '---\nname: csv\ndescription: Parse CSV\n---\nCheck the header.');
    expect(await readOrganisationFolder(root, 'acme')).toEqual({
      name: 'acme',
      context: 'We build parsers.',
      announcements: '',
      users: [
        { handle: 'bo', name: 'bo', profile: 'No heading.' },
        { handle: 'hana', name: 'Hana Ito', profile: '# Hana Ito\nPrefers numbers.' },
      ],
      skills: [{ name: 'csv', description: 'Parse CSV', category: '', body: 'Check the header.' }],
    });
  });

  test('every problem in one error naming the folder; an empty folder is refused', async () => {
    write('CONTEXT.md', 'x'.repeat(ORG_DOCUMENT_MAX_CHARS + 1));
    write('users/-bad.md', 'p');
    const error = await readOrganisationFolder(root, 'Bad Name').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidOrganisationError);
    expect((error as InvalidOrganisationError).message).toMatch(new RegExp(`^organisation folder ${root}: `));
    expect((error as InvalidOrganisationError).problems).toEqual([
      `name "Bad Name" must be 1-63 lowercase letters, digits, '-' or '_'`,
      `context (CONTEXT.md) is longer than ${ORG_DOCUMENT_MAX_CHARS} characters`,
      `user "-bad": a handle is 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit`,
    ]);
    const empty = mkdtempSync(path.join(os.tmpdir(), 'da-org-empty-'));
    try {
      await expect(readOrganisationFolder(empty, 'empty')).rejects.toThrow(
        /holds none of CONTEXT.md, ANNOUNCEMENTS.md, users\/\*.md, skills\/\*\/SKILL.md/,
      );
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
