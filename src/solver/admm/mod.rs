//! ADMM-PD (Overby, Brown, Li, Narain 2017, "ADMM ⊇ Projective Dynamics"): `--solver admm`,
//! one loop ([`AdmmSolver`], generic over [`crate::solver::admm::AdmmBackend`]) in f64 on
//! the CPU and in f32 on a device (a GPU or the WGSL kernels' CPU twins).
//!
//! The step's objective E(x) = ½‖x − x̃‖²_M/h² + Σ_e U_e(D_e x) is split on z = Dx with ρ = 1
//! and W_e = w_e I, and solved by the paper's Algorithm 1 with the local step first:
//!
//! ```text
//! per step:   x ← x_start; ū ← 0
//! per iteration:
//!   per element:  v_e = D_e x + ū_e;  z_e = prox_e(v_e);  ū_e ← v_e − z_e        (z, u steps)
//!   A x = M x̃/h² + Σ_e w_e² D_eᵀ(z_e − ū_e)   (pins eliminated, prefactored)    (x step)
//!     — with obstacles: the same A, subject to n·x_v ≥ n·p + d̂ rows ([`contact`])
//!   r = W(Dx − z),  s = DᵀW²(zⁿ⁺¹ − zⁿ)                                         (--trace)
//! ```
//!
//! # The matrix, and its scaling
//! The paper's x-step matrix is M + h² DᵀW²D; divided by h² it is A = M/h² + Σ_e w_e² D_eᵀD_e,
//! which is exactly the projective-dynamics matrix of [`crate::solver::pd::GlobalSystem`]
//! (mass weight `problem.inertia` = 1/h², element weights V_e k_e × `weight_scale`) when
//! w_e² = V_e k_e — so ADMM reuses that factor (one faer Cholesky per pin set and h, three
//! right-hand sides per solve) and its right-hand side is b = M x̃/h² + Σ w_e² D_eᵀ(z_e − ū_e),
//! the paper's (44). Default w_e² = V_e k_e, k_e the least-squares fit of the material's 1-D
//! stress curve on [0.5, 1.5] (the digest's suggestion "k_i = V_i κ"; for ARAP k = 2μ, i.e.
//! w² is PD's weight, with which ADMM *is* PD on affine constraint sets — `tests/cpu/admm.rs` T1).
//! `[solver] weight_scale` multiplies every w_e² (the paper's Fig. 10/11 sweeps: w = ½√k is
//! `weight_scale = 0.25`); it changes the rate, not the solution (T6).
//! The factor is made once per run (per pin set and h), never per step or iteration
//! ([`crate::solver::pd::GlobalSystem::factorizations`]).
//!
//! In this module z and ū are stored as deformation gradients F = Σ_a x_a ∇N_aᵀ (the
//! transpose of the PD operator's D_e x = Fᵀ; the transpose is an isometry, so norms,
//! weights and proxes are unchanged), and D_eᵀG adds G∇N_a to vertex a.
//!
//! # z-step
//! [`prox`]: the PD projection (`prox = "pd"`, ARAP-like energies, exact for any w) and the
//! isotropic hyperelastic prox on signed singular values (`prox = "hyperelastic"`, default,
//! every material; damped Newton on σ — see the module for the solver and its tolerance).
//!
//! # Hard strain limits
//! A material's `strain_limit = [lo, hi]` ([`crate::problem::StrainLimit`]) asks every signed
//! singular value of F in [lo, hi]. The paper (Eq. 41–42) makes such a limit its own
//! block — U_c the indicator of the set S, z_c = proj_S(D x + ū_c), a clamp of σ — with its own
//! weight in the global matrix. Here it joins the element's own block instead: the z-step is the
//! prox of U_e + δ_S, the minimum of V ψ̂(σ) + w²/2‖σ − σ̃‖² over σ ∈ [lo, hi]³
//! ([`prox::prox_sigma_within`], projected Newton; for the PD prox of ARAP the closed form, the
//! PD average's σ clamped, exact because that σ-objective is separable and convex). Same
//! solution, no second weight to tune (the paper's Fig. 5: too large a constraint weight starves
//! the other forces), and the matrix and its factor are unchanged. The projection is on the
//! signed SVD, so σ ≥ lo > 0 also keeps z uninverted. z holds the limits after every z-step
//! (`tests/cpu/admm_strain.rs`: violation ≤ 2e-15 over six iterations of a stretched bar); x is
//! infeasible until convergence (as in the paper). At a solution ∇E = −Σ D_eᵀν_e with
//! ν_e = w²ū_e − V_e P(z_e) the limit's force, so the stop rule measures ∇E + Σ D_eᵀν_e over the
//! limited elements (the KKT residual; without limits it is ∇E). Measured (`tests/cpu/admm_strain.rs`,
//! a 0.5 m stable Neo-Hookean bar, E = 2e4 Pa, hanging from its top, h = 20 ms, 8 steps of free
//! fall, ε = 1e-5): unlimited σ ∈ [0.90, 1.31] in 83 iterations; limited to [0.95, 1.05]
//! σ(x) ∈ [0.984, 1.051] in 208 iterations, every step converged. Other solvers refuse a model
//! with limits (they would ignore them); linear elasticity, which is not a function of σ, cannot
//! have one.
//!
//! # Stopping
//! - `mode = "rule"` (default): jello's shared rule (`--stop cn|dx`) evaluated on the true
//!   gradient of [`crate::problem::StepProblem`] after every iteration (one extra element pass
//!   per iteration; the same rule and meaning of `converged` as every solver), capped by
//!   `max_iterations` (default 1000). ADMM converges linearly and stalls at tight tolerances:
//!   a step that reaches the cap ends there, reported not converged, with its residual.
//! - `mode = "fixed"`, `iterations = N`: the paper's fixed count (Table 2: 7–40); the step
//!   reports `converged` as the rule's verdict where it ended.
//!
//! The paper's r/s rule is not used to stop (it gives no thresholds, and ‖r‖, ‖s‖ small does
//! not bound the true gradient in jello's units); r and s are in every `--trace` record
//! (`primal`, `dual`).
//!
//! # Choices the paper leaves open
//! - **Start.** x ← `problem.x_start` (x̃ pulled back where it would invert an element or
//!   cross an obstacle, or xᵗ when that has lower energy: every jello solver's start), ū ← 0,
//!   z⁰ = D x_start (for the first iteration's s only). Nothing is carried between steps
//!   (the paper mentions no warm start).
//! - **Inversion.** Nothing in the solver: the hyperelastic prox keeps J > 0 for models
//!   infinite through inversion (Neo-Hookean), but x from the global step may invert an
//!   element; the step's true residual is then +∞ (not met) and the iterations continue; the
//!   simulation's state check reports what is left at the end.
//! - **Static solves** are refused with one line (the splitting needs the inertia term).
//! - **Obstacles** ([`contact`]): the global step becomes the QP min ½xᵀAx − bᵀx subject to
//!   one linearised row per vertex within 2d̂ of an obstacle, n·x ≥ n·p + d̂, solved on the
//!   same factor — never refactored when contacts change — by Uzawa CG (default) or projected
//!   Gauss–Seidel, both with λ ≥ 0 (vertices lift off); explicit Coulomb friction
//!   (`friction = μ`) is fed into the right-hand side during the iterations; the stop rule
//!   runs on the KKT residual of the barrier-free objective and needs every vertex ≥ d̂ from
//!   every obstacle. See that module for the choices.
//!
//! # Anderson acceleration and the penalty update
//! Plain ADMM converges linearly and, on nonconvex energies at w² = V k, can settle into a
//! cycle (below). Two additions, both on by default and both host f64 work on either backend:
//! - `anderson.rs`: type-II Anderson on the map G: q = (z, ū) ↦ (z', ū') (Zhang, Peng, Ouyang,
//!   Deng 2019). The local step runs first here, so the map's input is the state after a local
//!   step: the x-step from q, then the next local step. The mix is formed right after a local
//!   step, written into the backend's z and ū, and the x-step's right-hand side is the same
//!   combination of the stored plain right-hand sides (it is linear in z − ū). Safeguard: the
//!   combined residual ‖G(q) − q‖_W — which equals (‖W(Dx − z')‖² + ‖W(z' − z)‖²)^½ because
//!   ū' − ū = Dx − z' — of a mixed state is compared with the previous iteration's; if it grew
//!   (or is NaN: a mix that inverted the x-step) the mix is discarded, the previous plain output
//!   G(q_{k−1}) taken instead, x restored and the history cleared. An iteration is one x-step
//!   either way (a rejected mix costs one), so iteration counts compare with plain ADMM's.
//!   Not with obstacles (the contact solve's active set, multipliers and friction forces are
//!   iteration state outside q, so q ↦ q' is not the iteration's map) nor with strain limits
//!   (a mix of z's inside the limits' set is not inside it: the set of F with σ ∈ [lo, hi] is
//!   not convex).
//! - Residual balancing ([`PenaltyParams`], Boyd et al. 2011 §3.4.1) on a global factor ρ on
//!   every w². The two parts of the combined residual play Boyd's primal and dual residuals
//!   (both √J in the same weights, so their ratio is unit-free). A change of ρ by a factor c
//!   divides ū by c (the unscaled dual ρū is kept), uploads ρw², and needs A with ρw²: that is
//!   ρ times the system with mass weight 1/(h²ρ), so the x-step uses
//!   [`crate::solver::pd::GlobalSystem`]'s factor cache keyed on the mass weight (ρ values seen
//!   before cost no factorisation) and divides its right-hand side by ρ. The right-hand side of
//!   the rescaled state is scattered once on the host. Balance alone never fires in the
//!   stiff_soft cycle (its two parts stay within 10× of each other), so a check that finds
//!   the combined residual less than 10% lower than at the previous check also raises ρ: the
//!   larger w that the weight sweeps found to break the cycle, reached without a user's
//!   `weight_scale`. Checks every 10 iterations, at most 4
//!   updates per step (the refactorisation bound; a fixed map after them), ρ kept across steps.
//!   The Anderson history is cleared at an update (the map changed). Off with obstacles (the
//!   contact solve is built on ρ = 1).
//!
//! On a device the history lives on the host: the two fields are read back after the local
//! step and the mixed state written (48 bytes per element per field each way); a device-side
//! history would need per-field dot and combine kernels for a cost that, at the measured bus
//! share (below, 1–3% for the positions), is not where an iteration's time goes.
//!
//! # Device
//! The loop is written once over [`crate::solver::admm::AdmmBackend`] (the second solver on
//! the backend traits after QN; `ARCHITECTURE.md`): per-element 3×3 fields for z and ū, the
//! local step, the scatter Σ w²Dᵀ(·), the residuals, and the x-step's bridge to one host f64
//! routine. [`crate::solver::backend::CpuBackend`] runs it in f64 with this module's
//! [`prox`] (and a test's [`CustomProx`], CPU only); [`crate::solver::backend::DeviceBackend`]
//! in f32 with three kernels (`shaders/admm_*.wgsl`, twins in `crate::gpu::twins::admm`):
//! - `admm_local`, one element per invocation: F from x, v = F + ū, z = prox(v) — the PD
//!   projection, or the hyperelastic prox mirrored from [`prox`] (signed SVD `svd3`, the
//!   σ-Newton with `material.wgsl`'s ψ̂ derivatives for every material; f32 constants: at most
//!   30 Newton iterations, ‖∇φ‖ ≤ 2e-6·τ(1 + ‖σ̃‖), φ noise 1e-5 relative; linear elasticity
//!   in closed form, skew(F − I) = skew(v − I) and the symmetric part from its trace, instead
//!   of the f64 9 × 9 solve) — ū ← v − z, and the corner forces w²(z − ū)∇N_a and
//!   w²(zⁿ⁺¹ − zⁿ)∇N_a (8 vec4 per element);
//! - `admm_gather`, one vertex per invocation: both sums over the vertex→element CSR (no
//!   atomics), the right-hand side into a vector and |s_v|² over the free vertices as per-group
//!   partials;
//! - `admm_primal`: the partials of Σ w²‖F(x) − z‖² at the new x.
//!
//! The x-step is host code, one routine (`global_step` in `solver.rs`): it receives the
//! right-hand side Σ w²Dᵀ(z − ū) (3n f64, read from the device) and the positions, adds
//! M x̃/h² in f64 (the large inertial term never passes through f32), subtracts the pins,
//! solves on the prefactored matrix — or, with obstacles, runs the constrained solve of
//! [`contact`] on the same factor — and writes the new positions into the host's x (3n f64),
//! which the device gets back as its current point. x itself never crosses to the host: the
//! host keeps the f64 output of the last x-step. Per iteration the bus carries the right-hand
//! side (16·n bytes) and the positions (16·n bytes) plus one read of the scalar/partials buffer (~4 KB: the primal and dual
//! partials, and under the stop rule the true gradient's residual and energy change);
//! everything else stays on the device. Measured (`tests/gpu/gpu_admm.rs`
//! `admm_bus_traffic_per_iteration`, debug profile, 20 fixed iterations per step, 2 shared
//! cores): twist (525 vertices, 16.8 KB per iteration) on lavapipe (Vulkan) 4.7–4.8 ms per
//! iteration, of which the transfers are 0.15–0.17 ms (3.3–3.5%) and the host solve 0.14 ms
//! (3.0%), the local step ~1.5 ms; on the twins 2.0 ms with 0.003 ms and 0.14 ms (7%). A
//! clamped 40×8×8-cell bar (3,321 vertices, 15,360 tets, 106 KB per iteration): lavapipe 19.7
//! ms per iteration, transfers 0.24 ms (1.2%), host solve 2.4 ms (12%), local step ~6.4 ms;
//! twins 18.4 ms, 0.03 and 2.5 ms (13.5%). Release (`cargo bench --bench solvers`, case
//! `admm_split`: the Table I bar, Neo-Hookean, 3,321 vertices, 10 fixed iterations per frame,
//! 2 cores under load ~2.8): f64 CPU 49 ms per iteration (the prox 45 ms, 91%; the x-step's
//! solve 1.0 ms); lavapipe 28 ms (local step 14 ms, 50%; transfers 0.4 ms, 1.5%; host solve
//! 1.0 ms, 3%; residual reads 1.6 ms; per-step work — the start's references and gradient,
//! the final gradient and the f64 report energies — 11 ms per iteration, 39%); twins 35 ms.
//! The transfers stay small; the f64 triangular solves are the part of an iteration a faster
//! device cannot shrink.
//! Against the f64 CPU ADMM (`jello compare`, 50 steps, lavapipe): twist 4.2e-7 of the
//! diagonal, cantilever 5.5e-6, stiff_soft 8.7e-7 (its stall included: both hit the cap on the
//! same steps), with the same iteration counts (134, 423, 7,631) — the x-step's f64 solve
//! keeps the f32 local steps from drifting; the twins follow the f64 run on twist within
//! 3.8e-7 over 20 steps and the device's z-step meets w²ū = ∇U(z) to 2.4e-6 (relative, T5).
//! Static solves are refused on either backend with the same one line. Obstacles run on the
//! f64 CPU backend only (the contact QP, the KKT residual and the feasibility check are host
//! f64 work on every iterate; moving them behind the device would read x back per iteration):
//! a GPU request with obstacles is one line, `auto` runs it on the CPU.
//!
//! # Measured (f64, 2 cores; `tests/cpu/admm.rs` prints its figures)
//! - T1: on linear elasticity with λ = 0 (the affine PD energy), six ADMM iterations equal six
//!   PD local/global iterates to 9e-16 m, with either prox. T3: on U = ½k‖F − C‖² with w² = k
//!   the x-step is exact after one iteration and the z and ū errors fall by 0.50000000 per
//!   iteration. T5: ‖w²ū − V P(z)‖ ≤ 1e-12 · w²(1 + ‖z‖ + ‖ū‖) for every material (3 PD, 7
//!   hyperelastic cases) at weight scales 1 and 0.25.
//! - One step from the bundled scenes' Newton trajectories (`tests/cpu/admm.rs`): to ε = 1e-5
//!   twist takes 2 iterations (‖x − x_Newton‖_M = 4.9e-5, its gradient bound 1.1e-2),
//!   stiff_soft 9 (1.7e-4 / 1.7e-2); to 1e-7 cantilever 40, twist 19, stiff_soft 38. Past
//!   that the rate is linear — twist: residual 5.9e-7 after 10 iterations, 1.7e-8 after 30,
//!   1.3e-10 after 100, 1.9e-14 after 300, then a floor at 4.6e-15 (r 1.2e-13 √J, s 1.5e-11 N);
//!   cantilever and stiff_soft reach 1.2e-14 and 1.4e-14 after ~2000–3000 iterations. r and s
//!   fall at the same rate as the residual.
//! - Whole runs to ε = 1e-5, total iterations (Newton, QN alongside): cantilever 927 (100,
//!   426), twist 270 (80, 88), stiff_soft 17,631 with 17 of 60 steps at the 1000 cap (67,
//!   569). stiff_soft (E = 1e7 beside 1e4) stalls from step 44 on: after reaching 1.2e-5 in 24
//!   iterations the iterates drift to a cycle with r ≈ 0.16 √J and s ≈ 1.5 N that does not
//!   decay (residual 2.0e-4). Restarting the σ-Newton from several starts changed nothing
//!   (not a prox branch switch); a larger w does: the paper's warning that too small a w
//!   fails on nonconvex energies. weight_scale sweep (total iterations, steps converged):
//!   cantilever 0.25: 2022, 0.5: 1118, 1: 927, 2: 1292, 4: 2535 (all converged); twist 521,
//!   368, 270, 222, 215; stiff_soft 14/60, 30/60, 43/60, 55/60, 60/60 (1,500 iterations at 4).
//!   The default stays the paper's w² = k (best on cantilever, and what T1 needs).
//! - The same stall on armadillo_18k (kicked foot, stable Neo-Hookean E = 1e5, h = 10 ms,
//!   `benches/solvers.rs`): the first step at w² = V k reaches 2.7e-5 by iteration ~60 and
//!   then holds r = 0.13 √J, s = 4.9 N to two digits for hundreds of iterations (the bench's
//!   three steps: 1000, 6000, 6000 iterations with the forbid ladder's retries, none
//!   converged); weight_scale = 4 converges in 198 iterations, 16 is slower again (5.6e-5
//!   after 300). A constant nonzero s with constant r is a period-2 cycle of z (ADMM has no
//!   fixed point with r ≠ 0): the likely cause is a z-step whose φ is nonconvex at small τ
//!   (two minima the iterates alternate between); larger τ = w²/V convexifies it. Adaptive
//!   weights are not in the paper: see the penalty update above.
//! - Contact (`benches/solvers.rs` case `admm_contact`, `tests/cpu/admm_contact.rs`; 2 cores
//!   shared with other builds, so wall times are rough): `drop.toml` (80 steps, ε = 1e-5)
//!   converges every step with either solve in 785 ADMM iterations (9.8 per step; Newton 274)
//!   and one factorisation; Uzawa averages 3.8 CG iterations and 4.9 factor
//!   solves per global step, PGS 184 sweeps (mostly at the 200 cap) and one solve;
//!   wall 4.0–7.6 s (Uzawa), 6.9–10.1 s (PGS), Newton 4.5–4.6 s (three runs on the shared
//!   machine; compare within a run only).
//!   T13 (digest; the paper's Fig. 10 centre): drop.toml's ball resting on the ground, one
//!   step of h = 0.2 s, error ‖x_N − x*‖_M relative to the start after N iterations: Uzawa
//!   1.9e-1 (N = 5), 2.1e-2 (20), 2.4e-3 (40), 4.1e-5 (80, 0.70 s), 1.6e-8 (160, 1.4 s; the
//!   floor of x* at ε = 1e-11); the paper's UCG(10) is identical (CG needs ≤ 10 iterations
//!   here), and — unlike the paper's figure — does not stall, because the active set handles
//!   λ ≥ 0. PGS (≤ 200 sweeps) 3.9e-1, 4.9e-2, 7.4e-3, 4.3e-3 and then stalls at 3.3e-3
//!   (N = 320, 2.8 s); the paper's PGS(30) stalls at 2.5e-2. Its sweeps do not converge on A
//!   at h = 0.2 s (mass weight small beside the stiffness: Gauss–Seidel on a Laplacian), and
//!   the inexact global step stalls ADMM (30 → 200 sweeps lowers the plateau from 2.5e-2 to
//!   3.3e-3: slow convergence of ADMM with a weak x-step, not a different solution — at a
//!   fixed point of the pair the sweeps return their start, which is then the QP's
//!   solution); the paper's "PGS goes lower" is not reproduced. Two corrections by the
//!   factor every 10 sweeps (A⁻¹(b + Cᵀλ) with λ re-estimated from the sweeps; A⁻¹ of the
//!   residual less its normal part at contact vertices), each taken only when it lowered
//!   the objective, were tried: neither was ever taken, the figures did not move, and they
//!   were dropped.
//!   Uzawa is the default. One step of a 5 cm ball at h = 0.1 s to ε = 1e-9 (T13 test):
//!   Uzawa 63 iterations, PGS 366 (d̂ = 1e-3) or 63 (d̂ = 1e-4: its tolerance is relative to
//!   d̂), landing within 8e-7 of each other in the M-norm (bound 1e-6); Newton's barrier
//!   solution differs by d̂ exactly (1.00e-3, 1.00e-4 m: the whole ball rests d̂ higher).
//!   drop.toml at step 16 (ball on the ground): within 3.5e-4 m = d̂ of Newton's solution.
//!   Friction (incline θ = 0.3, μ = 0.5 tan θ, 30 steps): displacement 6.7414e-2 m against
//!   the exact discrete 6.7403e-2 m (a = g(sin θ − μ cos θ)); μ = 1.5 tan θ: 3.6e-5 m (the
//!   elastic settling) against a free slide of 0.13 m.
//! - Cost (release, wall time of whole runs over iterations): an iteration costs about as much
//!   as a QN one — the prox's SVD and σ-Newton per element plus one true-gradient pass for the
//!   stop rule against QN's gradient per trial: twist (525 vertices, 1,920 tets) 5.8 ms for
//!   both, stiff_soft (189, 480) 1.2 against 0.9 ms.

mod anderson;
mod backend;
pub mod contact;
mod cpu;
mod device;
mod params;
pub mod prox;
mod solver;

pub use backend::{AdmmBackend, GlobalStep, LocalScalars};
pub use contact::{ContactParams, ContactSolve, ContactSolver, ContactTotals, ContactVariant};
pub use cpu::CpuField;
pub use params::{AdmmMode, AdmmParams, PenaltyParams};
pub use prox::ProxKind;
pub use solver::{AdmmIteration, AdmmSolver, CustomProx, LocalState};
