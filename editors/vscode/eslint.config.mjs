// ESLint for the extension (flat config): the TypeScript recommended rules over src/ and test/, on top of tsc's
// strict type check (npm run lint runs both). Rules are relaxed only where the code has a reason: tests talk
// to loosely typed JSON (any), and the webview and fake host use require() for late binding.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'out/**', 'node_modules/**', 'e2e-artifacts/**'] },
  js.configs.recommended,
  { files: ['*.mjs', 'scripts/**/*.js'], languageOptions: { globals: globals.node } },
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      // Unused names are errors, except deliberately ignored parameters and caught errors named with a leading _.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  {
    files: ['test/**/*.ts'],
    rules: {
      // Protocol payloads and recorded requests are untyped JSON in the tests.
      '@typescript-eslint/no-explicit-any': 'off',
      // The tests patch modules (child_process.spawn, the vscode fake) through require().
      '@typescript-eslint/no-require-imports': 'off',
    },
  },
);
