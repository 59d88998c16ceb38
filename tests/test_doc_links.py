"""Every relative link of the README, doc/ and the results' READMEs leads
somewhere: the file exists, and an anchor (#...) names a heading of the
page it points into, as GitHub makes heading anchors.  No mount, no build.
"""

import os
import re
import subprocess

import util

LINK = re.compile(r'!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
FENCE = re.compile(r'^(```|~~~)')


def markdown_files():
    r = subprocess.run(['git', '-C', util.REPO, 'ls-files', '--cached', '--others',
                        '--exclude-standard', '--', 'README.md', 'doc', 'contrib/results'],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    # In contrib/results only the runs' READMEs: the reports beside them are
    # the tools' output as it was, plots they name not always kept.
    return [f for f in r.stdout.split('\n')
            if f.endswith('.md') and os.path.isfile(os.path.join(util.REPO, f))
            and (not f.startswith('contrib/results/') or os.path.basename(f) == 'README.md')]


def prose_lines(text):
    """The lines outside fenced code blocks, with inline code blanked out."""
    inside = False
    for line in text.split('\n'):
        if FENCE.match(line.lstrip()):
            inside = not inside
            continue
        if not inside:
            yield re.sub(r'`[^`]*`', '``', line)


def slug(heading):
    """GitHub's anchor of a heading's text."""
    s = heading.strip().lower()
    s = re.sub(r'[^\w\- ]', '', s)
    return s.replace(' ', '-')


def anchors(path):
    seen = {}
    out = set()
    with open(path) as f:
        for line in prose_lines(f.read().replace('`', '')):
            m = re.match(r'#{1,6} (.*)', line)
            if m:
                a = slug(m.group(1))
                n = seen.get(a, 0)
                seen[a] = n + 1
                out.add(a if n == 0 else '%s-%d' % (a, n))
    return out


def broken_links(rel):
    path = os.path.join(util.REPO, rel)
    bad = []
    with open(path) as f:
        lines = list(prose_lines(f.read()))
    for no, line in enumerate(lines, 1):
        for target in LINK.findall(line):
            if re.match(r'[a-z]+:', target):      # https:, mailto:
                continue
            file, _, anchor = target.partition('#')
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            if not os.path.exists(dest):
                bad.append('%s:%d: %s: no such file' % (rel, no, target))
            elif anchor and dest.endswith('.md') and anchor not in anchors(dest):
                bad.append('%s:%d: %s: no heading with that anchor' % (rel, no, target))
    return bad


def test_slug_and_links_checker(tmp_path):
    """The checker itself finds a missing file and a missing anchor."""
    assert slug("Cache modes, fio") == 'cache-modes-fio'
    assert slug("`O_DIRECT` backing, the default") == 'o_direct-backing-the-default'
    page = tmp_path / 'page.md'
    page.write_text('# Title\n\n## A `b`, c\n\n[ok](#a-b-c) [gone](#nothing) [no](missing.md)\n'
                    '```\n[code](not-a-link.md)\n```\n')
    bad = broken_links(str(page))
    assert len(bad) == 2, bad
    assert '#nothing' in bad[0] and 'missing.md' in bad[1]


def test_doc_links():
    files = markdown_files()
    assert 'README.md' in files and 'doc/results.md' in files, files
    bad = [b for f in files for b in broken_links(f)]
    assert not bad, '\n'.join(bad)
