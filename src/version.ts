// Kept equal to package.json's version by test/unit/cli.test.ts.
export const VERSION = '0.1.0';
