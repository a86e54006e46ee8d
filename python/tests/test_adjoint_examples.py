"""The adjoint examples do their job at small size: the Young's modulus identification recovers
the hidden values (one for the beam, then one per half) to 1e-3 relative."""

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
