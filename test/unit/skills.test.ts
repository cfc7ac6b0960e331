import { filterSkillsByRelevance, relevanceKeywords, relevanceScore } from '../../activities/context/sections-dynamic';
import { InvalidSkillError, parseSkillMarkdown, SKILL_BODY_MAX_CHARS } from '../../activities/store/skills';

/** SKILL.md parsing and the skills relevance filter (pure). */
describe('skills', () => {
  test('SKILL.md: front matter name, description, category (quotes and comments allowed), then the body', () => {
    const text =
      '---\nname: csv-import\n# a comment\ndescription: "Import CSV files: safely"\ncategory: data\n---\n\n# Steps\n1. Validate.\n';
    expect(parseSkillMarkdown(text, 'x/SKILL.md')).toEqual({
      name: 'csv-import',
      description: 'Import CSV files: safely',
      category: 'data',
      body: '# Steps\n1. Validate.',
    });
    expect(parseSkillMarkdown('---\nname: a\ndescription: b\n---\n', 's').category).toBe('');
  });

  test('bad SKILL.md files are refused naming the file and every problem', () => {
    const problems = (text: string): string[] => {
      try {
        parseSkillMarkdown(text, 'skills/x/SKILL.md');
      } catch (error) {
        expect(error).toBeInstanceOf(InvalidSkillError);
        expect((error as Error).message).toContain('skills/x/SKILL.md');
        return (error as InvalidSkillError).problems;
      }
      throw new Error('accepted');
    };
    expect(problems('no front matter')).toEqual([
      'missing front matter: start the file with ---, name:, description:, ---',
    ]);
    expect(problems('---\nname: Has Spaces\n---\nbody')).toEqual([
      `name: "Has Spaces" must be 1-64 lowercase letters, digits, '-' or '_'`,
      'description: missing',
    ]);
    expect(problems('---\nname: ok\ndescription: d\njust words\n---\n')).toEqual([
      'front matter line "just words" is not "key: value"',
    ]);
    expect(problems(`---\nname: ok\ndescription: d\n---\n${'x'.repeat(SKILL_BODY_MAX_CHARS + 1)}`)).toEqual([
      `body: longer than ${SKILL_BODY_MAX_CHARS} characters`,
    ]);
  });

  test('relevance: query words longer than 2 characters, matched as whole words of name, category and description', () => {
    expect([...relevanceKeywords('Fix a CSV to-do in the importer, ok?')]).toEqual([
      'fix',
      'csv',
      'to-do',
      'the',
      'importer',
    ]);
    const skill = { name: 'csv-import', category: 'data', description: 'Import CSV files into the warehouse' };
    expect(relevanceScore(skill, relevanceKeywords('csv warehouse data'))).toBe(3);
    // Whole words only: "import" does not match "importer".
    expect(relevanceScore(skill, relevanceKeywords('importer'))).toBe(0);
  });

  test('the filter keeps the top 30 by score, ties in the given order; no keyword keeps the given order', () => {
    const skills = Array.from({ length: 40 }, (_, i) => ({
      name: `s${i}`,
      description: i % 10 === 0 ? 'deploy kubernetes clusters' : i % 5 === 0 ? 'deploy things' : 'other work',
    }));
    const top = filterSkillsByRelevance(skills, 'deploy kubernetes');
    expect(top).toHaveLength(30);
    expect(top.slice(0, 8).map((s) => s.name)).toEqual(['s0', 's10', 's20', 's30', 's5', 's15', 's25', 's35']);
    expect(top[8]!.name).toBe('s1');
    expect(filterSkillsByRelevance(skills, 'a to', 3).map((s) => s.name)).toEqual(['s0', 's1', 's2']);
  });
});
