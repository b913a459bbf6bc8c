#!/usr/bin/env python3
"""Import circles between the modules of each crate (issue 36's measure; usage: scripts/circles.py [REPO]).

A module is a source file under a crate's src/ (`a/mod.rs` and `a.rs` are module `a`). Module A
depends on module B when A's non-test code names a path into B: `crate::b::…`, `super::…` or
`self::…` resolved from A, in a `use` or inline. A path into a module's own children is not a
dependency (a parent re-exporting or calling its children is how Rust modules are built); a
child naming its parent is. Test code is left out as scripts/loc.py leaves it out (files named
tests.rs or *_tests.rs, tests/ directories, and `#[cfg(test)]` items). A circle is a strongly
connected set of two or more modules: each reaches every other by such paths. Prints each
circle with one path around it and the count; exits 1 when there is any. The test
crates/shipping/tests/shipping/circles.rs applies the same rules in `cargo test`."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rust_source import nontest_lines  # noqa: E402

root = sys.argv[1] if len(sys.argv) > 1 else '.'


def strip_tests(text):
    """The text without test items and comments."""
    return '\n'.join(l.split(' // ')[0] for l in nontest_lines(text) if not l.strip().startswith('//'))


def module_of(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ('lib', 'main') and len(rel) == 1:
        return ()
    if rel[-1] == 'mod':
        rel = rel[:-1]
    return tuple(rel)


# Groups of `a::b::{c, d::e}` are flattened into a::b::c and a::b::d::e.
def expand(path):
    m = re.match(r'^(.*?)\{(.*)\}$', path)
    if not m:
        return [path]
    head, body = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ''
    for ch in body:
        if ch == ',' and depth == 0:
            parts.append(cur)
            cur = ''
            continue
        depth += ch == '{'
        depth -= ch == '}'
        cur += ch
    parts.append(cur)
    return [q for p in parts if p.strip() for q in expand(head + p.strip())]


PATH = re.compile(r'\b((?:crate|super|self)(?:::(?:[A-Za-z_][A-Za-z0-9_]*|\*))+(?:::\{[^;]*?\})?)', re.S)


def deps(text, me, modules):
    out = set()
    for raw in PATH.findall(text):
        for path in expand(re.sub(r'\s+', '', raw)):
            segs = path.split('::')
            if segs[0] == 'crate':
                base, rest = (), segs[1:]
            else:
                base = me
                rest = segs
                while rest and rest[0] in ('super', 'self'):
                    if rest[0] == 'super':
                        base = base[:-1]
                    rest = rest[1:]
            # The longest module the path names.
            target = base
            for s in rest:
                if target + (s,) in modules:
                    target = target + (s,)
                else:
                    break
            if target == me or target[:len(me)] == me:
                continue  # itself or its own children
            out.add(target)
    return out


def circles_of(graph):
    index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def cycle_path(graph, comp):
    """The shortest path from the circle's first module back to it."""
    inside, start = set(comp), comp[0]
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return list(reversed(path)) + [start]
                if w in inside and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return comp


total = 0
crates = [('crates/' + c, c) for c in sorted(os.listdir(os.path.join(root, 'crates')))] + [('e2e', 'e2e')]
for d, name in crates:
    src = os.path.join(root, d, 'src')
    if not os.path.isdir(src):
        continue
    files = {}
    for dp, _, fn in os.walk(src):
        for f in fn:
            if f.endswith('.rs'):
                p = os.path.join(dp, f)
                files[module_of(src, p)] = p
    modules = set(files)
    graph = {}
    for m, p in files.items():
        if os.path.basename(p) == 'tests.rs' or p.endswith('_tests.rs') or '/tests/' in p[len(src):]:
            continue
        graph[m] = deps(strip_tests(open(p, encoding='utf-8').read()), m, modules) & modules
    for comp in circles_of(graph):
        total += 1
        show = lambda m: '::'.join(m) or 'lib'
        path = cycle_path(graph, comp)
        print(f'{name}: {len(comp)} modules ({", ".join(show(m) for m in comp)}), e.g. ' + ' → '.join(show(m) for m in path))
print(f'import circles: {total}')
sys.exit(1 if total else 0)
