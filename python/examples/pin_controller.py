"""Drive a pin from Python: a feedback controller lifts a sagging cantilever's tip.

The scene is assets/scenes/cantilever.toml: a soft 1 m beam (stable neo-Hookean,
E = 1 MPa) clamped at x = 0 and sagging under gravity. Here the clamp is no longer fixed: each
step, a controller raises or lowers it (the pin's targets, set from Python) so that the tip's
height tracks a set point of 0 m: integral action on the tip's error plus damping of its vertical
velocity (untuned; the soft beam swings for a while, and much larger gains move the clamp so
far in one step that the elements next to it invert). The script plots the tip's and the clamp's heights
against time and writes a PNG (matplotlib's headless Agg backend).

    python python/examples/pin_controller.py                  # 100 steps, pin_controller.png
    python python/examples/pin_controller.py --steps 20 --out /tmp/pc.png
"""

import argparse
import pathlib

import matplotlib

matplotlib.use("Agg")  # headless: no display needed
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import jello  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scene", default=REPO / "assets" / "scenes" / "cantilever.toml")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--gain", type=float, default=2.0, help="integral gain on the tip's error, 1/s")
    ap.add_argument("--damping", type=float, default=1.0,
                    help="gain on the tip's vertical velocity, dimensionless")
    ap.add_argument("--backend", default="cpu", help="auto, cpu or gpu")
    ap.add_argument("--out", default="pin_controller.png")
    args = ap.parse_args(argv)

    sim = jello.Simulation(jello.Scene.load(args.scene), backend=args.backend)
    clamp = sim.pins[0]  # the vertices at x = 0
    rest = sim.positions
    tip = np.flatnonzero(rest[:, 0] > rest[:, 0].max() - 1e-9)  # the vertices at x = 1 m
    clamp_rest = rest[clamp]
    set_point = 0.0  # m, the tip's target height
    lift = 0.0  # m, the clamp's offset along y (the controller's state)

    log = {"t": [0.0], "tip": [rest[tip, 1].mean()], "clamp": [0.0]}

    def controller(sim, report):
        nonlocal lift
        tip_y = sim.positions[tip, 1].mean()
        tip_vy = sim.velocities[tip, 1].mean()
        # The clamp rises while the tip is low (integral action on the error) and leans against
        # the tip's vertical motion (damping the beam's swing).
        lift += (args.gain * (set_point - tip_y) - args.damping * tip_vy) * sim.h
        sim.set_pin_targets(0, clamp_rest + [0.0, lift, 0.0])
        log["t"].append(sim.time)
        log["tip"].append(tip_y)
        log["clamp"].append(lift)
        if not report["converged"]:
            print(f"step {report['step']}: not converged ({report['warnings']})")

    reports = sim.run(args.steps, callback=controller)
    iters = sum(r["iterations"] for r in reports)
    print(f"{len(reports)} steps, {iters} Newton iterations, "
          f"tip at {1e3 * log['tip'][-1]:.2f} mm, clamp raised {1e3 * lift:.2f} mm")

    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    ax.plot(log["t"], 1e3 * np.asarray(log["tip"]), label="tip height")
    ax.plot(log["t"], 1e3 * np.asarray(log["clamp"]), label="clamp offset (pin target)")
    ax.axhline(1e3 * set_point, color="grey", ls="--", lw=0.8, label="set point")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("height (mm)")
    ax.set_title("Cantilever tip held up by a Python controller")
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    fig.savefig(args.out)
    print(f"wrote {args.out}")
    return log


if __name__ == "__main__":
    main()
