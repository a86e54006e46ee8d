"""Shared fixtures: the repository's paths and the `jello` CLI binary the parity tests compare
against."""

import os
import pathlib
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SCENES = REPO / "assets" / "scenes"


def _built_cli():
    """The newest `jello` binary under the cargo target directory, or None."""
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    if not target.is_absolute():
        target = REPO / target
    found = [p for p in (target / "debug" / "jello", target / "release" / "jello") if p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


@pytest.fixture(scope="session")
def jello_cli():
    """Path of the `jello` CLI: $JELLO_BIN, else the newest one cargo built, else one built now
    (`cargo build --bin jello`, minutes on a fresh checkout)."""
    env = os.environ.get("JELLO_BIN")
    if env:
        path = pathlib.Path(env)
        assert path.is_file(), f"JELLO_BIN={env} is not a file"
        return path
    path = _built_cli()
    if path is None:
        cargo = shutil.which("cargo")
        assert cargo, "no jello binary built and no cargo to build one: set JELLO_BIN"
        subprocess.run([cargo, "build", "--bin", "jello"], cwd=REPO, check=True)
        path = _built_cli()
    assert path is not None, "cargo build did not leave a jello binary"
    return path
