//! DOT, the Decomposed Optimization Time integrator (Li, Gao, Langlois, Jiang, Kaufman 2019):
//! `--solver dot`, and its one-subdomain case LBFGS-H: `--solver lbfgs-h`.
//!
//! L-BFGS on the whole mesh ([`crate::solver::lbfgs`], the loop QN uses) whose initial
//! inverse Hessian is a non-overlapping domain decomposition of the projected Hessian at the
//! step's start ([`DomainInverse`]):
//!
//! ```text
//! once:      METIS partition of the elements into s subdomains (cached, jello precompute);
//!            per subdomain its vertices V_j, the principal-submatrix pattern, its symbolic
//!            Cholesky; B = 1/n_v per vertex (n_v: subdomains holding v)
//! per step:  H ← projected ∇²E(x_start) (Newton's assembly); H_j ← H restricted to V_j
//!            (interface blocks included: exactly the paper's ∇²E_j + K_j of Eq. 9);
//!            factor every H_j in parallel
//! per iter:  the L-BFGS two-loop (m = 5, no H₀ scaling, history reset per step) with
//!            D₁ q = B Sᵀ diag(H_j⁻¹) S q between the loops (scatter, parallel back-solves,
//!            averaged gather); α₀ = max(0.1, −∇Eᵀd / dᵀH d) (Eq. 14, H at x_start as in
//!            Algorithm 1); Armijo backtracking by halving from min(α₀, filter bound)
//! stop:      the shared characteristic-norm rule, ε = 1e-5 (Eq. 15)
//! ```
//!
//! With s = 1, D₁ = H⁻¹: LBFGS-H, the paper's other baseline, and the first direction from
//! x_start is exactly projected Newton's (`tests/cpu/dot.rs`). The penalty of the paper's
//! derivation lives only in D₁: E and ∇E are the true ones over one copy of every vertex, so
//! no interface gap can open and a converged step is Newton's step.
//!
//! # Backends
//! `DotSolver<CpuBackend>` is the f64 reference (every scene: obstacles, surface contact,
//! static increments). `DotSolver<DeviceBackend>` runs the same loop with the gradient,
//! energies, step filter and L-BFGS vector work in f32 WGSL kernels (or their twins), and
//! the per-step Hessian work that parallelises per element on the device too: the projected
//! element Hessians at x_start come from the `elastic` kernel (clamp or abs filter, the
//! eigen-decompositions on the device) and are read back once per step (576 bytes per
//! element) for the host to assemble, extract and factor the H_j in f64; the device keeps
//! them, so the quadratic start's dᵀH(x_start)d is one `dev_curvature` pass and a reduction
//! and the direction never leaves the device for it. Per iteration only q goes down and D₁q
//! comes up (2 × 16·n bytes). The scatter S, the solves and the averaging gather B stay on
//! the host with the factors: on the device they would move n̂ ≥ n copies instead of n values
//! per iteration, and the solves need the f64 factors anyway.
//!
//! Measured on lavapipe at ε = 1e-6 (`tests/gpu/gpu_dot.rs`, 50 steps, s = 3): moving the element
//! Hessians and the curvature onto the device changes the device run's iteration counts only
//! where f32 round-off decides the last digits of the residual — stiff_soft 642 → 733
//! iterations (the f64 run: 559), drop 929 → 1,886 because one step (48, the ball at rest
//! after its second bounce) sits at the f32 floor (residual 3.1e-6 against ε = 1e-6) and
//! runs to the 1000-iteration cap; with f64 element Hessians in the same device loop
//! stiff_soft took 3,559, so it is which round-off, not the f32 Hessians. At the scenes' own
//! ε = 1e-5 (`jello compare`, whole scenes) the device run converges every step with the f64
//! run's iteration counts: drop 811 / 811 over 80 steps (at most 47 per step), stiff_soft
//! 421 / 421 over 60, cantilever 479 / 479 over 100.
//!
//! # Choices the paper leaves open
//! - **Partition.** METIS k-way on the element dual graph (face adjacency), default seed:
//!   every element in exactly one subdomain, element counts balanced to METIS's 3%, few
//!   shared vertices ([`jello_precompute::partition`]). Subdomains METIS leaves empty on tiny
//!   meshes are dropped.
//! - **Subdomain count.** Default: the rayon thread count (the paper's one per core);
//!   `[solver] subdomains`.
//! - **Initial guess.** x_start (jello's shared choice for every solver: the step's start,
//!   or where the pins' scripts move them).
//! - **Projection.** Newton's: per element ∂P/∂F eigenvalues clamped at 0, barrier curvature
//!   kept PSD, pinned rows identity.
//! - **Non-symmetric D₁.** A direction with ∇Eᵀd ≥ 0, or whose line search fails, is
//!   retried without the history, then with the symmetric Sᵀ diag(H_j⁻¹) S (SPD, so a
//!   descent direction) before the step gives up.
//! - **Line search.** Armijo γ = 1e-4 (Nocedal–Wright's usual constant), halving, at most 30
//!   halvings; a start above 1 scales the direction (the step filter bounds α ≤ 1).
//! - **Curvature guard.** A pair is skipped when sᵀt ≤ 1e-10‖s‖‖t‖ (f64; 1e-5 in f32), as
//!   QN.
//! - **Ordering of each H_j.** METIS nested dissection of its vertex graph (the paper:
//!   CHOLMOD's AMD).
//! - **Factor failure.** A subdomain whose projected Hessian lost definiteness to round-off
//!   is refactored with a growing diagonal shift (counted in [`DomainStats::shifted`]).

//!
//! # Measured comparison (`cargo bench --bench solvers`, 2 cores, f64, CN ε = 1e-5, h = 25 ms)
//!
//! From Newton's states, DOT with s = 2 (the thread count), against newton, lbfgs-h, qn, admm,
//! jgs2 and vbd: `JELLO_SOLVERS_CASES=dot cargo bench --bench solvers`, the bundled regime (the
//! 16,640-vertex twist bar and the twist-stretch-squash (TSS) script on armadillo_18k and
//! bunny_20k, 2 steps from each state: DOT 451 / 68 / 102 ms per step against Newton's 911 /
//! 105 / 179), and `JELLO_SOLVERS_CASES=dot_hard cargo bench --bench solvers`, the paper's
//! large-deformation, high-speed regime (the TSS with E = 1e4 Pa, the script 4× faster (±90°
//! in 0.25 s) and its translations 1.6× larger, 1 step from each of 9 states, elements
//! inverting in the squash: DOT 437 / 572 ms per step against Newton's 1,510 / 3,392). The
//! tables (ms and iterations per step of every solver) are in the book's
//! docs/src/benchmarks/solvers.md ("DOT, QN, LBFGS-H, ADMM, JGS2 and VBD against Newton").
//!
//! DOT against Newton per step: 2.0× (bar), 1.5× and 1.8× (bundled TSS), 3.5× and 5.9× (hard
//! TSS) faster (the paper: 1.1–10×). Against QN: 0.96×, 0.74× and 0.59× on the bundled scenes
//! (QN faster: Newton needs 1.0–1.3 iterations there, so a Newton-quality direction has little
//! to win over QN's five cheap ones), 1.48× and 1.19× on the hard TSS (the paper: 1.6–11×).
//! Against LBFGS-H: 1.1–1.9× (the paper: 1–2.5×). In the hard regime DOT and QN take similar
//! iteration counts at similar cost (14–18 ms per iteration), while Newton refactors every
//! iteration (92–133 ms each); DOT's step on the hard armadillo (403 ms, profiled): Hessian at
//! x_start 17, factorisations 12, back-solves 42, gradients and trials 260, two-loop 24, line
//! search 46 ms. On the bar (442 ms): Hessian 90, factorisations 230, back-solves 20,
//! gradients and trials 97, two-loop and line search 5 ms.
//!
//! **Resolution: the DOT-vs-QN gap of the paper appears on the larger mesh.** The same hard
//! TSS on armadillo_114k (28,310 vertices; `JELLO_DOT_HARD_TSS="armadillo_114k,1e4,4,1.6,90"`,
//! Newton's trajectory: 32.4 iterations per step, 25 of 28 steps end with inverted elements,
//! up to 713): dot 46.7 s per step (150.3 iterations), lbfgs-h 41.3 s (154.6), qn 89.9 s
//! (115.4; one run on the 2 cores shared with two builds: read the ratios, not the times) —
//! DOT 1.92× faster than QN, inside the paper's 1.6–11× (1.48× on the 4,855-vertex
//! armadillo_18k). The gain does not come from fewer iterations (the paper's Fig. 7 has LBFGS-PD
//! lagging far behind; here QN needs fewer: 115 against 150) but from the line search: with `JELLO_DOT_HARD_SPLIT`
//! on armadillo_18k, QN takes 1.85 trials (energy + gradient evaluations) per iteration, DOT
//! 1.23 (s = 2) and LBFGS-H 1.05 — DOT's first trial, at −pᵀg / pᵀH(xᵗ)p, is usually accepted,
//! QN's α = 1 is halved about every other iteration — and on 114k QN's iteration costs 778 ms
//! against DOT's 311. Checks that DOT itself is faithful: its s = 1 direction is projected
//! Newton's (`tests/cpu/dot.rs`, 1e-14), its iterations track LBFGS-H's (31.0 / 26.6, 32.6 / 34.6,
//! 150 / 155; the paper: "matching LBFGS-H"), and they grow sublinearly with s (the sweep
//! below). What the hard regime shows instead is that a Hessian taken at the step's start is a
//! weak model when a step turns the handles by 9° and inverts hundreds of elements: DOT and
//! LBFGS-H need 4.6× and 4.8× Newton's iterations on armadillo_114k (1.9× and 1.6× on
//! armadillo_18k), so the
//! paper's "close to PN" convergence (its Fig. 7, a mid-stretch step of a gentler script) is a
//! property of the regime, not of the method.
//!
//! Peak heap above the baseline while the measured steps run (MB; construction included, see
//! `benches/solvers.rs`): bar newton 538, lbfgs-h 576, dot 545, qn 153, admm 177, jgs2 1,676
//! (1,934 while its subspace is built), vbd 221; hard TSS armadillo / bunny newton 77 / 99,
//! lbfgs-h 87 / 110, dot 84 / 107, qn 29 / 36, admm 34 / 42, jgs2 190 / 203, vbd 45 / 57.
//! DOT's factors are the smaller part of its footprint: on the bar, s = 1 … 64 takes factor
//! storage 240 → 64 MB but the run's peak only 576 → 404 MB (the global projected Hessian at
//! x_start and its 144-entry element blocks, 100 MB for 86,400 tets, stay per step). Subdomain
//! sweep on the bar (s = 1, 2, 4, …, 64): 1.0, 1.0, 3.0, 4.5, 4.5, 5.0, 6.0 iterations per step
//! — sublinear, as the paper's Fig. 6 — at 470–572 ms per step for s ≥ 2 (2 cores: the
//! parallel speed-up the paper counts on needs more).
//!
//! Robustness (`jello run … --solver dot --backend cpu`): the bundled
//! `twist_stretch_squash.toml` converges on 120/120 steps (458 iterations, at most 7 per step).
//! With `inversion = "allow"` the stop rule is met on every step of the same script on
//! bunny_20k (E = 1e5: 120/120, at most 38 iterations) and of both hard variants (30/30 each,
//! at most 161 and 92). Under the default `"forbid"` those three fail steps, as Newton does,
//! for a reason that is the material's, not the solver's: fixed corotated is finite through
//! inversion, and where the step's free optimum inverts an element (one or two thin elements at
//! a handle's edge: bunny steps 8–9 and 12–14, hard armadillo from step 3) the constrained
//! optimum lies on J = 0, where the gradient does not vanish — the strict retry runs to its
//! cap, as do the substeps, and the step is reported failed. Until the pins' carry
//! ([`crate::solver::pd::PinCarry`]) a second cause hid this one: the initial guess moved the
//! pinned vertices and left their free neighbours behind (hard armadillo: 54, 11 and 11
//! elements inverted at x_start in steps 1–3; now 0); a neo-Hookean column shoved or tipped
//! faster than that could not even start (`tests/cpu/pin_carry.rs`). Scenes like these belong under
//! `inversion = "allow"` (the paper's setting) or on a material with an inversion barrier.

mod cache;
mod domains;
mod params;

pub use cache::{cache_key, load_or_build_decomposition, DecompositionOrigin};
pub use domains::{DomainInverse, DomainStats};
pub use params::{DotParams, Gather};

use crate::error::{JelloError, Result};
use crate::problem::Model;
use crate::solver::backend::PotentialBackend;
use crate::solver::lbfgs::LbfgsSolver;
use jello_precompute::partition::Decomposition;
use std::sync::Arc;

/// DOT (and LBFGS-H) on a backend: the shared L-BFGS loop with the domain-decomposed H₀.
pub type DotSolver<B> = LbfgsSolver<B, DomainInverse>;

/// Checks the subdomain count against the model: one line naming the key.
pub fn check_subdomains(model: &Model, subdomains: usize) -> Result<()> {
    let ne = model.mesh.num_tets();
    if subdomains == 0 || subdomains > ne {
        return Err(JelloError::Invalid(format!(
            "solver.subdomains: must lie in 1..={ne} (the element count), got {subdomains}"
        )));
    }
    Ok(())
}

impl<B: PotentialBackend> LbfgsSolver<B, DomainInverse> {
    /// DOT for `model` on `backend`, partitioning now (no cache); the name is "lbfgs-h" for
    /// one subdomain, "dot" otherwise.
    pub fn new(model: &Model, backend: B, params: DotParams) -> Result<Self> {
        check_subdomains(model, params.subdomains)?;
        let d = Decomposition::new(model.num_vertices(), &model.mesh.tets, params.subdomains)
            .map_err(|e| JelloError::Solver(format!("dot: partition: {e}")))?;
        let name = if params.subdomains == 1 {
            "lbfgs-h"
        } else {
            "dot"
        };
        Self::with_decomposition(model, backend, params, Arc::new(d), name)
    }

    /// DOT for `model` on `backend` over a given decomposition, reporting as `name`.
    pub fn with_decomposition(
        model: &Model,
        backend: B,
        params: DotParams,
        decomposition: Arc<Decomposition>,
        name: &str,
    ) -> Result<Self> {
        if !(params.start_floor > 0.0 && params.start_floor.is_finite()) {
            return Err(JelloError::Invalid(format!(
                "{name}: the start floor must be positive and finite, got {}",
                params.start_floor
            )));
        }
        let h0 = DomainInverse::new(model, decomposition, params, name)?;
        LbfgsSolver::with_initial(backend, h0, params.lbfgs(), model.largest_extent()).map_err(
            |e| match e {
                JelloError::Invalid(m) => JelloError::Invalid(format!("{name}: {m}")),
                e => e,
            },
        )
    }
}
