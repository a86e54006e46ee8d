"""A scene stepped from Python equals `jello run --backend cpu` bit for bit: the same positions,
velocities and time as the CLI's checkpoint, and the same per-step iterations, residuals and
energies as its stats.json."""

import json
import subprocess

import numpy as np
import pytest

import jello
from conftest import SCENES

# Small scenes, a few steps each: a clamped beam under gravity (Newton, a pin) and a ball
# dropped on the ground (Newton, an obstacle with barrier contact).
CASES = [("cantilever.toml", 3), ("drop.toml", 3)]


@pytest.mark.parametrize("scene_name,steps", CASES)
def test_python_steps_equal_the_cli_run_bit_for_bit(jello_cli, tmp_path, scene_name, steps):
    scene_path = SCENES / scene_name
    out = tmp_path / "run"
    subprocess.run(
        [str(jello_cli), "run", str(scene_path), "--backend", "cpu", "--steps", str(steps),
         "--out", str(out)],
        check=True,
        capture_output=True,
    )
    cli = jello.read_checkpoint(out / "checkpoint.bin")
    stats = json.loads((out / "stats.json").read_text())

    sim = jello.Simulation(jello.Scene.load(scene_path), backend="cpu")
    assert sim.backend == "cpu"
    reports = sim.run(steps)

    assert cli["step"] == steps == sim.step_count
    assert sim.time == cli["time"]
    np.testing.assert_array_equal(sim.positions, cli["positions"])
    np.testing.assert_array_equal(sim.velocities, cli["velocities"])
    assert len(reports) == len(stats["steps"]) == steps
    for mine, theirs in zip(reports, stats["steps"]):
        for key in ("step", "time", "iterations", "converged", "residual", "energy",
                    "energy_change", "substeps", "inverted", "penetrations"):
            assert mine[key] == theirs[key], (key, mine[key], theirs[key])
        # Everything stats.json holds per step is in the report (wall times differ, of course).
        assert set(theirs) <= set(mine), set(theirs) - set(mine)
