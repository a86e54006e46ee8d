"""Type stubs of jello's compiled module (re-exported by ``jello``). Units are SI: m, s, kg, Pa, J."""

import os
import pathlib
from typing import Any, Callable, Mapping, Optional, Sequence, Union, final

import numpy as np
import numpy.typing as npt

__version__: str
__all__ = [
    "JelloError",
    "InputError",
    "SolverError",
    "GpuError",
    "Scene",
    "Mesh",
    "Simulation",
    "Tape",
    "read_mesh",
    "adapters",
    "read_checkpoint",
    "__version__",
]

_Path = Union[str, "os.PathLike[str]"]
_Rows = npt.ArrayLike
"""An (n, 3) (or (m, 4)) array-like; converted without a copy when already C-contiguous of
the right dtype."""

class JelloError(Exception):
    """Base class of every error jello raises; ``str(e)`` is jello's one-line message."""

class InputError(JelloError):
    """Bad input: a file that cannot be read or parsed, an invalid scene key, mesh or argument."""

class SolverError(JelloError):
    """A step failed numerically (a non-finite state, a failed factorisation, ...)."""

class GpuError(JelloError):
    """A GPU-side failure: no adapter when one was required, a device error."""

@final
class Scene:
    """A scene file parsed and built (mesh generated or read, materials, pins, obstacles checked)."""

    @staticmethod
    def load(path: _Path) -> "Scene":
        """Reads, parses and builds a scene file (relative mesh paths are relative to its folder)."""
    @staticmethod
    def from_toml(text: str, base_dir: Optional[_Path] = None) -> "Scene":
        """Parses and builds scene text; relative mesh paths resolve against ``base_dir``
        (default: the current directory); messages name the scene ``<string>``."""
    @property
    def path(self) -> pathlib.Path:
        """The scene file (``<string>`` under ``base_dir`` for ``from_toml``)."""
    @property
    def h(self) -> float:
        """Time step, s."""
    @property
    def steps(self) -> int:
        """Steps the scene asks for (``simulation.steps``)."""
    @property
    def solver(self) -> str:
        """The scene's solver name."""
    @property
    def num_vertices(self) -> int: ...
    @property
    def num_tets(self) -> int: ...
    @property
    def warnings(self) -> list[str]:
        """Warnings from building the scene (e.g. reoriented tets)."""
    def mesh(self) -> "Mesh":
        """The rest mesh of all objects together."""

@final
class Mesh:
    """A linear tetrahedral mesh, every tet positively oriented."""

    @staticmethod
    def from_arrays(vertices: _Rows, tets: _Rows) -> "Mesh":
        """``vertices`` (n, 3) in m and ``tets`` (m, 4) 0-based indices. float64 / int64
        C-contiguous input is kept without a copy; negatively oriented tets are reoriented
        (see ``warnings``); bad indices, non-finite coordinates or degenerate tets raise
        ``InputError``."""
    @property
    def vertices(self) -> npt.NDArray[np.float64]:
        """(n, 3) float64, m: the mesh's own array."""
    @property
    def tets(self) -> npt.NDArray[np.int64]:
        """(m, 4) int64 vertex indices: the mesh's own array."""
    @property
    def num_vertices(self) -> int: ...
    @property
    def num_tets(self) -> int: ...
    @property
    def warnings(self) -> list[str]:
        """What reading or building the mesh repaired or ignored."""
    def write(self, path: _Path) -> None:
        """Writes by extension: ``.vtu``, ``.obj`` / ``.ply`` (boundary surface),
        ``.node`` / ``.ele`` (TetGen), ``.msh`` (gmsh 2.2 ASCII)."""

@final
class Simulation:
    """A running simulation of a scene, set up exactly as ``jello run`` sets it up.

    Use it from the thread that created it (another thread raises). The GIL is released while
    a step runs, so other Python threads keep going.
    """

    def __new__(
        cls,
        scene: Scene,
        solver: Optional[str] = None,
        backend: str = "auto",
        trace: bool = False,
    ) -> "Simulation":
        """``backend``: "auto", "cpu" or "gpu" (as ``jello run --backend``); ``solver``
        replaces the scene's solver when given (as ``jello run --solver``); ``trace`` records
        every iteration in the reports."""
    def step(self) -> dict[str, Any]:
        """Advances one step; returns its ``stats.json`` entry: ``step``, ``time`` (s),
        ``iterations``, ``converged``, ``stop_rule_met``, ``substeps``, ``inverted``,
        ``penetrations``, ``crossings`` (objects first passing through each other, without
        IPC contact: ``objects``, ``names``, ``triangle_pairs``), ``failure`` (when failed),
        ``residual``, ``energy`` (J),
        ``energy_change`` (J), ``wall_ms``, ``output_ms``, ``timings`` (ms), ``trace`` (with
        ``trace=True``), plus ``warnings`` (list of str)."""
    def run(
        self,
        steps: Optional[int] = None,
        callback: Optional[Callable[["Simulation", dict[str, Any]], Optional[bool]]] = None,
    ) -> list[dict[str, Any]]:
        """Runs ``steps`` steps (default: the scene's) and returns their reports;
        ``callback(sim, report)`` runs after each step and stops the run by returning False."""
    @property
    def positions(self) -> npt.NDArray[np.float64]:
        """(n, 3) float64, m: a copy of the state. Assign an (n, 3) array to move vertices."""
    @positions.setter
    def positions(self, value: _Rows) -> None: ...
    @property
    def velocities(self) -> npt.NDArray[np.float64]:
        """(n, 3) float64, m/s: a copy of the state. Assign an (n, 3) array to set them."""
    @velocities.setter
    def velocities(self, value: _Rows) -> None: ...
    @property
    def time(self) -> float:
        """Simulated time, s."""
    @property
    def step_count(self) -> int:
        """Steps taken so far."""
    @property
    def h(self) -> float:
        """Time step, s."""
    @property
    def solver(self) -> str: ...
    @property
    def backend(self) -> str:
        """"cpu" or "gpu"."""
    @property
    def backend_reason(self) -> str: ...
    @property
    def solver_auto_reason(self) -> Optional[str]:
        """Why ``solver="auto"`` picked ``solver``; None when the solver was named."""
    @property
    def adapter(self) -> Optional[str]: ...
    @property
    def num_vertices(self) -> int: ...
    @property
    def tets(self) -> npt.NDArray[np.int64]:
        """(m, 4) int64 vertex indices."""
    def mesh(self) -> Mesh:
        """The mesh at the current positions."""
    @property
    def pins(self) -> list[npt.NDArray[np.int64]]:
        """The vertices each pin holds, in scene order."""
    def pin_targets(self, pin: int, t: Optional[float] = None) -> npt.NDArray[np.float64]:
        """Where pin ``pin`` holds its vertices at time ``t`` (default: the end of the next
        step), (k, 3) m in ``pins[pin]`` order."""
    def set_pin_targets(self, pin: int, targets: _Rows) -> None:
        """From the next step on, pin ``pin``'s vertices end every step at ``targets``
        ((k, 3) m, ``pins[pin]`` order) until set again; replaces the pin's script."""
    def record(
        self, checkpointing: str = "all", k: Optional[int] = None, tolerance: float = 1e-10
    ) -> "Tape":
        """Records the steps taken from now on for exact gradients (``Tape.backward``); the
        current state is the tape's first, numbered ``step_count``. Replaces an earlier
        recording. ``checkpointing``: ``"all"`` keeps every state (no re-solves),
        ``"every"`` every ``k``-th (memory ~ steps/k + k states, each step re-solved once),
        ``"binomial"`` ``k`` snapshots on Griewank's schedule (memory ~ k states, each step
        re-solved about r times, C(k + r, k) ≥ steps); states not kept are re-solved by f64
        Newton to ``tolerance`` (CN). ValueError for a static solve, a scene the adjoint does
        not differentiate, or a bad checkpointing choice."""

@final
class Tape:
    """A simulation's recorded steps (``Simulation.record()``), differentiated exactly by the
    adjoint of each implicit step at its converged state. Gradients are exact to the order of
    the solver's tolerance: use f64 Newton with ``stop = "cn"`` and a tight tolerance."""

    def backward(
        self,
        dx: Mapping[int, _Rows],
        dv: Optional[Mapping[int, _Rows]] = None,
        wrt: Optional[Sequence[str]] = None,
        unconverged: str = "refuse",
    ) -> dict[str, Any]:
        """dL/d(``wrt``) of a loss whose gradients on the recorded states are ``dx`` (dL/dx,
        [L]/m) and ``dv`` (dL/dv, [L]·s/m): dicts from a step number (as ``step()`` reports
        it; the first recorded state is ``first_step``) to an (n, 3) array. Returns numpy
        arrays by name: ``initial_positions`` (n, 3) [L]/m, ``initial_velocities`` (n, 3)
        [L]·s/m, ``youngs_modulus``, ``mu``, ``lambda`` (per tet, [L]/Pa), ``poisson_ratio``
        (per tet, [L]), ``density`` (per tet, [L]·m³/kg), ``pin_targets`` (steps + 1, pinned
        vertices, 3) [L]/m, ``forces`` (steps, n, 3) [L]/N, ``contact_stiffness`` (float,
        [L]·m⁴/J, fixed IPC κ). Default ``wrt``: initial positions and velocities, Young's
        modulus, Poisson's ratio, density. ``unconverged="flag"`` differentiates unconverged
        steps anyway and lists them in ``unconverged_steps``. The GIL is released while it
        runs; bad requests raise ValueError."""
    @property
    def last_backward(self) -> Optional[dict[str, Any]]:
        """What the last ``backward`` cost: ``backward_ms``, ``recomputed_steps``,
        ``peak_states``, ``peak_state_bytes``; None before the first."""
    @property
    def steps(self) -> int:
        """Steps recorded so far."""
    @property
    def first_step(self) -> int:
        """The step number of the tape's first state."""

def read_mesh(path: _Path) -> Mesh:
    """Reads a tetrahedral mesh file (gmsh ``.msh``, Medit ``.mesh``, legacy VTK ``.vtk``, TetGen ``.node``/``.ele``)."""

def adapters() -> list[dict[str, Any]]:
    """The GPU adapters wgpu sees, as ``jello info`` lists them: ``name``, ``backend``,
    ``device_type``, ``driver``, ``limits``, ``description``."""

def read_checkpoint(path: _Path) -> dict[str, Any]:
    """A run's ``checkpoint.bin``: ``step``, ``time`` (s), ``positions`` (n, 3) m,
    ``velocities`` (n, 3) m/s."""
