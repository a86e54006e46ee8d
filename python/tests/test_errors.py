"""Bad input raises a jello exception carrying jello's one-line message: for a scene file, the
very line `jello run` prints after `error: `; for arguments, a line naming the argument."""

import subprocess

import numpy as np
import pytest

import jello
from conftest import SCENES

GOOD_BLOCK = (SCENES / "cantilever.toml").read_text()


def one_line(excinfo):
    msg = str(excinfo.value)
    assert msg and "\n" not in msg, repr(msg)
    return msg


@pytest.mark.parametrize(
    "name,text,want",
    [
        ("negative_h.toml", GOOD_BLOCK.replace("h = 0.01", "h = -0.01"), "key `simulation.h`"),
        ("bad_type.toml", GOOD_BLOCK.replace("steps = 100", 'steps = "many"'),
         "key `simulation.steps`"),
        ("unknown_key.toml", GOOD_BLOCK.replace("[solver]", "[solver]\nfoo = 1"), "foo"),
        ("bad_material.toml", GOOD_BLOCK.replace("poisson_ratio = 0.3", "poisson_ratio = 0.7"),
         "poisson_ratio"),
    ],
)
def test_a_bad_scene_raises_the_line_the_cli_prints(jello_cli, tmp_path, name, text, want):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(jello.InputError) as e:
        jello.Scene.load(path)
    msg = one_line(e)
    assert str(path) in msg and want in msg, msg
    with pytest.raises(jello.InputError) as e2:
        jello.Scene.from_toml(text)
    assert want in one_line(e2) and "<string>" in str(e2.value)
    cli = subprocess.run([str(jello_cli), "run", str(path), "--backend", "cpu", "--out",
                          str(tmp_path / "out")], capture_output=True, text=True)
    assert cli.returncode != 0
    assert f"error: {msg}" in cli.stderr, (msg, cli.stderr)


def test_missing_files_raise_naming_the_file(tmp_path):
    for call in (jello.Scene.load, jello.read_mesh, jello.read_checkpoint):
        missing = tmp_path / "missing.msh"
        with pytest.raises(jello.InputError) as e:
            call(missing)
        assert str(missing) in one_line(e)
    with pytest.raises(jello.InputError) as e:
        jello.read_mesh(tmp_path / "mesh.stl")
    assert "unsupported mesh format `.stl`" in one_line(e)


def test_bad_arguments_raise_naming_the_argument():
    scene = jello.Scene.from_toml(GOOD_BLOCK.replace("steps = 100", "steps = 2"))
    with pytest.raises(jello.InputError) as e:
        jello.Simulation(scene, backend="tpu")
    assert one_line(e) == "backend: backend `tpu`: expected auto, gpu or cpu"
    with pytest.raises(jello.InputError) as e:
        jello.Simulation(scene, solver="magic")
    assert one_line(e).startswith("solver: unknown solver `magic` (expected one of: newton")
    sim = jello.Simulation(scene, backend="cpu")
    n = sim.num_vertices
    x = sim.positions
    cases = [
        ("positions", np.zeros((n, 2)), f"positions: expected an (n, 3) array, got shape [{n}, 2]"),
        ("positions", np.zeros((n - 1, 3)), f"positions: expected ({n}, 3), got ({n - 1}, 3)"),
        ("velocities", np.full((n, 3), np.nan), "velocities: row 0 has a non-finite value NaN"),
        ("positions", [["a", "b", "c"]] * n, "positions: not convertible to a float64 array"),
    ]
    for attr, value, want in cases:
        with pytest.raises(jello.InputError) as e:
            setattr(sim, attr, value)
        assert one_line(e).startswith(want), (str(e.value), want)
    np.testing.assert_array_equal(sim.positions, x)  # nothing changed
    k = len(sim.pins[0])
    with pytest.raises(jello.InputError) as e:
        sim.set_pin_targets(1, np.zeros((k, 3)))
    assert one_line(e) == "pin 1 does not exist: the model has 1 pin(s) (0-based, in scene order)"
    with pytest.raises(jello.InputError) as e:
        sim.set_pin_targets(0, np.zeros((k + 1, 3)))
    assert one_line(e) == f"targets: pin 0 holds {k} vertices, got {k + 1} row(s)"
    bad = sim.pin_targets(0)
    bad[1, 2] = np.inf
    with pytest.raises(jello.InputError) as e:
        sim.set_pin_targets(0, bad)
    assert one_line(e).startswith("pin 0: target 1 (vertex ")
    with pytest.raises(OverflowError):
        sim.set_pin_targets(-1, bad)


def test_bad_meshes_raise():
    v = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
    with pytest.raises(jello.InputError) as e:
        jello.Mesh.from_arrays(v, [[0, 1, 2, 4]])
    assert one_line(e) == "tets: row 0 has vertex index 4 outside 0..4"
    with pytest.raises(jello.InputError) as e:
        jello.Mesh.from_arrays(v, [[0, 1, 2, 3, 0]])
    assert one_line(e) == "tets: expected an (n, 4) array, got shape [1, 5]"
    flat = v.copy()
    flat[3] = [1, 1, 0]
    with pytest.raises(jello.InputError) as e:
        jello.Mesh.from_arrays(flat, [[0, 1, 2, 3]])
    assert "is inverted or degenerate" in one_line(e)


def test_exception_hierarchy():
    for cls in (jello.InputError, jello.SolverError, jello.GpuError):
        assert issubclass(cls, jello.JelloError) and issubclass(cls, Exception)
