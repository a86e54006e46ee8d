"""Pins driven from Python: a controller that sets, before each step, the targets a script would
give reproduces the scripted run bit for bit; pinned vertices end every step at their targets."""

import numpy as np

import jello

BEAM = """
[simulation]
h = 0.01
steps = 4
gravity = [0.0, -9.81, 0.0]

[solver]
name = "newton"

[[objects]]
name = "beam"
mesh = {{ generator = "box", min = [0.0, -0.05, -0.05], max = [0.4, 0.05, 0.05], cells = [8, 2, 2] }}
material = {{ model = "neo_hookean", youngs_modulus = 1e5, poisson_ratio = 0.3, density = 1000.0 }}

[[pins]]
region = {{ box = {{ min = [-0.001, -1.0, -1.0], max = [0.001, 1.0, 1.0] }} }}
script = {script}
"""


def beam(script):
    return jello.Simulation(jello.Scene.from_toml(BEAM.format(script=script)), backend="cpu")


def test_a_controller_replaying_a_script_gives_the_scripted_run_bit_for_bit():
    scripted = beam('{ type = "rotate", center = [0.0, 0.0, 0.0], axis = [0.0, 0.0, 1.0], omega = 2.0 }')
    driven = beam('{ type = "fixed" }')
    assert len(driven.pins) == 1 and np.array_equal(driven.pins[0], scripted.pins[0])
    pinned = driven.pins[0]

    def controller(sim, report):
        np.testing.assert_array_equal(sim.positions[pinned], targets[-1])
        targets.append(scripted.pin_targets(0, sim.time + sim.h))
        sim.set_pin_targets(0, targets[-1])

    targets = [scripted.pin_targets(0)]
    driven.set_pin_targets(0, targets[0])
    for step in range(4):
        a = scripted.step()
        b = driven.step()
        controller(driven, b)
        assert a["iterations"] == b["iterations"]
        np.testing.assert_array_equal(scripted.positions, driven.positions)
        np.testing.assert_array_equal(scripted.velocities, driven.velocities)
    # The same loop through run()'s callback, which may also stop the run.
    again = beam('{ type = "fixed" }')
    targets = [scripted.pin_targets(0, again.h)]
    again.set_pin_targets(0, targets[0])
    calls = []

    def stop_after_two(sim, report):
        controller(sim, report)
        calls.append(report["step"])
        return len(calls) < 2

    reports = again.run(4, callback=stop_after_two)
    assert [r["step"] for r in reports] == calls == [1, 2]
    assert again.step_count == 2


def test_held_targets_stay_until_set_again():
    sim = beam('{ type = "translate", velocity = [0.0, 1.0, 0.0] }')
    pinned = sim.pins[0]
    lifted = sim.positions[pinned] + [0.0, 0.02, 0.0]
    sim.set_pin_targets(0, lifted)
    sim.run(3)
    np.testing.assert_array_equal(sim.positions[pinned], lifted)
    np.testing.assert_array_equal(sim.pin_targets(0, t=100.0), lifted)
