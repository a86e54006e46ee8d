"""The minimiser the adjoint examples share: scipy's L-BFGS-B when scipy is installed, else the
small L-BFGS below (two-loop recursion, backtracking Armijo line search)."""

import numpy as np


def lbfgs(f, u, iterations=60, memory=8, gtol=1e-10):
    """Minimises f (returning value and gradient) from u: L-BFGS with a backtracking Armijo
    line search."""
    value, grad = f(u)
    s_hist, y_hist = [], []
    for _ in range(iterations):
        if np.linalg.norm(grad) < gtol:
            break
        q = grad.copy()
        alphas = []
        for s, y in reversed(list(zip(s_hist, y_hist))):
            a = s @ q / (y @ s)
            alphas.append(a)
            q -= a * y
        if s_hist:
            q *= (s_hist[-1] @ y_hist[-1]) / (y_hist[-1] @ y_hist[-1])
        for (s, y), a in zip(zip(s_hist, y_hist), reversed(alphas)):
            q += s * (a - y @ q / (y @ s))
        direction = -q
        step = 1.0
        while True:
            trial = u + step * direction
            v, g = f(trial)
            if v <= value + 1e-4 * step * (grad @ direction) or step < 1e-12:
                break
            step *= 0.5
        if (g - grad) @ (trial - u) > 0:
            s_hist.append(trial - u)
            y_hist.append(g - grad)
            s_hist, y_hist = s_hist[-memory:], y_hist[-memory:]
        u, value, grad = trial, v, g
    return u


def minimize(f, u0):
    """argmin of f (value and gradient, scaled so the start's value is O(1): the tolerances are
    absolute) from u0: scipy's L-BFGS-B if available (at most 100 iterations), else `lbfgs`."""
    try:
        from scipy.optimize import minimize as scipy_minimize
    except ImportError:
        return lbfgs(f, u0)
    result = scipy_minimize(f, u0, jac=True, method="L-BFGS-B",
                            options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 100})
    return result.x
