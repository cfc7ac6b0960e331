/**
 * Two projects: `unit` (pure modules, no services) and `integration` (a real Temporal dev server and
 * a real PostgreSQL or the embedded PGlite, provisioned by test/support/global-setup.ts).
 * Jest runs TypeScript through SWC (transpile only; `npm run typecheck` is the type gate).
 */
/** linkedom (web_fetch's DOM) ships CommonJS, but its selector and entity packages are ESM-only. */
const LINKEDOM_ESM_DEPENDENCIES = [
  'css-select',
  'css-what',
  'domutils',
  'domhandler',
  'dom-serializer',
  'entities',
  'nth-check',
  'boolbase',
  'domelementtype',
  'cssomnom',
];
/**
 * ESM-only packages the tests load (Jest runs CommonJS): SWC turns their `import`/`export` into
 * `require`, and Jest's default ignore pattern lets them through.
 */
const ESM_ONLY_PACKAGES = [
  'eventsource',
  'eventsource-parser',
  'openid-client',
  'oauth4webapi',
  'jose',
  ...LINKEDOM_ESM_DEPENDENCIES,
];
const transform = {
  '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2023' } }],
  [`/node_modules/(${ESM_ONLY_PACKAGES.join('|')})/.+\\.js$`]: [
    '@swc/jest',
    { jsc: { target: 'es2023' }, module: { type: 'commonjs' } },
  ],
};
const transformIgnorePatterns = [`/node_modules/(?!(${ESM_ONLY_PACKAGES.join('|')})/)`];

module.exports = {
  testTimeout: 120_000,
  // Quiet by default: the suite summary and, for a failing test, its failure (every failing test is
  // listed, whatever the number of suites) and its file's console output. JEST_VERBOSE=1 brings back
  // per-file results and all console output.
  reporters: process.env.JEST_VERBOSE
    ? ['default']
    : [['summary', { summaryThreshold: 0 }], '<rootDir>/test/support/failing-output-reporter.js'],
  // Temporal's native connections close asynchronously after a worker shuts down.
  forceExit: true,
  projects: [
    {
      displayName: 'unit',
      testEnvironment: 'node',
      transform,
      transformIgnorePatterns,
      testMatch: ['<rootDir>/test/unit/**/*.test.ts'],
    },
    {
      displayName: 'integration',
      testEnvironment: 'node',
      transform,
      transformIgnorePatterns,
      // The cluster test (the production Temporal server and the whole topology, minutes) is its own
      // command, `npm run test:cluster`: see the README's cluster section for why it is not in `npm test`.
      testMatch: process.env.TEST_CLUSTER
        ? ['<rootDir>/test/cluster/**/*.test.ts']
        : [
            '<rootDir>/test/workflow/**/*.test.ts',
            '<rootDir>/test/e2e/**/*.test.ts',
            '<rootDir>/test/api/**/*.test.ts',
          ],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
    },
  ],
};
