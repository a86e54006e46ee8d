"""Throw a soft ball at a target: optimise the trajectory of the hand that holds it (pin targets
per step) by L-BFGS on the adjoint gradient.

A soft ball (radius 3 cm, stable neo-Hookean E = 2e5 Pa, ν = 0.4, 1000 kg/m³) is held by the
vertices of its bottom cap, a pin whose targets the hand sets every step (a rigid translation
o_s of the cap, m, steps 1..K). At step K the hand lets go: the ball flies freely, under gravity,
until step T. The loss is L = ½‖c_T − target‖² (m²), c_T the ball's centre of mass (the mean of
its vertices' positions weighted by their lumped masses) at step T.

A release changes the model (pinned vertices become free), and a tape differentiates one model:
so the run is two simulations, each recorded — the held phase (the scene with its pin, steps
0..K) and the flight (the same ball without the pin, started from the held phase's state K,
steps K..T). The gradient chains through the hand-over: the flight's tape gives dL/dx_K and
dL/dv_K (its `initial_positions` and `initial_velocities`), which seed the held phase's tape at
step K; that one gives dL/d(pin targets) per step, summed over the cap's vertices for dL/do_s.

The optimiser sees L plus a small penalty on the hand's acceleration, w·Σ‖o_{s+1} − 2o_s +
o_{s−1}‖²/h⁴ (o_0 = 0), so that the hand moves smoothly (it would otherwise be free to jerk the
cap, which stretches the ball without helping the throw). scipy's L-BFGS-B when scipy is
installed, else the small L-BFGS of optimise.py.

    python python/examples/throw_ball.py            # K = 10, T = 30 steps of 10 ms
    python python/examples/throw_ball.py --small    # what the test runs
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
h = {h}
steps = {steps}
gravity = [0.0, -9.81, 0.0]

[solver]
name = "newton"
stop = "cn"
tolerance = {tolerance}

[[objects]]
name = "ball"
mesh = {{ generator = "ball", center = [0.0, 0.0, 0.0], radius = 0.03, resolution = {resolution} }}
material = {{ model = "stable_neo_hookean", youngs_modulus = 2e5, poisson_ratio = 0.4, density = 1000.0 }}
"""

HAND = """
[[pins]]
region = { box = { min = [-1.0, -1.0, -1.0], max = [1.0, -0.02, 1.0] } }
script = { type = "fixed" }
"""


class Throw:
    """The two-phase throw at a given size: runs it and differentiates it."""

    def __init__(self, hold, flight, h=0.01, resolution=4, tolerance=1e-10):
        self.hold, self.flight, self.h = hold, flight, h
        fmt = dict(h=h, resolution=resolution, tolerance=tolerance)
        self.held_scene = SCENE.format(steps=hold, **fmt) + HAND
        self.free_scene = SCENE.format(steps=flight, **fmt)
        sim = self.held()
        self.cap = sim.pins[0]
        self.rest = sim.positions
        # The centre of mass: lumped masses are a vertex's share of its tets' volumes.
        x = self.rest
        tets = sim.tets
        e = x[tets[:, 1:]] - x[tets[:, :1]]
        vol = np.abs(np.einsum("ij,ij->i", e[:, 0], np.cross(e[:, 1], e[:, 2]))) / 6.0
        m = np.zeros(len(x))
        np.add.at(m, tets.ravel(), np.repeat(vol / 4.0, 4))
        self.weights = m / m.sum()

    def held(self):
        return jello.Simulation(jello.Scene.from_toml(self.held_scene), backend="cpu")

    def centre(self, x):
        """The centre of mass (m) of positions x."""
        return self.weights @ x

    def run(self, offsets, gradient=False):
        """c_T (m) for hand offsets (K, 3) m; with `gradient`, also the two tapes."""
        sim = self.held()
        tape_hold = sim.record() if gradient else None
        for o in offsets:
            sim.set_pin_targets(0, self.rest[self.cap] + o)
            report = sim.step()
            if not report["converged"]:
                raise RuntimeError(f"held step {report['step']} did not converge")
        free = jello.Simulation(jello.Scene.from_toml(self.free_scene), backend="cpu")
        free.positions = sim.positions
        free.velocities = sim.velocities
        tape_free = free.record() if gradient else None
        for report in free.run(self.flight):
            if not report["converged"]:
                raise RuntimeError(f"flight step {report['step']} did not converge")
        c = self.centre(free.positions)
        return (c, tape_hold, tape_free) if gradient else c

    def loss_and_gradient(self, offsets, target):
        """L = ½‖c_T − target‖² (m²) and dL/do (K, 3) (m)."""
        c, tape_hold, tape_free = self.run(offsets, gradient=True)
        r = c - target
        dx = {self.flight: np.outer(self.weights, r)}
        g = tape_free.backward(dx, wrt=("initial_positions", "initial_velocities"))
        seeds_x = {self.hold: g["initial_positions"]}
        seeds_v = {self.hold: g["initial_velocities"]}
        p = tape_hold.backward(seeds_x, dv=seeds_v, wrt=("pin_targets",))["pin_targets"]
        # Row s of pin_targets: the targets at the end of step s (row 0, the start, is fixed).
        return 0.5 * float(r @ r), p[1:].sum(axis=1)


def smoothness(offsets, h):
    """Σ‖o_{s+1} − 2o_s + o_{s−1}‖²/h⁴ (m²/s⁴, o_0 = o_{−1} = 0: the hand starts at rest) and
    its gradient."""
    o = np.vstack([np.zeros((2, 3)), offsets])
    a = (o[2:] - 2 * o[1:-1] + o[:-2]) / h**2
    g = np.zeros_like(o)
    g[2:] += a
    g[1:-1] -= 2 * a
    g[:-2] += a
    return float(np.sum(a * a)), 2 * g[2:] / h**2


def optimise(throw, target, start, weight):
    """Hand offsets (K, 3) m that throw the ball to `target` (m), from `start`. The optimiser
    works in u = o/σ (σ = 1 cm, so its first, gradient-sized step moves the hand by about that)
    and sees a throw whose steps do not converge as an infinite loss (its line search backs
    off)."""
    shape, sigma = start.shape, 0.01

    def f(u):
        o = sigma * u.reshape(shape)
        try:
            loss, g = throw.loss_and_gradient(o, target)
        except RuntimeError:
            return np.inf, np.zeros_like(u)
        pen, gp = smoothness(o, throw.h)
        return (loss + weight * pen) / scale[0], sigma * (g + weight * gp).ravel() / scale[0]

    scale = [1.0]
    scale[0] = f(start.ravel() / sigma)[0] or 1.0
    return sigma * minimize(f, start.ravel() / sigma).reshape(shape)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true",
                        help="K = 6 held and 10 free steps of 20 ms, a coarser ball")
    args = parser.parse_args(argv)
    if args.small:
        throw = Throw(hold=6, flight=10, h=0.02, resolution=3)
    else:
        throw = Throw(hold=10, flight=20, h=0.01, resolution=4)
    k, h = throw.hold, throw.h
    # Start: the hand lifts the ball straight up at 1.5 m/s² (it lands about where it started,
    # nearly).
    t = h * np.arange(1, k + 1)
    start = np.outer(0.5 * 1.5 * t * t, [0.0, 1.0, 0.0])
    target = np.array([0.25, 0.05, 0.1])
    before = np.linalg.norm(throw.run(start) - target)
    offsets = optimise(throw, target, start, weight=1e-9)
    after = np.linalg.norm(throw.run(offsets) - target)
    release = (offsets[-1] - offsets[-2]) / h
    print(f"landing error: {1e3 * before:.2f} mm before, {1e3 * after:.4f} mm after "
          f"(hand released at {release.round(3)} m/s, from {offsets[-1].round(4)} m)")
    return {"before": before, "after": after, "offsets": offsets, "throw": throw,
            "target": target}


if __name__ == "__main__":
    main(sys.argv[1:])
