/**
 * The engine's floors (docs/architecture.md §1 rule 9): a module imports only from its own floor or the
 * floors below it, and no two modules import each other, however indirectly (type-only and lazy imports
 * included: each is a dependency of the code). The worker threads load only what their tasks need: no
 * minimatch, no child_process at start-up (each cost milliseconds of every thread's boot).
 * A new upward import or circle fails here with the import that made it.
 */
import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const ENGINE = path.resolve(import.meta.dirname);
const SHARED = path.resolve(ENGINE, '../../shared');

/** Lowest first. A room is a folder (`repo/`) or a file at the engine's top (`errors.ts`). */
const FLOORS: string[][] = [
  ['errors.ts', 'native.ts', 'aligned.ts', 'bufferPool.ts', 'pauseGate.ts'],
  ['crypto/', 'chunk/', 'compress/'],
  ['backend/'],
  ['repo/', 'operations.ts'],
  ['scan/', 'alarm/'],
  ['pool/'],
  ['backup/', 'restore/', 'check/', 'repair/', 'snapshot/'],
  ['restoretest/', 'speedtest/'],
  ['workers/'],
  ['catalog/'],
  ['schedule/'],
  ['index.ts'],
];

interface Import {
  /** Engine-relative path of the imported module, or the package / node: name. */
  to: string;
  /** Loaded when the importer is: a static import of values (not `import type`, not `import()`). */
  eager: boolean;
}

function engineFiles(dir = ENGINE): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...engineFiles(p));
    else if (/\.(ts|mts)$/.test(e.name) && !/\.test\.ts$/.test(e.name)) out.push(p);
  }
  return out;
}

const rel = (abs: string) => path.relative(ENGINE, abs).split(path.sep).join('/');

function resolve(from: string, spec: string): string {
  if (!spec.startsWith('.')) return spec;
  const base = path.resolve(path.dirname(from), spec).replace(/\.js$/, '');
  for (const c of [base + '.ts', base + '.mts', base, path.join(base, 'index.ts')])
    if (fs.existsSync(c) && fs.statSync(c).isFile()) return c;
  throw new Error(`${rel(from)}: cannot resolve ${spec}`);
}

function importsOf(file: string): Import[] {
  const src = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const out: Import[] = [];
  const add = (spec: string, eager: boolean) => out.push({ to: resolve(file, spec), eager });
  const visit = (n: ts.Node) => {
    if (ts.isImportDeclaration(n) && ts.isStringLiteral(n.moduleSpecifier)) {
      const c = n.importClause;
      const named = c?.namedBindings && ts.isNamedImports(c.namedBindings) ? c.namedBindings : undefined;
      const typeOnly = !!c?.isTypeOnly || (!!named && !c?.name && named.elements.every((e) => e.isTypeOnly));
      add(n.moduleSpecifier.text, !typeOnly);
    } else if (ts.isExportDeclaration(n) && n.moduleSpecifier && ts.isStringLiteral(n.moduleSpecifier)) {
      add(n.moduleSpecifier.text, !n.isTypeOnly);
    } else if (
      ts.isCallExpression(n) &&
      n.expression.kind === ts.SyntaxKind.ImportKeyword &&
      n.arguments.length === 1 &&
      ts.isStringLiteral(n.arguments[0])
    ) {
      add(n.arguments[0].text, false);
    } else if (
      ts.isImportTypeNode(n) &&
      ts.isLiteralTypeNode(n.argument) &&
      ts.isStringLiteral(n.argument.literal)
    ) {
      add(n.argument.literal.text, false);
    }
    ts.forEachChild(n, visit);
  };
  visit(src);
  return out;
}

const graph = new Map<string, Import[]>(engineFiles().map((f) => [f, importsOf(f)]));

function floorOf(file: string): number {
  const r = rel(file);
  const room = r.includes('/') ? r.slice(0, r.indexOf('/') + 1) : r;
  const i = FLOORS.findIndex((f) => f.includes(room));
  if (i < 0) throw new Error(`${r}: its room ${room} is on no floor (add it to FLOORS)`);
  return i;
}

describe('the engine’s layering', () => {
  it('every import stays on its floor or goes down, and never leaves the engine but for src/shared', () => {
    const upward: string[] = [];
    const outside: string[] = [];
    for (const [file, imports] of graph)
      for (const { to } of imports) {
        if (!path.isAbsolute(to)) continue; // a package or node: module
        if (!to.startsWith(ENGINE + path.sep)) {
          if (!to.startsWith(SHARED + path.sep)) outside.push(`${rel(file)} -> ${path.relative(ENGINE, to)}`);
          continue;
        }
        const edge = `${rel(file)} -> ${rel(to)}`;
        if (floorOf(to) > floorOf(file)) upward.push(edge);
      }
    expect(outside).toEqual([]);
    expect(upward).toEqual([]);
  });

  it('no module imports itself through others', () => {
    // Tarjan's strongly connected components over every import (type-only and lazy ones too)
    const index = new Map<string, number>();
    const low = new Map<string, number>();
    const stack: string[] = [];
    const onStack = new Set<string>();
    const circles: string[][] = [];
    let next = 0;
    const connect = (v: string) => {
      index.set(v, next);
      low.set(v, next++);
      stack.push(v);
      onStack.add(v);
      for (const { to: w } of graph.get(v) ?? []) {
        if (!graph.has(w)) continue;
        if (!index.has(w)) {
          connect(w);
          low.set(v, Math.min(low.get(v)!, low.get(w)!));
        } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
      if (low.get(v) === index.get(v)) {
        const members: string[] = [];
        let w: string;
        do {
          w = stack.pop()!;
          onStack.delete(w);
          members.push(rel(w));
        } while (w !== v);
        if (members.length > 1 || graph.get(v)!.some((i) => i.to === v)) circles.push(members.sort());
      }
    };
    for (const f of graph.keys()) if (!index.has(f)) connect(f);
    expect(circles).toEqual([]);
  });

  it('a worker thread loads neither minimatch nor child_process when it starts', () => {
    const entry = path.join(ENGINE, 'workers/pipelineWorker.ts');
    const loaded = new Set<string>();
    const pending = [entry];
    while (pending.length) {
      const f = pending.pop()!;
      if (loaded.has(f)) continue;
      loaded.add(f);
      for (const i of graph.get(f) ?? []) if (i.eager) pending.push(i.to);
    }
    const heavy = [...loaded].filter((m) => /^(node:)?child_process$|^minimatch$/.test(m));
    expect(heavy).toEqual([]);
    expect(loaded.size).toBeGreaterThan(5); // the walk followed the worker's imports
  });
});
