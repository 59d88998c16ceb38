#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Call cycles between the C files of one layer.

    contrib/tools/file-cycles.py [DIR...]      (default: writeback)

A file A calls file B when A's text names a function B defines (not
static, defined at the start of a line: the tree's style), to call it or
as a pointer; `struct NAME` is not a use of a function NAME.  Prints each
strongly connected set of two or more files, with the calls that make it,
and exits 1 if there is one.  Textual, so a name in a comment counts: good
enough for a layer whose functions all carry its prefix.

One kind of cycle is allowed: two files that say, in a comment of one of
them, that they are an owner and its worker ("ctx.c and this file call
each other, an owner/worker pair", or "This file and uring.c call ...":
an owner starts a thread or transport, which reports back).  Such a pair
is printed as a pair and does not fail the check; a set of three or more
files always does, named pairs or not.
"""
import os
import re
import sys

DEF = re.compile(r'^(?!static\b)[A-Za-z_][\w \t\*]*?\b([a-z_][a-z0-9_]*)\((?![^)]*\);)', re.M)
COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)
# "X.c and this file call each other, an owner/worker pair", or the other way round
PAIR = re.compile(r'\b(?:([\w-]+\.c) and this file|this file and ([\w-]+\.c)) call each other,'
                  r' an owner/worker pair', re.I)


def named_pairs(path):
    """The files @path says it is an owner/worker pair with (basenames)."""
    with open(path) as f:
        # comment lines joined: "...\n * ..." reads as one sentence
        text = re.sub(r'\s*\n\s*(?:\*(?!/)|//)?\s*', ' ', f.read())
    return {a or b for a, b in PAIR.findall(text)}


def defs_and_text(path):
    with open(path) as f:
        text = COMMENT.sub(' ', f.read())
    names = set()
    for m in DEF.finditer(text):
        line_end = text.find('\n', m.start())
        # a definition: the next non-blank line after the signature opens a body
        rest = text[m.start():m.start() + 2000]
        if re.match(r'[^;{]*\)\s*(__attribute__\(\(.*?\)\)\s*)?\{', rest, re.S):
            names.add(m.group(1))
        del line_end
    return names, text


def graph(dirs):
    files = {}
    for d in dirs:
        for n in sorted(os.listdir(d)):
            if n.endswith('.c'):
                files[os.path.join(d, n)] = defs_and_text(os.path.join(d, n))
    edges = {f: {} for f in files}
    for a, (_, text) in files.items():
        # a call or a function pointer, not a struct of the same name
        words = set(re.findall(r'(?<!struct )\b([a-z_][a-z0-9_]*)\b', text))
        for b, (names, _) in files.items():
            if a != b:
                used = sorted(words & names)
                if used:
                    edges[a][b] = used
    return edges


def sccs(edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
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
            out.append(sorted(comp))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return [c for c in out if len(c) > 1]


def is_named_pair(comp):
    """Whether @comp is two files one of which names the other its owner/worker pair."""
    if len(comp) != 2:
        return False
    a, b = comp
    return (os.path.basename(b) in named_pairs(a) or
            os.path.basename(a) in named_pairs(b))


def main():
    sys.setrecursionlimit(10000)
    dirs = sys.argv[1:] or ['writeback']
    edges = graph(dirs)
    cycles = []
    for comp in sccs(edges):
        pair = is_named_pair(comp)
        if not pair:
            cycles.append(comp)
        print('%s: %s' % ('pair (owner/worker, named)' if pair else 'cycle',
                          ' '.join(os.path.basename(f) for f in comp)))
        for a in comp:
            for b in comp:
                if b in edges[a]:
                    print('  %s -> %s: %s' % (os.path.basename(a), os.path.basename(b),
                                             ', '.join(edges[a][b])))
    if not cycles:
        print('no cycles in %s' % ' '.join(dirs))
    return 1 if cycles else 0


if __name__ == '__main__':
    sys.exit(main())
