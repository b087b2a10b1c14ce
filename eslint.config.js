import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'data/**', 'coverage/**', 'bench/results/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-properties': ['error', { object: 'process', property: 'env', message: 'Read configuration through src/shared/config.ts only.' }],
    },
  },
  {
    // The executable sets Node's own UV_THREADPOOL_SIZE before the configuration is loaded.
    files: ['src/shared/config.ts', 'src/main/flood-archive.cts', 'test/**', 'bench/**', 'vitest.config.ts'],
    rules: { 'no-restricted-properties': 'off' },
  },
  {
    // CommonJS configuration files (dependency-cruiser's).
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { module: 'writable', require: 'readonly' } },
  },
  {
    // The explorer page's scripts run in browsers, with Leaflet, uPlot and topojson-client loaded before them.
    files: ['web/**/*.js'],
    languageOptions: {
      sourceType: 'module',
      globals: Object.fromEntries(
        ['window', 'document', 'location', 'history', 'navigator', 'performance', 'fetch', 'getSelection', 'AbortController', 'TextDecoder', 'setTimeout', 'clearTimeout', 'Node', 'Option', 'URLSearchParams', 'L', 'uPlot', 'topojson'].map((name) => [name, 'readonly']),
      ),
    },
  },
  {
    // Tests read JSON answers whose shape the assertions themselves check.
    files: ['test/**', 'bench/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
