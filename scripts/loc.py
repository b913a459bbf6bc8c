#!/usr/bin/env python3
"""Non-test Rust lines per crate group (issue 36's measure; usage: scripts/loc.py [REPO]): skips tests/ benches/ dirs, files named tests.rs or *_tests.rs,
and everything from a `#[cfg(test)]` line to the end of its item (brace-matched)."""
import os, re, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rust_source import nontest_lines
root = sys.argv[1] if len(sys.argv) > 1 else '.'
CORE = 'model config queue session plugins api cache runtime binder dra'.split()
STAND = 'testkit sim actors e2e'.split()
def nontest(path):
    lines = nontest_lines(open(path, encoding='utf-8').read())
    return sum(1 for l in lines if l.strip() and not l.strip().startswith('//'))
per_crate, big = {}, []
dirs = [('crates/' + c, c) for c in os.listdir(os.path.join(root, 'crates'))] + [('e2e', 'e2e')]
for d, name in dirs:
    src = os.path.join(root, d, 'src')
    n = 0
    for dp, dn, fn in os.walk(src):
        if '/tests' in dp[len(src):]: continue
        for f in fn:
            if not f.endswith('.rs') or f == 'tests.rs' or f.endswith('_tests.rs'): continue
            p = os.path.join(dp, f); k = nontest(p); n += k
            total = sum(1 for _ in open(p))
            if total > 1500 or k > 1000: big.append((k, total, p[len(root)+1:]))
    per_crate[name] = n
core = sum(per_crate.get(c, 0) for c in CORE); stand = sum(per_crate.get(c, 0) for c in STAND)
stores = ['crates/cache/src/index.rs', 'crates/sim/src/store.rs', 'crates/testkit/src/apiserver/store.rs', 'crates/runtime/src/cluster.rs']
print(f'core (non-test, non-blank, non-comment) {core}')
print(f'stand-ins {stand}')
print('per crate', dict(sorted(per_crate.items())))
def lines_of(rel):
    """Lines of a store: the file, or every file of the directory it became."""
    path = os.path.join(root, rel)
    if os.path.exists(path):
        return sum(1 for _ in open(path))
    d = path[:-3]
    return sum(sum(1 for _ in open(os.path.join(dp, f))) for dp, _, fn in os.walk(d) for f in fn if f.endswith('.rs'))
print('stores (lines, with tests)', {s: lines_of(s) for s in stores})
for k, t, p in sorted(big, reverse=True): print(f'  big: {p} non-test {k} total {t}')
