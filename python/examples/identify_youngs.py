"""Identify a cantilever's Young's modulus from its observed trajectory: first one value for the
whole beam, then one per half (two regions), by L-BFGS on the adjoint gradient.

The "observation" is a run at hidden moduli; the fit starts elsewhere and minimises
L(E) = ½ Σ_s ‖x^s(E) − x^s_obs‖² (m²) over the recorded steps, with dL/dE from one backward
pass per evaluation (`Simulation.record()`, `Tape.backward`). It works in u = ln(E/E₀)
(dL/du = E·dL/dE), where the problem is well scaled. scipy's L-BFGS-B when scipy is installed,
else the small L-BFGS of optimise.py.

    python python/examples/identify_youngs.py            # 12 × 2 × 2 cells, 20 steps
    python python/examples/identify_youngs.py --small    # what the test runs
"""

import argparse
import pathlib
import sys

import numpy as np

import jello

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from optimise import minimize  # noqa: E402  (the examples' shared L-BFGS)

SCENE = """
[simulation]
h = 0.01
steps = {steps}
gravity = [0.0, -9.81, 0.0]

[solver]
name = "newton"
stop = "cn"
tolerance = 1e-10

[[objects]]
name = "beam"
mesh = {{ generator = "box", min = [0.0, -0.02, -0.02], max = [0.3, 0.02, 0.02], cells = [{cx}, {cy}, {cy}] }}
material = {{ model = "stable_neo_hookean", youngs_modulus = {e0}, poisson_ratio = 0.35, density = 1000.0 }}
velocity = [0.0, 0.5, 0.0]

[[objects.regions]]
region = {{ box = {{ min = [0.15, -1.0, -1.0], max = [1.0, 1.0, 1.0] }} }}
material = {{ model = "stable_neo_hookean", youngs_modulus = {e1}, poisson_ratio = 0.35, density = 1000.0 }}

[[pins]]
region = {{ box = {{ min = [-0.001, -1.0, -1.0], max = [0.001, 1.0, 1.0] }} }}
script = {{ type = "fixed" }}
"""


class Beam:
    """The beam scene at a given size; runs and differentiates it."""

    def __init__(self, cells, steps):
        self.cells, self.steps = cells, steps
        sim = self.simulation([1e5, 1e5])
        rest = sim.positions
        centroid_x = rest[sim.tets].mean(axis=1)[:, 0]
        # Tets of each region (the scene's override takes centroids at x ≥ 0.15 m).
        self.masks = [centroid_x < 0.15, centroid_x >= 0.15]

    def simulation(self, e):
        text = SCENE.format(steps=self.steps, cx=self.cells[0], cy=self.cells[1],
                            e0=e[0], e1=e[1])
        return jello.Simulation(jello.Scene.from_toml(text), backend="cpu")

    def trajectory(self, e):
        sim = self.simulation(e)
        out = []
        for _ in range(self.steps):
            sim.step()
            out.append(sim.positions)
        return out

    def loss_and_gradient(self, e, observed):
        """L (m²) and dL/dE per region (m²/Pa)."""
        sim = self.simulation(e)
        tape = sim.record()
        loss, dx = 0.0, {}
        for s in range(1, self.steps + 1):
            report = sim.step()
            r = sim.positions - observed[s - 1]
            loss += 0.5 * float(np.sum(r * r))
            dx[report["step"]] = r
        g = tape.backward(dx, wrt=("youngs_modulus",))["youngs_modulus"]
        return loss, np.array([g[m].sum() for m in self.masks])


def fit(beam, observed, start, regions):
    """E per region (Pa) that best reproduces `observed`, from `start` (Pa); `regions` 1 ties
    both halves to one value."""
    e_ref = np.asarray(start, dtype=float)

    def f(u):
        e = e_ref * np.exp(u)
        e_full = [e[0], e[0]] if regions == 1 else list(e)
        loss, g = beam.loss_and_gradient(e_full, observed)
        g = np.array([g.sum()]) if regions == 1 else g
        # Scaled so the first evaluation is O(1): L-BFGS-B's tolerances are absolute.
        return loss / scale[0], g * e / scale[0]

    scale = [1.0]
    scale[0] = f(np.zeros(regions))[0] or 1.0
    u = minimize(f, np.zeros(regions))
    return e_ref * np.exp(u)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="6 × 1 × 1 cells, 8 steps")
    args = parser.parse_args(argv)
    cells, steps = ((6, 1), 8) if args.small else ((12, 2), 20)
    beam = Beam(cells, steps)
    results = {}
    # One modulus for the whole beam.
    hidden = 2.5e5
    observed = beam.trajectory([hidden, hidden])
    (e,) = fit(beam, observed, [1e5], regions=1)
    results["one"] = (hidden, e)
    print(f"one region: hidden E = {hidden:.6e} Pa, identified {e:.6e} Pa "
          f"(relative error {abs(e - hidden) / hidden:.2e})")
    # One per half.
    hidden2 = np.array([3e5, 1.2e5])
    observed = beam.trajectory(list(hidden2))
    e2 = fit(beam, observed, [1e5, 1e5], regions=2)
    results["two"] = (hidden2, e2)
    for k in range(2):
        print(f"region {k}: hidden E = {hidden2[k]:.6e} Pa, identified {e2[k]:.6e} Pa "
              f"(relative error {abs(e2[k] - hidden2[k]) / hidden2[k]:.2e})")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
