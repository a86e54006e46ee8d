"""Exact gradients from Python (`sim.record()`, `tape.backward(...)`): central finite differences
of the forward run agree with the adjoint; a loss that cannot depend on a parameter has an exactly
zero gradient; bad requests raise one ValueError naming the problem."""

import numpy as np
import pytest

import jello

BAR = """
[simulation]
h = 0.01
steps = 3
gravity = [0.0, -9.81, 0.0]

[solver]
name = "newton"
stop = "cn"
tolerance = 1e-12
max_iterations = {iterations}

[[objects]]
name = "bar"
mesh = {{ generator = "box", min = [0.0, -0.025, -0.025], max = [0.3, 0.025, 0.025], cells = [6, 1, 1] }}
material = {{ model = "stable_neo_hookean", youngs_modulus = {E}, poisson_ratio = 0.3, density = 1000.0 }}

[[pins]]
region = {{ box = {{ min = [-0.001, -1.0, -1.0], max = [0.001, 1.0, 1.0] }} }}
script = {{ type = "fixed" }}
"""

E = 2e5
STEPS = 3


def bar(e=E, iterations=200):
    scene = jello.Scene.from_toml(BAR.format(E=e, iterations=iterations))
    return jello.Simulation(scene, backend="cpu")


def seeds(n):
    rng = np.random.default_rng(4)
    return {1: rng.uniform(-1, 1, (n, 3)), STEPS: rng.uniform(-1, 1, (n, 3))}


def loss(e=E, v0=None):
    """L = Σ_s c_s·x^s of a forward run."""
    sim = bar(e)
    if v0 is not None:
        sim.velocities = v0
    c = seeds(sim.num_vertices)
    total = 0.0
    for _ in range(STEPS):
        report = sim.step()
        assert report["converged"], report
        if report["step"] in c:
            total += float(np.sum(c[report["step"]] * sim.positions))
    return total


def test_gradients_match_central_differences():
    sim = bar()
    tape = sim.record()
    sim.run(STEPS)
    assert tape.steps == STEPS and tape.first_step == 0
    g = tape.backward(seeds(sim.num_vertices),
                      wrt=("youngs_modulus", "initial_velocities", "pin_targets", "forces"))
    assert g["youngs_modulus"].shape == (len(sim.tets),)
    assert g["initial_velocities"].shape == (sim.num_vertices, 3)
    pinned = sum(len(p) for p in sim.pins)
    assert g["pin_targets"].shape == (STEPS + 1, pinned, 3)
    assert g["forces"].shape == (STEPS, sim.num_vertices, 3)
    # One Young's modulus for the whole bar: dL/dE = Σ_tets dL/dE_t.
    analytic = float(np.sum(g["youngs_modulus"]))
    eps = 1e-4 * E
    fd = (loss(E + eps) - loss(E - eps)) / (2 * eps)
    assert abs(fd - analytic) <= 1e-5 * abs(analytic), (fd, analytic)
    d = np.random.default_rng(9).uniform(-1, 1, (sim.num_vertices, 3))
    analytic = float(np.sum(g["initial_velocities"] * d))
    eps = 1e-4
    fd = (loss(v0=eps * d) - loss(v0=-eps * d)) / (2 * eps)
    assert abs(fd - analytic) <= 1e-5 * abs(analytic), (fd, analytic)


def test_a_loss_on_the_pins_alone_has_zero_material_gradient():
    sim = bar()
    tape = sim.record()
    sim.run(2)
    mask = np.zeros((sim.num_vertices, 1))
    for p in sim.pins:
        mask[p] = 1.0
    dx = {2: mask * np.random.default_rng(1).uniform(-1, 1, (sim.num_vertices, 3))}
    g = tape.backward(dx, wrt=("youngs_modulus", "density", "initial_velocities"))
    assert np.all(g["youngs_modulus"] == 0.0)
    assert np.all(g["density"] == 0.0)
    assert np.all(g["initial_velocities"] == 0.0)
    # A loss at step 0 is the identity map.
    x0 = np.ones((sim.num_vertices, 3))
    g = tape.backward({0: x0}, dv={0: 2 * x0}, wrt=("initial_positions", "initial_velocities"))
    assert np.array_equal(g["initial_positions"], x0)
    assert np.array_equal(g["initial_velocities"], 2 * x0)


def test_bad_requests_raise_one_value_error():
    sim = bar()
    tape = sim.record()
    sim.run(2)
    n = sim.num_vertices
    ok = {2: np.zeros((n, 3))}
    with pytest.raises(ValueError, match="step 5 was not recorded"):
        tape.backward({5: np.zeros((n, 3))})
    with pytest.raises(ValueError, match="unknown parameter `stiffness`"):
        tape.backward(ok, wrt=("stiffness",))
    with pytest.raises(ValueError, match="no IPC contact"):
        tape.backward(ok, wrt=("contact_stiffness",))
    with pytest.raises(ValueError, match=r"dx\[2\]"):
        tape.backward({2: np.zeros((n + 1, 3))})
    with pytest.raises(ValueError, match="refuse"):
        tape.backward(ok, unconverged="maybe")
    # Setting the state between steps breaks the record.
    sim.velocities = np.zeros((n, 3))
    sim.step()
    with pytest.raises(ValueError, match="state was set between steps 2 and 3"):
        tape.backward(ok)
    # Unconverged steps: refused, or flagged on request.
    sim = bar(iterations=1)
    tape = sim.record()
    sim.run(2)
    with pytest.raises(ValueError, match="step 1 did not converge"):
        tape.backward({2: np.ones((n, 3))}, wrt=("youngs_modulus",))
    g = tape.backward({2: np.ones((n, 3))}, wrt=("youngs_modulus",), unconverged="flag")
    assert g["unconverged_steps"] == [1, 2]


def test_checkpointed_records_give_the_kept_records_gradients():
    """record(checkpointing=...) keeps fewer states and re-solves the others in backward, with
    the pins where the simulation held them (here set from Python every step): the gradients
    are those of the record that keeps every state."""
    steps = 8
    n = bar().num_vertices
    rng = np.random.default_rng(5)
    dx = {steps: rng.uniform(-1, 1, (n, 3)), 3: rng.uniform(-1, 1, (n, 3))}
    dv = {steps: rng.uniform(-1, 1, (n, 3))}
    wrt = ("youngs_modulus", "initial_velocities", "pin_targets")

    def gradients(*mode):
        sim = bar()
        tape = sim.record(*mode, tolerance=1e-12)
        rest = sim.pin_targets(0, 0.0)
        for s in range(1, steps + 1):
            # The clamp rises and turns a little about z: targets no script in the scene has.
            a = 0.02 * s
            rot = np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0],
                            [0.0, 0.0, 1.0]])
            sim.set_pin_targets(0, rest @ rot.T + [0.0, 0.002 * s, 0.0])
            assert sim.step()["converged"]
        return tape.backward(dx, dv=dv, wrt=wrt), tape.last_backward

    kept, stats = gradients("all")
    assert stats["recomputed_steps"] == 0 and stats["peak_states"] == steps + 1
    for mode in (("every", 3), ("binomial", 2)):
        g, s = gradients(*mode)
        assert s["recomputed_steps"] >= steps and s["peak_states"] < steps + 1, (mode, s)
        for name in wrt:
            # The scene's solver is the tape's Newton at the same CN tolerance: the re-solved
            # states are the simulation's bit for bit, and so are the gradients.
            assert np.array_equal(g[name], kept[name]), (mode, name)


def test_bad_checkpointing_choices_raise_one_value_error():
    sim = bar()
    with pytest.raises(ValueError, match=r'checkpointing="every" needs k ≥ 1'):
        sim.record("every")
    with pytest.raises(ValueError, match=r'checkpointing="binomial" needs k ≥ 1'):
        sim.record("binomial", k=0)
    with pytest.raises(ValueError, match="expected \"all\", \"every\" or \"binomial\""):
        sim.record("sometimes")
