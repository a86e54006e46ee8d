"""jello: GPU-first elastodynamics (tetrahedral FEM, hyperelastic materials, implicit time
stepping) from Python.

Units are SI throughout: metres, seconds, kilograms, pascals, joules. Arrays go in and come out
as numpy arrays: positions and velocities (n, 3) float64, tets (m, 4) int64.

    >>> import jello
    >>> scene = jello.Scene.load("assets/scenes/cantilever.toml")
    >>> sim = jello.Simulation(scene, backend="cpu")
    >>> report = sim.step()            # the step's stats.json entry, as a dict
    >>> sim.positions.shape            # (n, 3), m

Every error jello raises derives from ``jello.JelloError`` and carries jello's one-line message
(the line ``jello run`` prints): ``InputError`` (files, scenes, meshes, arguments),
``SolverError`` (a step failed numerically), ``GpuError`` (no adapter, device errors).
"""

from ._jello import (
    GpuError,
    InputError,
    JelloError,
    Mesh,
    Scene,
    Simulation,
    SolverError,
    Tape,
    __version__,
    adapters,
    read_checkpoint,
    read_mesh,
)

__all__ = [
    "GpuError",
    "InputError",
    "JelloError",
    "Mesh",
    "Scene",
    "Simulation",
    "SolverError",
    "Tape",
    "__version__",
    "adapters",
    "read_checkpoint",
    "read_mesh",
]
