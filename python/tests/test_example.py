"""The example in python/examples/ runs (briefly) and writes its plot, so it cannot rot."""

import importlib.util

import numpy as np

from conftest import REPO


def test_pin_controller_example_runs_and_plots(tmp_path):
    path = REPO / "python" / "examples" / "pin_controller.py"
    spec = importlib.util.spec_from_file_location("pin_controller", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    out = tmp_path / "pc.png"
    log = example.main(["--steps", "6", "--out", str(out)])
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(log["t"]) == 7
    # The beam sags, so the integral controller has raised the clamp.
    assert log["tip"][-1] < 0 and log["clamp"][-1] > 0
    assert np.all(np.diff(log["clamp"]) > 0)
