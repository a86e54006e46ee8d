"""The adjoint examples do their job at small size: the Young's modulus identification recovers
the hidden values (one for the beam, then one per half) to 1e-3 relative; the ball throw's
optimised hand trajectory lands the ball within 1 mm of its target and a thousandth of the
starting error, and its gradient (chained through the release, over two tapes) agrees with
central finite differences to 1e-5 relative."""

import pathlib
import runpy

import numpy as np

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def test_identify_youngs_recovers_the_hidden_moduli():
    main = runpy.run_path(str(EXAMPLES / "identify_youngs.py"))["main"]
    results = main(["--small"])
    hidden, found = results["one"]
    assert abs(found - hidden) <= 1e-3 * hidden, (hidden, found)
    hidden, found = results["two"]
    assert np.all(np.abs(found - hidden) <= 1e-3 * hidden), (hidden, found)


def test_throw_ball_lands_on_the_target():
    main = runpy.run_path(str(EXAMPLES / "throw_ball.py"))["main"]
    results = main(["--small"])
    before, after = results["before"], results["after"]
    assert before > 0.1, before  # the start throw misses by more than 10 cm
    assert after <= 1e-3 and after <= 1e-3 * before, (before, after)


def test_throw_ball_gradient_matches_central_differences():
    """dL/d(hand offsets) along a random direction, against central differences of the forward
    run solved to CN 1e-12 (the resolution test_adjoint.py uses)."""
    ns = runpy.run_path(str(EXAMPLES / "throw_ball.py"))
    throw = ns["Throw"](hold=6, flight=10, h=0.02, resolution=3, tolerance=1e-12)
    t = throw.h * np.arange(1, throw.hold + 1)
    offsets = np.outer(0.5 * 1.5 * t * t, [0.0, 1.0, 0.0])
    target = np.array([0.25, 0.05, 0.1])
    _, g = throw.loss_and_gradient(offsets, target)
    assert g.shape == offsets.shape

    def loss(o):
        r = throw.run(o) - target
        return 0.5 * float(r @ r)

    d = np.random.default_rng(3).uniform(-1, 1, offsets.shape)
    analytic = float(np.sum(g * d))
    eps = 1e-5
    fd = (loss(offsets + eps * d) - loss(offsets - eps * d)) / (2 * eps)
    assert abs(fd - analytic) <= 1e-5 * abs(analytic), (fd, analytic)
