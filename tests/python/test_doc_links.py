#!/usr/bin/python3
"""Every relative link of the Markdown documentation resolves (issue 25).

README.md, docs/*.md and the folders' README.md files link to each other,
to the man pages and to source files. Each relative link must name a file
or directory that exists, and a link with an #anchor into a Markdown file
must name a heading of that file (GitHub's slugs: lower case, punctuation
dropped, spaces to hyphens, -1, -2... for repeats) or an <a id="...">.
Links inside code (fenced blocks, `spans`) are not links. Also checks that
README.md stays a ten-minute read (at most 600 lines) and links every
docs/*.md file, and that each source folder has a short README.md saying
what it owns and what it may call.
"""
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pathmount  # noqa: E402

REPO = pathmount.REPO
SKIP_DIRS = {".git", "build", "node_modules", "__pycache__"}
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]"  # [text], then (target "title")
                  r"\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~)")
ANCHOR_ID = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
# the source folders (issue 25's layering), each with a README.md
FOLDERS = ("lib", "tier", "tier/l2", "tier/l3", "tier/policy", "tier/record",
           "fs", "fs/paths", "mount", "events", "gpu", "hash")


def markdown_files():
    for top, dirs, files in os.walk(REPO):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS
                         and not d.startswith("build-"))
        for f in sorted(files):
            if f.endswith(".md"):
                yield os.path.join(top, f)


def prose(path):
    """(line number, text) of the lines outside fenced code, with inline
    code spans blanked."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line.lstrip()):
                fenced = not fenced
                continue
            if not fenced:
                yield n, re.sub(r"`[^`]*`", "``", line)


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    found, seen = set(), {}
    for _, line in prose(path):
        found.update(ANCHOR_ID.findall(line))
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(2))
        base = slug(text)
        k = seen.get(base, 0)
        seen[base] = k + 1
        found.add(base if k == 0 else "%s-%d" % (base, k))
    return found


def links(path):
    for n, line in prose(path):
        for m in LINK.finditer(line):
            yield n, m.group(1)


class DocLinks(unittest.TestCase):
    def test_relative_links_resolve(self):
        bad, count = [], 0
        cache = {}
        for md in markdown_files():
            for n, target in links(md):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # http:, https:, mailto:
                count += 1
                where = "%s:%d: %s" % (os.path.relpath(md, REPO), n, target)
                file_part, _, frag = target.partition("#")
                dest = (os.path.normpath(os.path.join(os.path.dirname(md),
                                                      file_part))
                        if file_part else md)
                if not os.path.exists(dest):
                    bad.append(where + " (no such file)")
                    continue
                if not os.path.realpath(dest).startswith(REPO + os.sep):
                    bad.append(where + " (outside the repository)")
                    continue
                if frag and dest.endswith(".md"):
                    if dest not in cache:
                        cache[dest] = anchors(dest)
                    if frag not in cache[dest]:
                        bad.append(where + " (no heading #%s)" % frag)
        self.assertGreater(count, 30, "too few links found: the parser?")
        self.assertEqual(bad, [], "broken links:\n  " + "\n  ".join(bad))

    def test_readme_is_short_and_links_every_doc(self):
        readme = os.path.join(REPO, "README.md")
        with open(readme, encoding="utf-8") as f:
            nlines = sum(1 for _ in f)
        self.assertLessEqual(nlines, 600, "README.md: %d lines" % nlines)
        linked = {os.path.normpath(t.partition("#")[0])
                  for _, t in links(readme)}
        docs = os.path.join(REPO, "docs")
        missing = sorted("docs/" + f for f in os.listdir(docs)
                         if f.endswith(".md")
                         and os.path.join("docs", f) not in linked)
        self.assertEqual(missing, [], "docs README.md does not link")

    def test_source_folders_say_what_they_own(self):
        """Each source folder opens with a README.md of 10 to 30 lines
        that says what it may call, and README.md links it."""
        with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
            readme = f.read()
        bad = []
        for d in FOLDERS:
            path = os.path.join(REPO, d, "README.md")
            if not os.path.exists(path):
                bad.append(d + ": no README.md")
                continue
            with open(path, encoding="utf-8") as f:
                text = f.read()
            n = text.count("\n")
            if not 10 <= n <= 30:
                bad.append("%s/README.md: %d lines" % (d, n))
            if "May call" not in text:
                bad.append("%s/README.md: no 'May call'" % d)
            if "(%s/README.md)" % d not in readme:
                bad.append("README.md does not link %s/README.md" % d)
        self.assertEqual(bad, [])

    def test_checker_sees_a_broken_link(self):
        """The checker itself: a missing file, a missing anchor and a link
        in code are told apart."""
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            md = os.path.join(d, "x.md")
            with open(md, "w") as f:
                f.write("# Top: a (b) c\n## Top: a (b) c\n"
                        "[ok](#top-a-b-c) [ok2](#top-a-b-c-1) [no](#nope)\n"
                        "`[code](missing.md)`\n```\n[code](missing.md)\n```\n"
                        "[file](missing.md) <a id=\"here\"></a>\n")
            got = [t for _, t in links(md)]
            self.assertEqual(got, ["#top-a-b-c", "#top-a-b-c-1", "#nope",
                                   "missing.md"])
            self.assertEqual(anchors(md),
                             {"top-a-b-c", "top-a-b-c-1", "here"})


if __name__ == "__main__":
    unittest.main()
