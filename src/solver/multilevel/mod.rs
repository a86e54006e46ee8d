//! The multilevel solver of Trusty, Levin and Kaufman ("Sparse, Geometry- and Material-Aware
//! Bases for Multilevel Elastodynamic Simulation"; issue 13): `--solver multilevel`, f64 on
//! the CPU, or with its Newton direction in f32 on a device (`--backend gpu`; "On the device"
//! below).
//!
//! An inexact projected Newton method whose direction comes from three levels applied one
//! after another, on the step's full incremental potential (inertia, elasticity, obstacle
//! barrier, IPC contact and lagged friction — the same `StepProblem` Newton minimises):
//!
//! ```text
//! per step:   lagged elastic Hessian rebuilt at x_start; κ and friction as Newton sets them
//! per iter:   g ← ∇E(x)                                    (full space, exact)
//!             H   = base(x) + Σ_samples (w_e/vol_e) H_e(x) + contact(x)   (cubature, fresh)
//!             H_l = base(x) + Σ_all H_e(x_lag)            + contact(x)   (lagged elastic)
//!             affine:  U_aᵀ H U_a q_a = U_aᵀ(−g)         block-Jacobi PCG, rel 1e-4
//!                      d_s ← U_a q_a;  r ← −g − H d_s
//!             SMS:     U_sᵀ H U_s q_s = U_sᵀ r            block-Jacobi + affine coarse PCG
//!                      d_s += U_s q_s
//!             full:    N_cg Jacobi-PCG iterations on H_l d = −g from d = d_s
//!             α ← CCD/inversion filter, Armijo backtracking on E;  x += α d
//! stop:       the shared rule (CN by default) or the paper's ‖d_s‖∞/(h·diag) < tol
//! ```
//!
//! `base` is what [`crate::problem::StepProblem::assemble`] holds besides the elements (inertia `m/ĥ²`, the
//! obstacle barrier, sphere/box surface pairs, identity on pinned rows); `H_e` are the
//! clamp-projected element Hessians (Newton's default filter); contact is
//! [`crate::problem::StepProblem::contact_hessian_blocks`] (IPC barrier and friction stencils, PSD). Every
//! product is matrix-free in the sense of the paper: U is never assembled (lift and
//! restriction gather over the sparse per-vertex and per-handle weight lists, [`Level`]),
//! UᵀHU never formed (lift, H·v term by term, restrict: [`HessianOperator`]); the 12×12
//! block-Jacobi blocks are summed from H's terms and the covering lists directly.
//!
//! Files: [`params`] (options and defaults), [`levels`] (the affine and SMS prolongations),
//! [`operator`] (H·v, its diagonal and the Galerkin block diagonal), [`cache`] (the SMS
//! precompute, cached as `sms-KEY.bin`), `solver.rs` (the solver and its direction, the inner
//! solve of the Newton-type outer loop in `solver/newton/outer.rs`, shared with projected
//! Newton: κ, friction passes, stop test, line search, trace); the PCG is
//! [`crate::solver::pcg`], shared.
//!
//! # Choices the paper leaves open (with the reason, and the measured effect where measured)
//! - **Full-space residual.** Alg. 1 forms the smoother's right-hand side with the cubature
//!   H (`r = −g − H d_s`); here the smoother is PCG on `H_l d = −g` started at `d_s`, i.e. its
//!   right-hand side is `−g − H_l d_s`. The smoother then converges to the Newton direction
//!   of H_l whatever the levels did (`tests/cpu/multilevel.rs`: with N_cg large and
//!   `lag_refresh = iteration` one step equals the direct-solve Newton step), and the levels
//!   act as a multiplicative coarse correction of the same system.
//! - **Descent safeguard.** The levels use the cubature H, the smoother H_l: the composed
//!   direction is not guaranteed to descend. When `gᵀd ≥ 0` the iteration falls back to the
//!   smoother from zero (descent by construction), counted in
//!   [`MultilevelStats::descent_fallbacks`].
//! - **Lag refresh** ([`LagRefresh::Adaptive`], §3.7.2): rebuilt at each step's start; then
//!   when the mean of the last 3 line-search step lengths is below 0.5, at most once every 5
//!   iterations (the paper gives the five; window and threshold are ours). The window is
//!   cleared at each rebuild so a new Hessian is judged on its own steps.
//!   Measured on the bench's 729-vertex ball (first-contact step, ε = 1e-8, block Jacobi
//!   alone): adaptive 17 iterations / 2,156 CG at E = 1e6, every iteration 17 / 2,138, once
//!   per step 17 / 2,159; identical (10 / 841) at 1e9 — within one step the elastic Hessian
//!   changes little there; the rule matters for large deformations within a step.
//! - **N_cg and handles** (same step, E = 1e6 / 1e9, block Jacobi alone): N_cg 20 → 17 / 10
//!   Newton iterations and 2,156 / 841 CG; 40 → 14 / 10 and 1,974 / 1,042; 100 → 12 / 10 and
//!   2,358 / 1,666. Handles 16 (default) as above; 48 → 15 / 9 and 2,071 / 744; 4 → 24 / 12 and
//!   1,525 / 632.
//! - **Stop rule.** Default: jello's shared CN rule (so a comparison with Newton compares
//!   like with like). `[solver] subspace_stop = tol` selects the paper's rule, the largest
//!   per-vertex norm of `d_s` (of `d` where there is no subspace level or the safeguard
//!   fired) over `h ×` the rest bounding-box diagonal, in 1/s (the paper's 1e-3; it leaves
//!   the norm open).
//! - **PCG tolerances.** Levels: relative 1e-4 on the preconditioned system's residual
//!   (unpreconditioned Euclidean norm), capped at 200 iterations; the smoother runs exactly
//!   N_cg iterations (`full_tolerance = 0`), N_cg from the SMS precompute's rule (20 or 40).
//! - **Pinned vertices at the affine level.** Both lifts are zeroed at pinned vertices
//!   (`P U`), so no direction moves a pin; at the SMS level that changes nothing (the
//!   weights vanish there, Eq. 11).
//! - **Cubature at both levels.** The affine level uses the SMS partitions' cubature rule
//!   too (its functions are constants, which the rule integrates exactly); mass, barrier,
//!   contact and friction are exact everywhere, as in the paper.
//! - **Cubature targets.** The precompute's default (products of the scalar weights,
//!   `MultilevelParams::cubature`). Measured on the bench's E = 1e6 ball (729 vertices, 3,072
//!   tets, 16 handles, the first-contact step at 1 m/s): 600 samples, 124 ms of cubature fit,
//!   1,784 SMS CG iterations over the step's 15 Newton iterations; fitting `φ·(x − o)` too
//!   (`WeightsAffine`) took 2,956 samples (nearly every element), 12.3 s, and 1,604 SMS CG
//!   iterations over 14 — the cubature is not what makes the SMS solves long.
//! - **What the SMS solves cost.** Their PCG iterations grow with contact: on that step 45–71
//!   per solve before the barrier engages, 122–183 after (for 192 subspace DOFs): a stiff
//!   barrier on a few surface vertices, seen through smooth skinning weights, couples every
//!   handle around the contact, which a 12×12 block diagonal cannot precondition.
//! - **SMS preconditioner: block Jacobi plus an affine coarse space** (beyond the paper,
//!   `MultilevelParams::sms_coarse`, default on). The objects' affine motions written in SMS
//!   DOFs (`[A | t + A(o_h − c)]` per handle: exactly the affine field where the weights sum
//!   to 1) give an additive two-level preconditioner `B⁻¹ + R (RᵀGR)⁻¹Rᵀ` (SPD for any R), at
//!   12 Galerkin products per object per solve to build `RᵀGR`. Block Jacobi alone cannot see
//!   the global soft modes (rigid motions held only by inertia) against the stiff elastic
//!   ones. Measured on the bench's 729-vertex ball (first-contact step, ε = 1e-8): SMS CG
//!   1,799 → 1,314 at E = 1e6 Pa, 631 → 383 at 1e9; the stack's landing step (tests) 789 →
//!   659 CG in total; on the 4,913-vertex ball only 6,592 → 6,468 (1e6) and 4,695 → 4,110
//!   (1e8): there the soft global modes are not what makes the SMS solves long.
//! - **Handles.** Default one per 500 vertices (the paper's 375–500 on its large scenes), at
//!   least `min(16, n/4)`, at most 400 ([`params::default_handles`]); `[solver] handles`.
//!
//! - **Stall rescue** (jello's, beyond the paper; [`Rescue`], `[solver] rescue_after`, default
//!   10, 0 = off). A step still unconverged after `after` Newton iterations finishes as
//!   Newton-PCG: the Hessian refreshed every iteration, the levels skipped, the full-space
//!   Jacobi PCG from zero to relative 1e-4 (capped at 10,000). Why: on `contact_hetero` (a
//!   1e8 Pa shell around a 1e5 Pa core landing on a clamped 1e10 Pa hoop) the paper's loop
//!   took the impact step to the 100-iteration cap (residual 2.2e-5 against ε = 1e-7 in a
//!   whole run; 2.6e-3 from Newton's state after two steps, with 400 iterations still 2.5e-6):
//!   its directions, inexact on the stiff parts, keep hitting the CCD filter (line-search
//!   steps of 1e-5–1e-3 for dozens of iterations). Raising N_cg to 40 or 200, refreshing the
//!   lag every iteration, 64 handles or jump factor 1 did not converge it either; N_cg = 1,000
//!   with the lag refreshed every iteration (nearly Newton) did, in 37. The rescue skips the
//!   levels: warm-started at their direction and stopped relative to its residual, the PCG
//!   did no better on that step (the levels' cubature direction was far off). Measured over
//!   whole runs (`jello run SCENE --solver multilevel --backend cpu`, release, `[solver]
//!   rescue_after` off, 10, 15 and 30): with the default 10 all 30 steps of `contact_hetero`
//!   converge in 221 Newton iterations, where the paper's loop takes 282 and leaves one step
//!   unconverged; `contact_hoop` (487 against 491) and `contact_stack` (193) barely change. The
//!   table: the book's docs/src/benchmarks/multilevel.md ("Design choices and their measured
//!   effect", stall rescue).
//!
//!   From Newton's state after two steps the impact step converged with the rescue after 0
//!   (Newton-PCG throughout), 5, 10, 15 and 20 iterations (56, 80, 46, 35, 99 iterations) but
//!   not after 30 or 50 (100-iteration cap): once the early inexact iterations have crept,
//!   α ~ 1e-4 at a time, into a close-contact configuration, even Newton-PCG to 1e-8 from
//!   there oscillates (residual 1e-5 → 1e-2 with full steps) — the step is non-convex (IPC
//!   barrier, friction) and the path matters. Hence the early default. Newton with the
//!   Cholesky takes that step in 43 iterations.
//! - **JGS2 as the full-space preconditioner** (beyond the paper, issue 13;
//!   `MultilevelParams::smoother = Preconditioner::Jgs2`, `[solver] smoother = "jgs2"`, also
//!   for Newton-PCG). The map `r ↦ d` of one plain JGS2 Jacobi step for the gradient `−r`
//!   ([`crate::solver::jgs2::Jgs2Preconditioner`]), frozen at the Newton iterate (element
//!   Hessians, rotations and every `A_i` factored once per Newton iteration; no step filter,
//!   safeguard or line search, which are not linear), on the JGS2 subspace `--solver jgs2`
//!   builds and caches. It is `H̄⁻¹` at rest with exact rows (`tests/cpu/jgs2_pcg.rs`: the map
//!   within 1.1e-14 of the direct solve, PCG in 1 iteration against Jacobi's 114), but not
//!   symmetric away from rest (co-rotation, current incident Hessians in `A_i`, the
//!   compressed far field), so it runs in flexible PCG (Polak–Ribière β,
//!   [`crate::solver::pcg::Beta`]): classical PCG assumes a fixed SPD preconditioner and loses
//!   conjugacy otherwise; the flexible update keeps local conjugacy, and every step is still an
//!   exact line minimisation, so the direction still descends. **Contact**: vertices in an IPC
//!   stencil or under an obstacle barrier take their block-Jacobi step (their 3×3 diagonal
//!   block, contact curvature included) and feed no subspace sum. Without that the map, built
//!   on the rest-shape `H̄`, spread the barrier's (and friction's) stiff residuals over the
//!   body: measured, flexible PCG on the stack's landing step (friction lagged) stagnated at
//!   relative residual ~1 after 300 iterations, and on the drop three steps into the ground at
//!   2.3 (rhs −g; Jacobi-PCG 51 and 39 iterations to 1e-4). With it, the drop step converges
//!   (26 vs Jacobi's 39 to 1e-4; `tests/cpu/jgs2_pcg.rs` asserts fewer in total to 1e-6), but on
//!   the stack (IPC, no friction) it needs 126 against Jacobi's 57, and with friction it still
//!   stagnates (0.007 after 300): the IPC scenes are not its ground.
//!   Measured in the stiffness sweep (`benches/multilevel.rs`, its table; dev profile, shared
//!   2-core VM, times indicative): see the finding there — fewer CG iterations at E = 1e6
//!   (Newton-PCG 204 against 651, multilevel 1,453 against 1,667) but each costs an H-matrix
//!   product and a gather over the subspace rows, so the wall time is higher (Newton-PCG 495
//!   against 98 ms, multilevel 1,247 against 946 ms), plus the JGS2 precompute (0.18–0.31 s
//!   here); from E = 1e7 to 1e10 the JGS2-preconditioned solves stagnated and neither JGS2
//!   row converged in 100 Newton iterations (Jacobi: 15 / 13 / 10 / 7 multilevel, 11 / 11 /
//!   10 / 6 Newton-PCG). Honest finding: on this sweep
//!   JGS2 does not beat Jacobi in wall time, and in total work only on the softest ball. Not
//!   on the device path (`attach_device` refuses it).
//!
//! # Measured
//! `tests/cpu/multilevel.rs`: UᵀHU applied matrix-free equals the dense Galerkin product within
//! 4e-15 relative (both levels, a pinned cantilever and the stack in contact), its 12×12
//! blocks within 8e-15; with the smoother run to 1e-13 and `lag_refresh = iteration` one
//! iteration lands within 2e-16 m of the direct-solve Newton step; under the paper's stop
//! rule the stack's landing step (814 contact stencils) lands within 6.6e-7 of the bounding-box
//! diagonal of Newton's solution at ε = 1e-10 (the paper: 1%), in 6 iterations and 789 CG.
//! `benches/multilevel.rs` (the stiffness sweep, tables in its header; block Jacobi alone):
//! on a 4,913-vertex ball at ε = 1e-8 the first-contact step takes 7,369 / 5,388 / 64 CG iterations at
//! E = 1e6 / 1e8 / 1e10 Pa (Jacobi-PCG Newton: 2,249 / 1,103 / 163), 37 / 33 / 1 Newton
//! iterations (Newton: 21 / 12 / 1): the SMS solves dominate (6,592 of the 7,369).
//! On larger balls (15,625 and 35,937 vertices, release; the paper's Fig. 14 metric, CG per
//! Newton solve): multilevel 57–198 per solve, flat in E (the paper: 100–200); Jacobi
//! Newton-PCG 170–339, growing with size and mildly with E — not the paper's ~10,000 at
//! 1e10 — so Newton-PCG is 1.5–2.3× faster at 1e6 and 1e8 and multilevel 2.5–3.2× faster at
//! 1e10 (a one-iteration step). On a shell (39,920 vertices, wall r/6.7) Jacobi Newton-PCG
//! needs 402–720 CG per solve against multilevel's 64–199, and multilevel is 2.9–8.6× faster
//! than Newton-PCG and 1.6–3.7× faster than the sparse Cholesky at every E: the paper's trend
//! (its 40× is on a basketball, a much thinner shell). Tables in the bench's header.
//! Whole runs (`jello run --solver multilevel --backend cpu`, the scenes' own ε, release build
//! on the shared 2-core VM, with the default stall rescue): `contact_hoop` 60/60 steps
//! converged in 487 Newton iterations (Newton: 482) and 8.1 s (Newton's Cholesky: 5.9 s; 15.0
//! and 9.2 s on an earlier day, before the product changes below); the
//! first 15 steps of `contact_balls`, `contact_cup` and `contact_twist` all converged (125, 84,
//! 32 iterations; the paper's loop without the rescue: 491 on the hoop, 86 on the cup).
//!
//! # Heterogeneous contact (issue 13's speed bench)
//! `benches/multilevel_hetero.rs` on `assets/scenes/contact_hetero.toml`: a ball (r = 0.1 m)
//! with a 1e5 Pa core inside a 2 cm, 1e8 Pa shell, thrown down at 3 m/s onto a hoop of
//! 1e10 Pa clamped on its outer cylinder, friction μ = 0.5, h = 0.01 s, CN 1e-7; the ball lands
//! on the rim on step 3 and comes to rest there. Ball resolution 26: 19,827 vertices, 105,744
//! tets; 40 handles, 3,245 cubature samples, N_cg 20; precompute 41 s (`jello precompute` on
//! the scene at resolution 26: geodesics 0.6 s, partition 19.4 s, weights 1.9 s, cubature
//! 19.0 s; 258 + 2 bytes per vertex; cached after the first run, as `jello precompute` does).
//! It was 425 s, then 322 s with the K-means field cache (partition 100 → 22 s); the cubature's
//! 298 s were one partition — 29,012 elements (of 105,744), covered by 37 handles, 741
//! moment targets — whose fit ran alone while the other 39 took under 10 s together. Profiled
//! (`perf`): the NNLS formed the p × p Gram matrix of every candidate set and refactored the
//! passive set per iteration (p up to 4,576 columns, 571 positive weights), and nalgebra's
//! unblocked SVD orthonormalised the targets. Now [`jello_precompute::nnls::nnls_from`] works
//! on the columns, grows and downdates the passive set's Cholesky factor, and starts each
//! sampling round from the last round's weights (298 → 57.6 s), and faer's SVD gives the
//! orthonormal targets directly as V (57.6 → 19.0 s); the same 3,245 samples, fit error
//! 1.3e-13 (before 1.2e-13). Release build, rayon on the 2-core VM, nothing else
//! running; 30 steps, both solvers in one run of the binary (`cargo bench --bench
//! multilevel_hetero`): Newton's Cholesky 185.1 s in 115 Newton iterations, multilevel 107.9 s
//! in 173 (68,064 CG over its three levels), every step converged by both; the table (ms per
//! step, CG per level) is in the book's docs/src/benchmarks/multilevel.md ("Heterogeneous
//! contact").
//!
//! **Finding: 1.72× faster than Newton's Cholesky (0.58× its time), not the paper's 7–13×.**
//! Per iteration: 0.62 s multilevel (solve 90.7 s of the 107.9: the SMS PCG still hits its
//! 200-iteration cap on every contact iteration, 24,866 SMS CG over 173 iterations), 1.61 s
//! Newton (its factorisation 94 of the 103 s of the impact step). The multilevel loop needs
//! more iterations (11 / 15 / 12 on steps 2, 4, 5 against Newton's 3 / 10 / 3: the inexact
//! direction) and fewer on the impact step (36 against 62; 38.7 s against 103.3 s), where the
//! rescue's Newton-PCG takes over after 10. The trajectories stay within 7.56e-3 of the
//! bounding-box diagonal of Newton's over the 30 steps (the paper's per-step figure is 1%;
//! here it is accumulated over the run). Without the rescue (the paper's loop; an earlier run,
//! stopped after 3 steps): step 2 took 34 iterations and the impact step ended unconverged at
//! the 100-iteration cap.
//!
//! **On the GPU backend** (`JELLO_BENCH_HET_SOLVERS=newton,multilevel,multilevel-gpu`, one
//! run, the direction and the line-search energies on Mesa lavapipe — the only adapter here, a
//! software rasteriser on the same 2 cores, so a correctness figure, not a speed one):
//! multilevel on lavapipe 189 Newton iterations and 79,464 CG against the f64 path's 173 and
//! 68,064 (table in the book's docs/src/benchmarks/multilevel.md, "Heterogeneous contact").
//! Every step converges on the device path and its trajectory is Newton's to the same 7.6e-3
//! of the diagonal as the f64 path's; f32 round-off in the PCGs costs 9% more Newton iterations
//! and 17% more CG. 45% of the line-search trials are decided on the device. The GPU backend's
//! speed on a hardware GPU is unmeasured: no device was lent to this work.
//!
//! **What made it faster** (same machine, same binary layout, one run each): the first
//! measurement of this bench gave multilevel 234.1 s against Newton's 181.5 s (1.29× slower;
//! an earlier day's run 289.2 / 215.7 s). Three changes, none to the algorithm:
//! - the levels' Hessian base (inertia, pins and obstacle pairs: per-vertex terms) was stored
//!   on the whole elastic pattern, so each Galerkin product's H·v, and each Galerkin block
//!   assembly, walked ~1.4M stored zeros for 59k non-zeros; the levels now take it without its
//!   zeros ([`jello_precompute::sparse::SymSparse::without_zeros`]; the same operator bit for
//!   bit, `tests/cpu/multilevel.rs`);
//! - [`jello_precompute::sparse::SymSparse::mul_vec`] runs large products on all threads (one
//!   contiguous column range per thread, its own output vector, summed). `cargo bench --bench
//!   sparse_product` (a 27³-cell box grid's elastic pattern: 65,856 DOFs, 1.43M stored
//!   entries, 200 products): 1.92 → 1.04 ms and 2.14 → 1.42 ms per product in two runs (1.86×
//!   and 1.51×; the 2-core VM's timings vary by run), the two within 2.8e-16 of the largest entry.
//!   Gathering each row over its column and a transposed index of the upper triangle instead
//!   (a scratch version, not kept) was slower than sequential: twice the index traffic. The
//!   smoother's and the rescue's full-space CG iterations went from ~2.1 to
//!   ~1.25 ms. Newton-PCG, QN and the PD solvers use the same product. With the first change,
//!   first 5 steps: 102.2 s → 62.1 s (with the row-gather product instead: 95.7 s);
//! - the lift and the restriction read per-entry weighted frames computed once
//!   ([`Level`]), the restriction skips pinned vertices by construction and accumulates in
//!   registers: first 5 steps 62.1 s → 57.8 s.
//!
//! At 487 vertices (ball resolution 6, 30 steps, one run, measured before these changes):
//! Newton 2.0 s, 96 iterations; multilevel 8.1 s (3.98×), 221 iterations, 0 unconverged; on
//! the device path (same run, Mesa lavapipe — a software adapter, correctness only) 221
//! iterations, 0 unconverged, within 4.9e-4 of the diagonal of Newton's trajectory (the f64
//! path: 6.5e-4), 208 s; on its CPU
//! twins 234 iterations, 0 unconverged. No hardware GPU was lent to this task: the GPU
//! backend's speed on this bench is unmeasured.
//!
//! **Direct subspace solves** ([`MultilevelParams::subspace_direct`], `[solver] subspace_solve
//! = "direct"`, beyond the paper): each level's Galerkin matrix assembled from H's terms
//! ([`HessianOperator::galerkin_matrix`], checked against the dense `UᵀHU` in
//! `tests/cpu/multilevel.rs`) and factored densely, in place of the SMS PCG that hits its cap.
//! Measured on the same 105k-tet run, first 5 steps: 62.4 s against the PCG levels' 57.8 s
//! (76 and 75 iterations; without the impact step 18.2 s against 18.8 s) — even. Before the
//! levels' base lost its zeros (above) the assembly walked every stored zero of the elastic
//! pattern for each pair of covering handles and the direct row took 250 s against 129 s. The
//! assembly is still serial (one pass over the cubature elements and contact stencils per
//! pair of covering handles); at 487 and 2,341 vertices it is even with the PCG (7.3 s vs
//! 7.6 s, 24.4 s vs 23.4 s over 30 steps, measured before these changes) with 10% and 5% fewer
//! Newton iterations. Off by default.
//!
//! # On the device (issue 13's GPU backend)
//! `--backend gpu` computes each Newton direction on the device
//! ([`MultilevelSolver::attach_device`], [`device::DeviceDirection`], whose buffers live on a
//! [`crate::solver::backend::DeviceBackend`] for the model, as every device solver's do: the
//! line search's energies use that backend's [`crate::gpu::DeviceModel`]): the host keeps the f64
//! gradient, the Hessian terms (per-vertex/pair base, lagged elastic Hessian, cubature element
//! Hessians, contact stencils, all assembled as on the CPU path), the 12×12 Galerkin block
//! diagonals and their inverses and the CCD/inversion step filter (the line search's energies
//! are on the device too, below); it uploads the two Hessians and `−g` each iteration, and the device runs the affine and SMS
//! block-Jacobi PCGs (Galerkin products lift → H·x → restrict, every vector update and dot
//! product on the device), the residual update `r ← r − H U q` and the N_cg Jacobi-PCG smoother,
//! and hands back `d` and `d_s` (32·n bytes). The lagged Hessian's block-row layout
//! ([`BsrLayout`]: where each stored entry and its mirror land) is built once for the run's
//! elastic pattern and refilled per iteration in one pass; the levels' base, without its zeros,
//! is a few blocks per row. The descent fallback reruns the smoother from zero
//! there. The SMS level's affine coarse correction stays host f64 (`RᵀGR` from 12 host Galerkin
//! products per object, as on the CPU path, and its small Cholesky): each SMS PCG iteration
//! reads the residual (one subspace vector), solves on the host and adds the correction to the
//! device's block Jacobi (the `correction` of [`crate::solver::pcg::BackendPcg::solve`]).
//! `auto` still picks the CPU for multilevel (the device path uploads H each iteration and has
//! not been profiled on a real GPU). The kernels, in the kernel table with f32 CPU twins in binding order
//! ([`crate::gpu::twins::multilevel`]):
//! - `ml_lift`: `u = P U q`, per vertex over its (handle, weighted frame) list, zero at pins;
//! - `ml_restrict`: `q = Uᵀ P y`, one 64-invocation workgroup per handle gathering over the
//!   handle's (vertex, weighted frame) list — strided partial sums, then a workgroup tree; no
//!   atomics; pinned vertices skipped;
//! - `ml_block_apply`: `z_h = B_h r_h` with the inverted 12×12 blocks, one invocation per row
//!   of a handle's `[A | t]`;
//! - `ml_element_hv`: the element terms `s_e·H_e x̄_e` per corner (zero at pinned corners) —
//!   the cubature samples, and the IPC contact stencils as terms of scale 1 whose obstacle
//!   corners (no DOF) carry zero rows and columns ([`DeviceTerms`]) — summed per vertex by the
//!   existing `gather_gradient` over the terms' CSR;
//! - `ml_bsr_hv`: the base term as 3×3 block rows holding both triangles ([`BsrArrays`]: inertia,
//!   barrier, surface pairs, identity on pinned rows, and at the full-space level the lagged
//!   elastic Hessian), gathered per row, adding the gathered element/contact terms: one H·x is
//!   three dispatches. With the inverse diagonal as its blocks it is the Jacobi preconditioner.
//!   No existing kernel fitted: `hess_vec` (JGS2) takes a per-vertex 3×3 block, not a sparse
//!   base with surface-pair couplings and identity pinned rows, and no element scales.
//!
//! The direction is written once on the backend traits ([`backend::MultilevelBackend`], a
//! sub-trait of [`crate::solver::backend::Backend`] that the device backend implements with
//! the kernels below; [`backend::LevelsDirection`]), and its PCGs are
//! [`crate::solver::pcg::BackendPcg`]: [`crate::solver::pcg::pcg`]'s loop on the backend's
//! `combine`/`dots` (the device's `dev_combine`/`dev_dots`, with a four-lane mode for the
//! subspace vectors, the backend's flat vectors), its coefficients `rz/pAp`, `rz'/rz` formed on
//! the device from scalar slots; the host reads three scalars per iteration to decide when to
//! stop.
//!
//! A subspace vector on the device is three vec4s per handle, the rows of `[A_h | t_h]`: the
//! f64 level's 12-DOF layout read as f32 words. The host arrays come from
//! [`Level::device_arrays`] — each list entry carries `φ_vh·[x̄_v − o_h; 1]` computed in f64 and
//! rounded once, so frames keep f32 relative precision wherever the scene sits — and
//! [`pack_blocks`]. `tests/gpu/gpu_multilevel.rs` checks each kernel on the GPU against its twin and
//! each twin against the f64 routine ([`Level::lift`], [`Level::restrict`], the product with
//! [`invert_blocks`]' blocks, [`HessianOperator::apply`]) on a 625-vertex pinned
//! beam's SMS basis (6 handles, rows of 149–248 vertices) and its affine level (one row of
//! 625), each against the rounding bound `d·u·‖Σ|terms|‖/‖exact‖` of its sums (u = 2⁻²⁴, d the
//! depth of the summation chain; 4e-7–4e-5 here). Measured (ten random draws, five each on
//! Mesa lavapipe/Vulkan and llvmpipe/GL): twin vs f64 relative error at most 5.5e-8 (lift),
//! 2.9e-7 (restrict), 2.4e-7 (block apply), 1.0e-7 (element H·x); GPU vs twin at most 1.1e-7,
//! often bit-identical. The element Galerkin product `Uᵀ H_e U q` recorded as one plan (lift,
//! element terms, gather, restrict; no read-back between) is within 2.0e-6 (SMS) and 1.5e-5
//! (affine) of the f64 chain on either backend over six draws, under its componentwise bound
//! (4e-4–2e-3): the restricted element forces cancel, the affine level's translation rows
//! exactly, so its relative error is the larger.
//!
//! The full-space H·x (a random symmetric base on the elastic pattern, the cubature terms and
//! 40 PSD contact stencils, a third with an obstacle corner), five draws over both stacks:
//! within 9.8e-8 of [`HessianOperator::apply`] on the twins and the GPU, GPU vs twins 6.4e-8,
//! under the componentwise bound (7.6e-6–1.1e-5). PCG against the f64 `pcg` on an SPD H of the
//! same kinds of terms (five draws each stack): the SMS level's block-Jacobi PCG to 1e-4 takes
//! exactly the f64 iteration count (21–23), its solution's true residual 4.5e-5–7.4e-5; the
//! affine level (one handle, its block is the whole Galerkin matrix) converges in one; the
//! full-space Jacobi smoother (40 iterations warm-started, H badly conditioned: hundreds of
//! iterations to 1e-4) decreases `½dᵀHd − bᵀd` by within 1.8e-4 relative of the f64 decrease
//! (bound 1e-3) and its direction is within 1.4e-2 of the f64 one in the H-norm of the step
//! (bound 5e-2): f32 loses a little conjugacy over 40 iterations. Whole step (the stack's
//! landing step, IPC with friction, the scene's ε): the device direction converges in 6 Newton
//! iterations as the f64 path does, lands 7.2e-8 from Newton's 1e-10 solution in the mass norm
//! (bound 1.3e-5) and within 8.8e-11 m of the f64 multilevel solution per vertex (twins, lavapipe,
//! llvmpipe), with CG counts per level at most 12% above the f64 run's (affine 114–116 against
//! 109, SMS 474–479 against 426, full 120 = 120; with block Jacobi alone on both, SMS 613–623
//! against 561). `jello run contact_stack --solver multilevel --backend gpu --steps 15`
//! (lavapipe): 15/15 steps converged, 105 Newton iterations as on the CPU, the last frame within
//! 2.9e-9 m of the CPU run's.
//!
//! Next on the device: `RᵀGR`'s Galerkin products on the device (they are host f64 today), then
//! the gradient and step filter, so that H's terms are assembled where they are
//! used instead of uploaded each
//! iteration (today: the base and lagged BSR, 48 bytes a block, and 576 bytes per cubature
//! sample and contact stencil). `ml_restrict` gives each handle one workgroup: right for the SMS
//! level (hundreds of handles, hundreds of vertices each) but serial-ish for the affine level,
//! whose one handle per object covers the whole object (1,600 strided steps per invocation at
//! 100k vertices); a two-pass form (per-chunk partials, then a per-handle sum) is the fix if the
//! affine restriction shows in a profile.
//!
//! The contact half of that gradient and of the line-search energies exists
//! ([`device_contact::DeviceContact`]): IPC's barrier over a host candidate list (`ipc_pairs`,
//! a list swept along the search direction serves every trial), the lagged friction
//! (`ipc_friction`, which reads step displacements: from f32 positions, sticking pairs' forces
//! were off by up to 6%) and their gradient gathered per vertex (`ipc_gather`). On the cube
//! stack's landing step (3,276 candidates, 814 friction pairs) it matches the f64 potential to
//! 4.9e-6 (barrier), 1.2e-7 (friction) and 1.1e-5 (gradient) on the twins, lavapipe and
//! llvmpipe-GL.
//!
//! **The line search on the device** ([`device_energy`], on by default with a device;
//! `[solver] line_search = "host"` keeps it f64). Each trial's E(x_t) − E(x) is formed from
//! the `elastic` + `dev_element_energy` element differences and `DeviceContact`'s barrier and
//! friction on the swept candidates, with inertia and the obstacle barriers in f64 on the host
//! (a few flops per vertex). The Armijo test is decided on the device's value when it clears
//! the threshold by more than its round-off bound, and in f64 otherwise — so the accepted α is
//! always the one the f64 search accepts. The bound had to be built from the inputs' rounding,
//! not from the energies' size: the energies keep f32 precision relative to themselves (they
//! are evaluated in σ − 1), but positions rounded at the body's scale move a stiff element's
//! energy by |force|·|position|·2⁻²⁴ — on `contact_hetero` (1e10 Pa hoop) 100× more than
//! 2⁻²⁴·Ψ. So `dev_rounding` sums Σ|f|·|p| over the element and pair corner forces at both
//! points, and the slack is twice that plus 1e-6 of the magnitudes. Measured
//! (`device_line_search_energy_is_within_its_bound`, trials 1e-6…1 of a Newton step): error /
//! bound at most 0.026 (cube stack), 0.004 (`contact_hetero`), 0.007 (drop at impact) on the
//! twins and lavapipe; the device and f64 searches accept the same α from the start, along 4×
//! and 16× overshoots, and 1e-5 short of Newton's solution (where the host decides). Without
//! the rounding term (a bound from the magnitudes alone) one trial of `contact_hetero`'s impact
//! step was wrongly rejected: an f32 pair at distance 0 where f64 had 1e-8 m — such a trial now
//! goes to the host.
//!
//! Measured on `contact_hetero` at ball resolution 12 (2,341 vertices, 10,656 tets, 30 steps;
//! `JELLO_BENCH_HET_RESOLUTION=12 JELLO_BENCH_HET_SOLVERS=multilevel-twins,\
//! multilevel-twins-hostls,multilevel-gpu,multilevel-gpu-hostls cargo bench --bench
//! multilevel_hetero`, one run, the 2-core VM; the table in the book's
//! docs/src/benchmarks/multilevel.md, "On the device"): line search on the device against
//! the host's f64, 172 Newton iterations either way on the twins and 238 on lavapipe, with
//! the line search taking 3.3 s against 1.0 s (twins) and 9.2 s against 1.9 s (lavapipe).
//! The same iterations and CG counts with the line search on either side: every α is the f64
//! search's. 45–60% of the trials are decided on the device; the rest are the converging
//! iterations' trials, whose decrease is below what f32 positions can resolve. On these
//! software adapters the device trials cost more than the host's f64 ones (8.6 ms against
//! 2.6 ms per trial on the twins: the elastic pass with corner forces, the rounding sums, the
//! swept candidate list and friction pairs uploaded per search); whether a hardware GPU turns
//! that around is not measured (no device was lent to this work).
//!
//! # Next steps
//! - The SMS level's conditioning under contact: its block-Jacobi PCG hits the 200-iteration cap
//!   on every iteration of the 105k-tet heterogeneous bench. A parallel assembly of the
//!   Galerkin matrix (the direct solve is even with the PCG there now, its assembly serial) or
//!   a contact-aware coarse space.
//! - The rest of the GPU backend (see "On the device" above): the coarse matrix's products,
//!   and the gradient and step filter on the device so that H's terms need not cross the bus
//!   each iteration; the heterogeneous bench on a hardware GPU.
//! - The stiffness sweep on thinner shells (r/t of a basketball, ~40, needs a finer mesh or a
//!   shell generator) to see whether the ratio reaches the paper's 40×; and why the JGS2
//!   smoother stagnates from E = 1e7 (see above).

pub mod backend;
pub mod cache;
pub mod device;
pub mod device_contact;
pub mod device_energy;
pub mod levels;
pub mod operator;
pub mod params;
mod solver;

pub use cache::{element_youngs, load_or_build_sms, sms_options, SmsOrigin};
pub use levels::{Level, LevelArrays};
pub use operator::{
    invert_blocks, pack_blocks, BsrArrays, BsrLayout, DeviceTerms, ElementTerm, HessianOperator,
};
pub use params::{
    default_handles, LagRefresh, MultilevelParams, MultilevelStop, Preconditioner, Rescue,
};
pub use solver::{MultilevelSolver, MultilevelStats, SUBSPACE_DIRECT_MAX_DIM};

use crate::error::Result;
use crate::problem::Model;
use std::path::Path;

/// The solver for `model` with its SMS basis read from `cache_dir` or built (and cached), and
/// the precompute's warnings (stale cache, unwritable directory).
pub fn build_solver(
    model: &Model,
    params: MultilevelParams,
    cache_dir: Option<&Path>,
) -> Result<(MultilevelSolver, Vec<String>)> {
    if params.handles == Some(0) {
        return Ok((MultilevelSolver::new(model, params, None)?, Vec::new()));
    }
    let (basis, _, warnings) = load_or_build_sms(model, &params, cache_dir)?;
    Ok((MultilevelSolver::new(model, params, Some(basis))?, warnings))
}
