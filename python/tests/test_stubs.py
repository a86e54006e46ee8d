"""The type stubs (jello/_jello.pyi) match the compiled module: mypy's stubtest checks every
name, signature and property against the runtime objects."""

import subprocess
import sys

import pytest


def test_stubs_match_the_compiled_module():
    pytest.importorskip("mypy", reason="mypy is not installed (.ci/run installs it)")
    r = subprocess.run([sys.executable, "-m", "mypy.stubtest", "jello._jello"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
