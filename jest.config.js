/** Jest runs the TypeScript sources as ES modules through ts-jest. */
export default {
  // Node's, failing a test file that leaves a handle open (see the file).
  testEnvironment: '<rootDir>/test/utils/open-handles-environment.cjs',
  extensionsToTreatAsEsm: ['.ts'],
  roots: ['<rootDir>/libs', '<rootDir>/test', '<rootDir>/apps', '<rootDir>/docs/samples'],
  testMatch: ['**/*.spec.ts', '**/*.e2e-spec.ts', '**/docs/samples/testing.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
  moduleNameMapper: {
    '^geneva-drive$': '<rootDir>/libs/geneva-drive/src/index.ts',
    '^geneva-drive/testing$': '<rootDir>/libs/geneva-drive/src/testing/index.ts',
    '^geneva-drive/dashboard$': '<rootDir>/libs/geneva-drive/src/dashboard/index.ts',
    '^geneva-drive/terminus$': '<rootDir>/libs/geneva-drive/src/terminus/index.ts',
    '^geneva-drive/metrics$': '<rootDir>/libs/geneva-drive/src/metrics/index.ts',
    '^geneva-drive/tracing$': '<rootDir>/libs/geneva-drive/src/tracing/index.ts',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: '<rootDir>/tsconfig.spec.json' }],
  },
  globalSetup: '<rootDir>/test/utils/global-setup.ts',
  // A fresh checkout has no timings: the long files go first (see the file).
  testSequencer: '<rootDir>/test/utils/slow-suites-first.cjs',
  reporters: ['default', '<rootDir>/test/utils/summary-reporter.cjs'],
  testTimeout: 60000,
  maxWorkers: 2,
};
