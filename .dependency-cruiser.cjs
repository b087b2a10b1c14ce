// The import graph's rules, checked by `npm run lint` (docs/testing.md). Type-only imports
// count: a cycle through types still ties two modules together.

/** The entry points and their wiring: the processes' mains and what builds and starts a runtime. */
const ENTRY_POINTS = '^src/main/';

/** The only modules that build a runtime: the command line and its commands (src/main/cli/), the module they load what they run from, and the worker thread's main. */
const RUNTIME_BUILDERS = '^src/main/(cli|cli/[^/]+|commandModules|workerThread)\\.ts$';

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'Modules that import each other, directly or around a loop, cannot be understood, tested or moved apart.',
      severity: 'error',
      from: { path: '^(src|jobs|bench|infra|test)/' },
      to: { circular: true },
    },
    {
      name: 'runtime-only-in-entry-points',
      comment:
        'src/main/runtime.ts builds every part of a process; the modules below the entry points take the narrow deps they declare instead. ' +
        'Tests build runtimes as the entry points do.',
      severity: 'error',
      from: { path: '^(src|jobs|bench|infra)/', pathNot: RUNTIME_BUILDERS },
      to: { path: '^src/main/runtime\\.ts$' },
    },
    {
      name: 'entry-points-not-imported-below',
      comment: 'The modules below the entry points never import them, so the entry points and their wiring can live apart from what they start.',
      severity: 'error',
      from: { path: '^(src|jobs|bench|infra)/', pathNot: ENTRY_POINTS },
      to: { path: ENTRY_POINTS },
    },
    {
      name: 'no-package-internals',
      comment:
        "Another package's sources, or a file deep inside its build output, are not its interface: they move or vanish in any release. " +
        'Import the package, or a subpath it exports.',
      severity: 'error',
      from: {},
      to: {
        path: [
          'node_modules/[^@/][^/]*/src/',
          'node_modules/@[^/]+/[^/]+/src/',
          'node_modules/[^@/][^/]*/(dist|lib|build)[a-z-]*/[^/]+/[^/]+/',
          'node_modules/@[^/]+/[^/]+/(dist|lib|build)[a-z-]*/[^/]+/[^/]+/',
        ],
        // A subpath the package exports (`@smithy/core/protocols`) resolves to its submodule's index there.
        pathNot: ['node_modules/@smithy/core/dist-[a-z]+/submodules/[a-z-]+/index\\.'],
      },
    },
    {
      name: 'not-to-unresolvable',
      comment: 'An import that resolves to nothing (a typo, a missing package, a subpath the package does not export).',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.d.ts', '.js', '.mjs', '.cjs', '.json'],
    },
  },
};
