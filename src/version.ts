// Kept equal to package.json's version by test/integration/cli.test.ts.
export const VERSION = '0.1.0';
