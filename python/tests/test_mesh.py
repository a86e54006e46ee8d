"""Meshes in and out: arrays kept without a copy, reoriented like the file readers, written and
read back; a scene's rest mesh; `jello.adapters()` lists what `jello info` lists."""

import subprocess

import numpy as np

import jello
from conftest import SCENES


def unit_tets():
    # Two tets sharing a face; the second listed negatively oriented.
    v = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, -1]])
    t = np.array([[0, 1, 2, 3], [0, 1, 2, 4]], dtype=np.int64)
    return v, t


def test_from_arrays_keeps_the_callers_arrays_and_reorients():
    v, t = unit_tets()
    m = jello.Mesh.from_arrays(v, t[:1].copy())
    assert m.vertices is v and m.num_vertices == 5 and m.num_tets == 1 and m.warnings == []
    m = jello.Mesh.from_arrays(v, t)
    assert m.vertices is v
    np.testing.assert_array_equal(m.tets, [[0, 1, 2, 3], [0, 1, 4, 2]])
    assert m.warnings and m.warnings[0].startswith("1 negatively oriented tet(s) reoriented")
    # Other dtypes are converted.
    m32 = jello.Mesh.from_arrays(v.astype(np.float32), t.astype(np.int32))
    assert m32.vertices.dtype == np.float64 and m32.tets.dtype == np.int64


def test_written_meshes_read_back(tmp_path):
    scene = jello.Scene.load(SCENES / "cantilever.toml")
    mesh = scene.mesh()
    assert (mesh.num_vertices, mesh.num_tets) == (scene.num_vertices, scene.num_tets) == (189, 480)
    for ext in ("msh", "node"):
        path = tmp_path / f"beam.{ext}"
        mesh.write(path)
        back = jello.read_mesh(path)
        np.testing.assert_array_equal(back.tets, mesh.tets)
        np.testing.assert_allclose(back.vertices, mesh.vertices, rtol=0, atol=1e-12)
    mesh.write(tmp_path / "beam.vtu")
    assert (tmp_path / "beam.vtu").read_text().startswith("<?xml")


def test_simulation_mesh_follows_the_state(tmp_path):
    sim = jello.Simulation(jello.Scene.load(SCENES / "cantilever.toml"), backend="cpu")
    sim.step()
    m = sim.mesh()
    np.testing.assert_array_equal(m.vertices, sim.positions)
    np.testing.assert_array_equal(m.tets, sim.tets)


def test_adapters_match_jello_info(jello_cli):
    listed = jello.adapters()
    info = subprocess.run([str(jello_cli), "info"], capture_output=True, text=True, check=True)
    lines = [l for l in info.stdout.splitlines() if l.startswith("[")]
    names = [a["name"] for a in listed]
    print(names)
    for a in listed:
        assert set(a) >= {"name", "backend", "device_type", "driver", "limits", "description"}
        assert a["description"].splitlines()[0] in info.stdout
    assert len([l for l in lines if l[1].isdigit()]) == len(listed), info.stdout
