"""Positions and velocities written from Python change the next step as the physics says: a
stress-free body given a uniform velocity translates rigidly by h·u; a translated body takes the
same step, translated; a stretched body recoils; writing back what was read changes nothing."""

import threading
import time

import numpy as np
import pytest

import jello

# A free neo-Hookean block, no gravity, no obstacles, no pins: only inertia and elasticity.
FREE_BLOCK = """
[simulation]
h = 0.01
steps = 10
gravity = [0.0, 0.0, 0.0]

[solver]
name = "newton"

[[objects]]
name = "block"
mesh = { generator = "box", min = [0.0, 0.0, 0.0], max = [0.2, 0.1, 0.1], cells = [4, 2, 2] }
material = { model = "neo_hookean", youngs_modulus = 1e5, poisson_ratio = 0.3, density = 1000.0 }
"""


def block():
    return jello.Simulation(jello.Scene.from_toml(FREE_BLOCK), backend="cpu")


def test_reading_and_writing_back_changes_nothing():
    a, b = block(), block()
    for _ in range(2):
        b.positions = b.positions
        b.velocities = b.velocities
        a.step()
        b.step()
        np.testing.assert_array_equal(a.positions, b.positions)
        np.testing.assert_array_equal(a.velocities, b.velocities)


def test_a_uniform_velocity_translates_a_stress_free_body_by_h_u():
    sim = block()
    x0 = sim.positions
    u = np.array([0.3, -0.2, 0.5])
    sim.velocities = np.tile(u, (sim.num_vertices, 1))
    report = sim.step()
    assert report["converged"]
    # No force acts on an undeformed body moving rigidly: x¹ = x⁰ + h·u, v¹ = u (round-off).
    np.testing.assert_allclose(sim.positions, x0 + sim.h * u, rtol=0, atol=1e-12)
    np.testing.assert_allclose(sim.velocities, np.tile(u, (sim.num_vertices, 1)), rtol=0,
                               atol=1e-9)


def test_a_translated_body_takes_the_same_step_translated():
    seed = 20251127
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    ref, moved = block(), block()
    v = rng.normal(scale=0.2, size=(ref.num_vertices, 3))
    ref.velocities = v
    moved.velocities = v
    d = np.array([0.7, -0.3, 0.2])
    moved.positions = moved.positions + d
    ref.step()
    moved.step()
    # Elasticity and inertia are translation invariant; only round-off of |x| ~ 1 m differs.
    np.testing.assert_allclose(moved.positions - d, ref.positions, rtol=0, atol=1e-9)
    np.testing.assert_allclose(moved.velocities, ref.velocities, rtol=0, atol=1e-7)
    assert not np.array_equal(ref.positions, ref.positions + d)


def test_a_stretched_body_recoils():
    sim = block()
    x0 = sim.positions
    stretched = x0 * np.array([1.1, 1.0, 1.0])
    sim.positions = stretched
    sim.step()
    # Released at 10 % stretch with no velocity, its ends accelerate inwards towards the 0.2 m
    # rest length.
    length = np.ptp(sim.positions[:, 0])
    assert 0.2 < length < 0.22 - 1e-4, length
    v = sim.velocities[:, 0]
    assert np.all(v[x0[:, 0] > 0.2 - 1e-9] < 0) and np.all(v[x0[:, 0] < 1e-9] > 0)


def test_stepping_releases_the_gil():
    # A worker thread takes one long step while the main thread records a timestamp every
    # millisecond. With the GIL held for the whole step the main thread could run Python only
    # within a switch interval (5 ms) of the step's ends; with it released it records all along.
    # The margins (20 ms at each end) leave room for scheduling on a loaded machine.
    window = {}
    done = threading.Event()

    def worker():
        sim = jello.Simulation(jello.Scene.from_toml(FREE_BLOCK.replace("[4, 2, 2]", "[32, 10, 10]")),
                               backend="cpu")
        sim.velocities = np.random.default_rng(1).normal(size=(sim.num_vertices, 3))
        t0 = time.perf_counter()
        sim.step()
        window["span"] = (t0, time.perf_counter())
        done.set()

    stamps = []
    th = threading.Thread(target=worker)
    th.start()
    while not done.is_set():
        stamps.append(time.perf_counter())
        time.sleep(0.001)
    th.join()
    t0, t1 = window["span"]
    lo, hi = t0 + 0.02, t1 - 0.02
    inside = sum(lo <= s <= hi for s in stamps)
    print(f"step {1e3 * (t1 - t0):.1f} ms, {inside} main-thread stamps inside it")
    assert t1 - t0 > 0.1, "the step is too short to tell"
    assert inside > 0
