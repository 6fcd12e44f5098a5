// Makes `require('vscode')` resolve to the fake host (test/fakeVscode.ts) for tests that load extension
// modules under plain node. Import it before any module that imports `vscode`.
import Module = require('node:module');

const M = Module as unknown as { _resolveFilename: (req: string, ...rest: unknown[]) => string };
const original = M._resolveFilename;
M._resolveFilename = function (request: string, ...rest: unknown[]) {
  if (request === 'vscode') return require.resolve('./fakeVscode');
  return original.call(this, request, ...rest);
};
