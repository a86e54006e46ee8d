#!/usr/bin/env python3
"""Checks the book in docs/src (python3, standard library only).

1. Every ```toml snippet is a complete scene: it is written into assets/scenes/ (so the paths
   it names resolve as they do for the bundled scenes) and run with
   `jello run SCENE --steps 1 --backend cpu --out TMP`. Snippets that are not whole scenes are
   marked ```toml,fragment and skipped.
2. Every ```rust snippet is an {{#include}} of a file in examples/ (which `cargo test` compiles,
   so the code cannot rot), and each example it includes is run from the repository root:
   `target/debug/examples/NAME` beside $JELLO_BIN, as `cargo test` (or `cargo build --examples`)
   leaves it. A ```rust fence holding literal code fails unless it is marked ```rust,fragment
   (code that is not meant to compile on its own). The ```python snippets are run by
   python/tests/test_book_snippets.py, in the Python stage of .ci/run.
3. Every relative link and {{#include}} in the book (and every relative link in README.md)
   points to an existing file.
4. SUMMARY.md lists existing pages, and every page under docs/src is listed.

Usage (from anywhere): python3 docs/check.py [--links-only]
The binary is $JELLO_BIN (default target/debug/jello, relative to the repository root);
--links-only runs neither scenes nor examples.
Exit status 0 when everything passes; otherwise one line per failure, naming the page and line.
"""

import os
import re
import subprocess
import sys
import tempfile

DOCS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(DOCS)
SRC = os.path.join(DOCS, "src")
SCENES = os.path.join(ROOT, "assets", "scenes")

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
INCLUDE = re.compile(r"\{\{#(?:include|rustdoc_include)\s+([^}\s:]+)")
# A line that is nothing but an include (a path, then an optional :anchor or :line range).
INCLUDE_LINE = re.compile(r"\{\{#(?:include|rustdoc_include)\s+([^}\s:]+)(?::[^}\s]*)?\s*\}\}")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")


def pages():
    for d, _, files in os.walk(SRC):
        for f in sorted(files):
            if f.endswith(".md"):
                yield os.path.join(d, f)


def rel(p):
    return os.path.relpath(p, ROOT)


def code_blocks(path):
    """(info string, first line number of the body, body) of every fenced block."""
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(2), m.group(3).strip()
        body, j = [], i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j])
            j += 1
        yield info, i + 2, "\n".join(body) + "\n"
        i = j + 1


def prose_lines(path):
    """(line number, text) of the lines outside fenced code blocks, inline code removed."""
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    fence = None
    for n, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if m and (fence is None or line.strip().startswith(fence)):
            fence = None if fence else m.group(2)
            continue
        if fence is None:
            yield n, re.sub(r"`[^`]*`", "", line)


def check_snippets(jello, failures):
    ran = 0
    for page in pages():
        for info, line, body in code_blocks(page):
            parts = [p.strip() for p in info.split(",")]
            if not parts or parts[0] != "toml" or "fragment" in parts[1:]:
                continue
            ran += 1
            where = f"{rel(page)}:{line}"
            fd, scene = tempfile.mkstemp(prefix=".doccheck-", suffix=".toml", dir=SCENES)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(body)
                with tempfile.TemporaryDirectory(prefix="jello-doccheck-") as out:
                    cmd = [jello, "run", scene, "--steps", "1", "--backend", "cpu",
                           "--out", os.path.join(out, "run")]
                    try:
                        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                                           timeout=600)
                    except subprocess.TimeoutExpired:
                        failures.append(f"{where}: scene snippet: jello run timed out")
                        continue
                    if p.returncode != 0:
                        msg = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
                        msg = msg.replace(os.path.basename(scene), "<snippet>")
                        failures.append(f"{where}: scene snippet: exit {p.returncode}: {msg}")
            finally:
                os.unlink(scene)
    return ran


def rust_examples(failures):
    """{example name: "page:line" of its first include} over every ```rust snippet; a snippet with
    literal code (not an include of examples/NAME.rs) is a failure unless marked fragment."""
    examples = {}
    for page in pages():
        for info, line, body in code_blocks(page):
            parts = [p.strip() for p in info.split(",")]
            if not parts or parts[0] != "rust" or "fragment" in parts[1:]:
                continue
            where = f"{rel(page)}:{line}"
            code = [text for text in body.split("\n") if text.strip()]
            included = [INCLUDE_LINE.fullmatch(text.strip()) for text in code]
            if not code or not all(included):
                failures.append(f"{where}: rust snippet with literal code: move it into "
                                f"examples/ and {{{{#include}}}} it, or mark it rust,fragment")
                continue
            for m in included:
                full = os.path.normpath(os.path.join(os.path.dirname(page), m.group(1)))
                if os.path.dirname(full) != os.path.join(ROOT, "examples") or \
                        not full.endswith(".rs"):
                    failures.append(f"{where}: rust snippet includes {m.group(1)}, "
                                    f"not a file of examples/")
                    continue
                if not os.path.isfile(full):
                    failures.append(f"{where}: include of a missing file: {m.group(1)}")
                    continue
                examples.setdefault(os.path.basename(full)[:-3], where)
    return examples


def book_region(path):
    """The lines of examples/NAME.rs between `// ANCHOR: book` and `// ANCHOR_END: book`."""
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip() for line in f]
    try:
        start = lines.index("// ANCHOR: book")
        end = lines.index("// ANCHOR_END: book")
    except ValueError:
        return None
    return lines[start + 1:end]


def readme_rust(examples, failures):
    """README.md cannot {{#include}}: each of its ```rust snippets must be, line for line, the book
    region of an example the book runs (so it compiles and runs with that example)."""
    readme = os.path.join(ROOT, "README.md")
    regions = {name: book_region(os.path.join(ROOT, "examples", name + ".rs"))
               for name in examples}
    for info, line, body in code_blocks(readme):
        parts = [p.strip() for p in info.split(",")]
        if not parts or parts[0] != "rust":
            continue
        code = [text.rstrip() for text in body.rstrip("\n").split("\n")]
        if not any(code == region for region in regions.values()):
            failures.append(f"README.md:{line}: rust snippet is not the book region of an example "
                            f"the book runs ({', '.join(sorted(regions)) or 'none'}): copy it "
                            f"from there")


def run_examples(examples, bin_dir, failures):
    for name, where in sorted(examples.items()):
        exe = os.path.join(bin_dir, name)
        if not os.access(exe, os.X_OK):
            failures.append(f"{where}: rust example {name}: no binary at {exe} "
                            f"(cargo build --example {name})")
            continue
        # No backtrace after the error line that `main` returning Err prints.
        env = dict(os.environ, RUST_BACKTRACE="0", RUST_LIB_BACKTRACE="0")
        try:
            p = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True, timeout=600,
                               env=env)
        except subprocess.TimeoutExpired:
            failures.append(f"{where}: rust example {name}: timed out")
            continue
        if p.returncode != 0:
            lines = p.stderr.strip().splitlines() or ["(no output)"]
            msg = next((text for text in lines if text.startswith("Error: ")), lines[-1])
            failures.append(f"{where}: rust example {name}: exit {p.returncode}: {msg}")
    return len(examples)


def check_links(failures):
    checked = 0
    files = list(pages()) + [os.path.join(ROOT, "README.md")]
    for page in files:
        for n, text in prose_lines(page):
            for m in INCLUDE.finditer(text):
                checked += 1
                full = os.path.normpath(os.path.join(os.path.dirname(page), m.group(1)))
                if not os.path.isfile(full):
                    failures.append(f"{rel(page)}:{n}: include of a missing file: {m.group(1)}")
            for m in LINK.finditer(text):
                target = m.group(1) or m.group(2)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                    continue
                path = target.split("#", 1)[0]
                checked += 1
                full = os.path.normpath(os.path.join(os.path.dirname(page), path))
                if not os.path.exists(full):
                    failures.append(f"{rel(page)}:{n}: link to a missing file: {target}")
    return checked


def check_summary(failures):
    summary = os.path.join(SRC, "SUMMARY.md")
    listed = set()
    with open(summary, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            for m in re.finditer(r"\[[^\]]+\]\(([^)]*)\)", line):
                target = m.group(1)
                if not target:
                    continue  # a draft chapter
                full = os.path.normpath(os.path.join(SRC, target))
                if not os.path.isfile(full):
                    failures.append(f"docs/src/SUMMARY.md:{n}: no such page: {target}")
                if full in listed:
                    failures.append(f"docs/src/SUMMARY.md:{n}: listed twice: {target}")
                listed.add(full)
            if line.strip() and not re.match(r"^\s*(#|- \[|\[|---)", line):
                failures.append(f"docs/src/SUMMARY.md:{n}: not a heading, link or separator")
    for page in pages():
        # A bench's generated/NAME.md is a fragment a page includes, not a page of its own.
        included = os.path.basename(os.path.dirname(page)) == "generated"
        if os.path.basename(page) != "SUMMARY.md" and page not in listed and not included:
            failures.append(f"{rel(page)}: not listed in SUMMARY.md")


def main():
    failures = []
    check_summary(failures)
    links = check_links(failures)
    examples = rust_examples(failures)
    readme_rust(examples, failures)
    ran = ran_examples = 0
    if "--links-only" not in sys.argv[1:]:
        jello = os.environ.get("JELLO_BIN", os.path.join("target", "debug", "jello"))
        jello = os.path.join(ROOT, jello) if not os.path.isabs(jello) else jello
        if not os.access(jello, os.X_OK):
            print(f"docs/check.py: no jello binary at {jello} (build it or set JELLO_BIN)")
            return 1
        ran = check_snippets(jello, failures)
        ran_examples = run_examples(examples, os.path.join(os.path.dirname(jello), "examples"),
                                    failures)
    for f in failures:
        print(f)
    print(f"docs/check.py: {ran} scene snippets run, {ran_examples} Rust examples run, "
          f"{links} links checked, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
