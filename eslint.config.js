// @ts-check
const tseslint = require('typescript-eslint');
/** Turns off every ESLint rule that would fight the formatter (Prettier owns layout; ESLint owns correctness). */
const prettierCompatible = require('eslint-config-prettier/flat');

/** Node built-ins and I/O libraries: never inside workflows/ (deterministic, bundled by Temporal). */
const NODE_AND_IO_MODULES = [
  'fs',
  'fs/promises',
  'path',
  'os',
  'child_process',
  'net',
  'http',
  'https',
  'crypto',
  'worker_threads',
  'dns',
  'stream',
  'pg',
  'kysely',
  '@anthropic-ai/sdk',
  'openai',
  'tiktoken',
  '@temporalio/activity',
  '@temporalio/worker',
  '@temporalio/client',
];

module.exports = tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', '.data/**', '.tools/**', 'coverage/**', '**/*.js'] },
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: __dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
      ],
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      eqeqeq: ['error', 'always'],
    },
  },
  {
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: NODE_AND_IO_MODULES.flatMap((name) => [
            { name, message: 'Workflows must be deterministic: do I/O in an activity.' },
            { name: `node:${name}`, message: 'Workflows must be deterministic: do I/O in an activity.' },
          ]),
          patterns: [
            {
              group: ['../activities/*', '../activities'],
              allowTypeImports: true,
              message: 'Workflows import activities as types only.',
            },
          ],
        },
      ],
    },
  },
  {
    // Prompt text is pure: the workflow bundle imports it.
    files: ['prompts/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: NODE_AND_IO_MODULES.flatMap((name) => [
            { name, message: 'Prompt modules are pure text: no I/O.' },
            { name: `node:${name}`, message: 'Prompt modules are pure text: no I/O.' },
          ]),
        },
      ],
    },
  },
  prettierCompatible,
);
