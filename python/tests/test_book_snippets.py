"""Every ```python snippet of the book (docs/src) and of README.md runs: each is written to a file and run with this
interpreter in a fresh directory where `assets` links to the repository's assets/, so the paths a
snippet names ("assets/scenes/...") resolve and what it writes (beam.vtu, ...) stays out of the
repository. A snippet not meant to run on its own is marked ```python,fragment and skipped.
The fences are parsed by docs/check.py, which runs the book's TOML and Rust snippets."""

import importlib.util
import os
import subprocess
import sys

import pytest

from conftest import REPO

_spec = importlib.util.spec_from_file_location("doccheck", REPO / "docs" / "check.py")
doccheck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(doccheck)


def _snippets():
    found = []
    for page in [*doccheck.pages(), str(REPO / "README.md")]:
        for info, line, body in doccheck.code_blocks(page):
            parts = [p.strip() for p in info.split(",")]
            if parts and parts[0] == "python" and "fragment" not in parts[1:]:
                found.append(pytest.param(body, id=f"{doccheck.rel(page)}:{line}"))
    return found


SNIPPETS = _snippets()


def test_the_book_has_python_snippets():
    # The collection below is empty if the fence parsing broke: that must not pass silently.
    assert len(SNIPPETS) >= 3


@pytest.mark.parametrize("body", SNIPPETS)
def test_book_python_snippet_runs(body, request, tmp_path):
    where = request.node.callspec.id
    os.symlink(REPO / "assets", tmp_path / "assets")
    script = tmp_path / "snippet.py"
    script.write_text(body, encoding="utf-8")
    p = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                       text=True, timeout=600)
    last = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
    assert p.returncode == 0, f"{where}: python snippet: exit {p.returncode}: {last}"
