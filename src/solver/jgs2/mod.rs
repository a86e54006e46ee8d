//! JGS2 (Lan et al. 2025) and its baseline VBD (Chen et al. 2024): per-vertex parallel relaxation
//! of the incremental potential.
//!
//! Every iteration solves, for every free vertex i, a 3×3 system A_i δx_i = −r_i.
//! - **VBD**: A_i = m_i/h² I + Σ_{e∋i} ∇²_{ii}Ψ_e (+ barrier), r_i = g_i — the plain local
//!   Newton step on inertia + incident elements, coloured Gauss–Seidel ([`vbd_system`]).
//! - **JGS2** ([`jgs2_system`]): the step of vertex i inside its perturbation subspace
//!   U_i = R Ū_i R_iᵀ — the precomputed rest-shape subspace (paper Eq. 23: move i by one unit,
//!   the rest of the mesh follows harmonically under H̄ = K̄ + M/h²), co-rotated by per-vertex
//!   rotations (Eq. 14). Galerkin: A_i = U_iᵀHU_i, r_i = U_iᵀg. At rest with the whole
//!   subspace, A_i is the Schur complement and one Jacobi sweep is the Newton step (§4.2;
//!   tested in `tests/cpu/jgs2.rs`, also for the current Hessian).
//!
//! How the dense U_i is made cheap (the paper's cubature, Eqs. 17–18, and where we depart from
//! it; numbers in the issue note and in `jello-precompute`'s `jgs2` module docs):
//! - r_i = g_i + R_i (Σ_{j near} Ū_i\[j\]ᵀ R_jᵀg_j + Σ_{c far} (b_cᵀ G_c + Σ_k B_{c,k}ᵀ N_c\[k\])):
//!   the *assembled* gradient g (so the iteration's fixed point is exactly ∇E = 0, whatever the
//!   approximation), exact over a near field, and over the far field by nodes of a k-d cluster
//!   tree, each standing for its vertices by the least-squares *linear* fit of Ū_i over their
//!   rest positions (value b_c, slopes B_{c,k}; G_c = Σ_{j∈c} R_jᵀg_j and the first moments
//!   N_c\[k\] = Σ_{j∈c} r_{j,k} R_jᵀg_j). A node is used when Ū_i deviates from its fit by at
//!   most `far_tolerance`·‖Ū_i\[i\]‖ (default 0.02). The paper's few single-element samples,
//!   with NNLS weights fitted on low-frequency training poses, multiplied the high-frequency
//!   part of the residual by weights of 10–30 and Jacobi diverged on a clamped ARAP beam
//!   (E = 1 MPa, h = 10 ms); node fits average it out. The fit is first order by default
//!   (`Jgs2Options::far_order`; 0 = node means, 9 numbers per sample instead of 36): Ū_i
//!   varies smoothly across a distant node, and a slope follows it over nodes a mean cannot
//!   cover, so the same accuracy costs far fewer near rows (cantilever below: 6.4 iterations
//!   at 6.1 KB/vertex vs 7.4 at 21.6 with means, both at tolerance 0.05). Cubature proper
//!   remains as an option (`Jgs2Options::max_samples`: at most k far nodes with non-negative
//!   NNLS weights, greedy selection as An et al. 2008).
//! - H-matrix field (optional, `Jgs2Options::far_hmatrix`, CPU and device solvers): the whole sum
//!   Σ_{j≠i} Ū_i\[j\]ᵀ ĝ_j = S_i (G ĝ)_i − ĝ_i, one H-matrix product with G = H̄⁻¹ per
//!   iteration for all vertices ([`hmatrix_far_field`]); measured below.
//! - A_i = R_i Â_i R_iᵀ + Σ_{e∋i} U_eᵀ K_e(x) U_e: the rest Schur complement with the incident
//!   elements' rest elasticity replaced by their current, co-rotated, PSD-projected Hessians
//!   (exact at rest, follows the deformation where it matters most).
//! - Safeguard ([`Jgs2Params::safeguard`], [`Safeguard`]; [`Safeguard::Cut`] by default,
//!   below): the model step minimises the quadratic model over span{JGS2 step (or the whole
//!   Gauss–Seidel sweep), block-Jacobi step, previous step}, limited by the obstacle filter and backtracked on the
//!   true energy. The paper uses no line search for elastic scenes; without it, Jacobi diverges
//!   on violent steps — with exact rows too, so not through the far field. Measured
//!   (`JELLO_CONV_DIAGNOSE=1 cargo bench --bench convergence`, first step, plain iteration;
//!   α* = −gᵀδ/δᵀH₀δ, the model-optimal length of the plain step δ under the true Hessian at
//!   the iterate, so the plain step raises E where α* < ½):
//!   - moderate scenes (drag, twist, spin): α* 0.82–1.05 at every iteration (exact rows
//!     0.99–1.05), E falls monotonically, the residual by 8× to over 2,000× per iteration
//!     with exact rows;
//!   - `drag_stiff` (E 2 MPa, 2 kN): the first step is right (α* 1.00, ‖δ‖∞ 11% of the body);
//!     at that deformed iterate α* drops to 0.24–0.27, the next steps are ~4× too long, E rises
//!     from the second iteration and the iterate is non-finite by the sixth (exact rows: the
//!     same, 0.27);
//!   - `kick` (3 kN on the foot): the first step moves the foot 30% of the body and already
//!     raises E by 524 J although α* = 0.86 (E is far from quadratic over so long a step), then
//!     α* 0.20, 0.005: non-finite at the fourth iterate (exact rows: the fifth).
//!
//!   Diagnosis: each local system is the rest-shape Schur complement, co-rotated, with the
//!   incident elements' current Hessians; once a step takes the body far from rest the
//!   complementary part is 4–5× too soft along the JGS2 direction, every vertex overshoots
//!   together (Jacobi), the deformation grows and with it the mismatch. The safeguard's
//!   backtracking and its model minimiser (which rescales the step and mixes in the block-Jacobi
//!   and previous steps) are what keep those steps convergent (kick: 21–33 iterations, drag_stiff
//!   9–13). Its cost, measured in the same bench (Δx 1e-4, 3 steps, ms per iteration, 2
//!   threads, node fits at 0.02 — the default then — two quiet runs each): drag 45.7–46.6 vs
//!   36.8–38.2 plain, twist 49.0–51.2 vs 41.4–44.5, spin 54.2–55.7 vs 43.5–47.1 — +15–25% (a
//!   block-Jacobi direction, three Hessian-vector products, two or three energies), not 2×.
//!
//!   **The cut** ([`Safeguard::Cut`], the default since issue 17): with the H-matrix far field
//!   the plain step passes Armijo at every iteration of drag, twist and spin, and the model's
//!   coefficients are (0.89–0.99, ≤ 0.05, ≤ 0.001) on twist; but on drag from the fourth step
//!   the first iteration's model step is (0.58, 0.14) — the plain step 1.7× too long yet still
//!   descending — and on spin (0.82–0.88, 0.10–0.12, 0.01–0.03). Keeping the plain step
//!   whenever it passes Armijo took drag from 4.20 to 5.00 iterations per step (7–8 instead
//!   of 5–6 in steps 4–5). So the cut keeps the plain step only when it passes Armijo *and*
//!   the parabola through E(x), gᵀδ and E(x + δ) has its minimiser within 0.9–1.1 of the
//!   step ([`plain_step_fits`], free: the energy at x is the previous trial's); from the first
//!   rejection in a time step on, the model step (a violent step stays violent; on the device a
//!   rejected plain trial costs one re-evaluation of the iterate). It takes the plain
//!   iteration's count where that is best (spin), the model's where that is (drag: 4.20
//!   iterations per step against the plain iteration's 5.00), and the model's exactly on the
//!   violent scenes, where the plain iteration diverges (it falls back at the first rejection):
//!   0.69–0.91× the safeguard's time per step on armadillo_18k's moderate scenes (Δx∞ 1e-4,
//!   5 steps, H-matrix far field). Armijo alone: 5.00 / 2.40 / 2.60; a window of 0.8–1.25:
//!   4.60 / 2.40 / 2.60. The table, cut against always against off on five scenes:
//!   `JELLO_CONV_PROTOCOL=paper JELLO_CONV_SOLVERS=jgs2 JELLO_CONV_STOP=dx:1e-4
//!   JELLO_CONV_SAFEGUARD=cut|always|off cargo bench --bench convergence`, in the book's
//!   docs/src/benchmarks/jgs2.md ("What the safeguard costs").
//! - Rotations: R_j = polar of the volume-weighted mean F of j's elements, refreshed every
//!   Jacobi iteration and once per Gauss–Seidel sweep.
//! - Gauss–Seidel uses the same per-vertex subspaces as Jacobi. Group-wise subspaces (each
//!   vertex's colour held fixed, the paper's §8.1 reading) are available
//!   ([`SubspaceOptions::group_wise`]) but converged like VBD: with its colour held fixed all
//!   over the mesh a vertex's perturbation stays local.
//! - Obstacle barriers act on the vertex's own 3×3 system (their gradient is in g), with a
//!   per-vertex step filter so no vertex crosses an obstacle.
//!
//! Against Newton (`cargo bench --bench convergence`, iterations per step, CPU f64):
//! - ARAP cantilever sagging at h = 1/100 s (the paper's Fig. 2 setting), ε = 1e-8: with every
//!   subspace row kept JGS2 matches the paper, 2.4 vs Newton's 2.0 (1.2×; asserted ≤ 1.5× in
//!   `tests/cpu/jgs2.rs`). The compressed far field costs iterations at this tight tolerance; with
//!   first-order fits: far tolerance 0.05 6.4, 0.02 (default) 4.6, 0.01 3.6, 0.005 2.8, at 6.1,
//!   10.4, 16.1 and 22.5 KB/vertex, exact rows 2.4 at 39.0 KB/vertex on this 1,025-vertex beam
//!   (node means: 7.4, 4.6, 3.8, 2.8 at 21.6, 28.9, 33.7, 36.9 KB); exact rows grow as N², so
//!   large meshes need the compression. Gauss–Seidel: 8.6.
//! - armadillo_18k, kicked foot, ε = 1e-5: 3.4× Newton at base stiffness (19.6 vs 5.8), 4.5×
//!   at 20× (15.4 vs 3.4), 9.6× kicked 10× harder (143.6 vs 15.0) — the paper reports
//!   1.1–1.3×. The far field barely matters at base stiffness (exact rows 19.0, node means at
//!   0.05 19.4) and somewhat when stiff (exact rows 14.0, first order at 0.01 14.4, node means
//!   at 0.05 18.4, at 181, 32 and 23 KB/vertex; the default 21 KB). Modified Newton with the
//!   Hessian factored once per step needs 23×, 54× and over 47×: JGS2 beats a fixed
//!   linearisation by 5–7×. Rebuilding the subspaces every step from the Hessian at the step's
//!   start (`jgs2-relin` in the bench, [`build_subspace_at`] + [`Jgs2Solver::linearised_at`];
//!   its first iteration is Newton's step to 5e-15, `tests/cpu/jgs2.rs`) gives 14.8 and 11.6
//!   (2.6×, 3.4×; node means), and with uncompressed rows 12.5 and 15 over 2 steps against
//!   Newton's 7 and 5: the gap is the Hessian's change *within* a step, which Newton
//!   refactors and JGS2 follows only through rotations and incident elements — not the
//!   rest-shape precompute, nor the far-field compression.
//! - armadillo_114k (28,310 vertices, the same scene; `armadillo_114k` in the bench): Newton
//!   5.8, JGS2 45.0 (7.8×) with node fits at 0.02 (the default then) and 44.4 at 0.005 (41 vs 19 KB/vertex):
//!   the ratio grows with resolution (3.4× on the 4,855-vertex mesh), and again not through
//!   the far field. The residual falls linearly at ~0.93 per iteration in the tail.
//!
//! **The far-field default is the H-matrix of `G` at ε 1e-3** (`SubspaceOptions::default()`;
//! first-order fits at tolerance 0.02 were the default until issue 17,
//! `SubspaceOptions::node_fits()`), chosen from the measured frontier (below): the only
//! representation within 1.15× of exact rows on all three moderate scenes (1.00 / 1.00 / 1.08)
//! at no more memory per vertex than the former default on twist and spin and 1.2× on drag
//! (13.3 against 11.0 KB; 16.6 against 19.1 KB on armadillo_114k's bench scene), with the same
//! cost per iteration, and since it is streamed from the basis pass's columns (below) a
//! cheaper precompute than node fits (armadillo_114k 101.9 s / 1.55 GB against 131.5 s /
//! 1.87 GB). The frontier behind the choice (the paper's protocol, Δx 1e-4, armadillo_18k,
//! mean iterations per step over 5 steps as a multiple of exact rows', memory per vertex for
//! drag (E 1e5) / twist / spin (E 2e6)): the former default, first-order fits at tolerance
//! 0.02, costs 11–21 KB per vertex and 1.24–1.85× exact rows' iterations; the H-matrix at ε
//! 1e-3 8–13 KB and 1.00–1.08×; exact rows 136–194 KB. The whole table (16 representations):
//! `JELLO_CONV_FRONTIER=1 cargo bench --bench convergence`, in the book's
//! docs/src/benchmarks/jgs2.md ("The far field's memory-versus-iterations frontier").
//!
//! **The H-matrix field meets issue 17's goal** (the default; `Jgs2Options::far_hmatrix`,
//! `jello_precompute::hmatrix`; bench syntax `h2:EPS[:ETA[:SAMPLES[:SKETCH[:LOCAL_EPS]]]]`,
//! η = 1; the other H-matrix rows of the frontier, and the figures below unless said otherwise,
//! were measured with the global sketch and 40 samples, `h2:EPS:1:40:global`): at ε = 1e-3 it is within 1.08× of exact rows on all three scenes (2.8 / 2.6 on
//! spin) at 8–13 KB per vertex, below node fits' (the former default's) 21 KB at most — per
//! scene 1.21× their memory on drag (13.3 vs 11.0 KB), 0.45× on twist and 0.43× on spin. Per scene
//! at no more than node fits' memory, ε 3e-3 gives 1.00 / 1.00 / 1.154 (3.0 / 2.6 on spin,
//! just over 1.15) at 10.8 / 6.7 / 7.1 KB. It compresses `G = H̄⁻¹` instead of each `Ū_i`
//! (`Ū_i[j]ᵀ = S_i G_ij`, so every vertex's sum is a row of one product `S_i (G ĝ)_i − ĝ_i`):
//! dense `G` blocks on inadmissible leaf pairs, stored once per pair (the near field: 2.1 KB
//! per vertex on drag; as both vertices' `Ū` rows, with the mesh's longest edge — 4.8× the
//! median — as the admissibility gap, it was 458 rows, 18 KB per vertex), and a uniform
//! H-matrix — one orthonormal basis per cluster, rank chosen at ε relative to the cluster
//! sketch's largest singular value — on the admissible pairs (η = 1: boxes at least the
//! smaller diameter apart; 15–32 thousand blocks): 10.7 KB per vertex on drag at ε 1e-3, mean
//! ranks 8.0–12.0 at ε 1e-2, 12.8–17.0 at 1e-3 (drag's largest cluster at the 40-sample cap).
//! Why it beats node fits: a node fit is per vertex and per node, so the far field costs
//! Σ_i (#nodes of i) fits of 36 numbers; the H-matrix shares one basis per cluster among all
//! the vertices that see it, and a far pair of clusters costs one k×k coupling. Measured on
//! drag at ε 1e-2, one step: η 0.5 6.3 KB per vertex but one vertex's pose residual 7.6e2
//! (0.13 at η 1), η 2 13.4 KB; η = 1 is kept. The pose residual (`far_residual`, the
//! H-matrix's error on the training poses) has median 4–8e-3 at ε 1e-2, 0.5–1e-3 at 1e-3.
//! It was not the default at first: its precompute (before the streamed build) was 3–5× node fits' on armadillo_18k (22–54 s
//! against 7–15 s on 2 busy cores; a lone drag build 32.0 s against 11.2 s, peak RSS of the
//! whole bench process 356 MB against 360 MB: the H-matrix is built from the near rows the
//! basis pass computes anyway and only the 1-ring's are kept). The cost (as measured above) was one 40-column
//! solve per cluster for the sketch and a k-column one per cluster for the couplings (40 + k
//! columns per cluster, against the basis pass's 3 per vertex); on armadillo_114k it is beyond
//! the 2-minute budget. The bases can instead be sketched locally (`HMatrixOptions::sketch`,
//! `Sketch::Local`, with 60 samples: per cluster, a sparse Cholesky of `H̄` on a neighbourhood
//! that excludes the far partners, then a recompression against the couplings; figures in
//! `jello_precompute::hmatrix`): no global solve in the sketch pass (81 thousand columns on
//! armadillo_18k), the same 1.00 / 1.00 / 1.08 at 14.7 / 8.8 / 9.6 KB per vertex (+6–11%,
//! ε 1e-3), but 40% more coupling columns (49 against 35 thousand), so the coupling pass — one
//! global solve per cluster — becomes most of the build: on the idle 2-core machine,
//! alternating, the sketch pass 4.8–4.9 s against 9.1–9.5 s, the coupling pass 8.1–8.4 s
//! against 4.9–5.6 s, the whole H-matrix build 13.6–13.9 s against 14.2–15.2 s (4–11%
//! faster). The global sketch (40 samples) stays the default: the measure is memory
//! at equal iterations, and the local one costs 6–11% more of it for a build barely faster.
//! On armadillo_114k (run once, local sketch, the machine otherwise idle: load 0.4–1.8 with
//! the run, `/usr/bin/time -v`) the whole JGS2 precompute took 543 s wall (factor 1.3, eigen
//! 20.1, basis 74.6, H-matrix 441.5 s; 851 s user + 96 s system), peak RSS 3.89 GB, 18.7 KB
//! per vertex, 160 thousand far blocks, mean rank 21.4 (max 60): 4.5× the 2-minute budget and
//! 1.9× the 2 GB one. The coupling pass is about 5.8 × 49 thousand ≈ 285 thousand solve
//! columns there, ~3.3× the basis pass's 85 thousand; the memory is the build's intermediate
//! f64 data (sketches at 60 columns per cluster, the couplings of the un-recompressed bases,
//! ~25² per far block), the final H-matrix being 18.7 KB per vertex. **Now fixed**: the
//! precompute builds the global-sketch H-matrix from the columns of `G` its basis pass solves
//! anyway (`jello_precompute::hmatrix::StreamBuild`; no sketch or coupling solve, no eigen
//! solve): armadillo_114k's whole JGS2 precompute with it takes 101.9 s and 1.55 GB peak,
//! inside the 2-minute / 2 GB budget and below the node-fit default's 131.5 s and 1.87 GB in
//! the same session (16.6 against 19.1 KB per vertex at run time); armadillo_18k's products
//! 1.2 s instead of a 14 s build; so it is now the default (the tests of the node-fit kernels
//! and fits name `SubspaceOptions::node_fits()`). It is cached like node fits
//! (artifact format 5 holds every array of the H-matrix; a damaged or re-keyed file is
//! rebuilt). The device solver runs it ([`DeviceJgs2`]: the H-matrix and S_i in f32, three
//! kernels per frame — forward `Q_cᵀ ĝ_c` per basis column, the couplings gathered per basis
//! column over the node's blocks, and per tree position the near rows plus `Σ Q_c v_c` up the
//! tree and `S_i y_i − ĝ_i` — whose per-vertex sums the system kernel adds where the CPU adds
//! `TreeFrame::far`). Measured on lavapipe (correctness only, no speed claim) on a clamped
//! ARAP beam of 12×2×2 cells at ε 1e-3 (`tests/gpu/gpu_jgs2.rs`): the twins' far sums against the
//! f64 `hmatrix_far_field` 2.4e-7 relative (norm over all vertices), GPU against twins 0 (bit
//! equal on lavapipe); three steps of a swinging beam take 3 / 3 / 3 iterations on the f64
//! solver, the twins and the GPU alike (safeguarded Jacobi and Gauss–Seidel; plain Jacobi
//! 3 / 3 / 4 on all three), positions within 4.3e-8 of the bounding-box diagonal, and one plain
//! Jacobi iteration within 1.5e-8 (dropping the far field moves it 1.6e-2). Per iteration it
//! costs the same
//! as the default: spin, two alternating runs on a quiet machine (2 threads), 66.5 / 63.5 ms
//! per iteration against 61.7 / 67.5 (one H-matrix product per iteration replaces the
//! per-vertex far samples), so at 2.8 iterations per step against 4.8 a step takes ~0.6× the
//! default's time; the precompute there was 17.7 / 18.4 s against 5.7 / 4.8 s (the H-matrix
//! build 13.9 / 14.5 s).
//!
//! Among node fits, no representation tried reaches issue 17's goal (within 1.15× of exact
//! rows on all three at no more memory than this default): first-order fits get there at
//! tolerance 0.005, at 1.9–2.2× the memory; node means are dominated by first-order fits at every memory; the paper's NNLS
//! cubature is 4–10× off. The default stays at 0.02 because memory is also time and a hard
//! limit: the local systems stream each vertex's far samples every iteration and are bound by
//! memory latency (`cargo bench --bench cpu_iteration`), and at 0.005 armadillo_114k needs
//! 41 KB/vertex against 19 (+0.6 GB of samples), where its precompute already peaks at 1.88 GB
//! of the 2 GB the CPU-speed issue allows. A user who wants exact-row convergence on moderate
//! motion and has the memory sets `far_tolerance = 0.005` in the scene's `[solver]` (or 0.01:
//! within 1.1× except spin, 1.46×), or, on the CPU solver, the H-matrix field above.
//!
//! Tried and measured on the kicked armadillo (19.4 iterations per step with the node-mean far
//! field at 0.05, then the default), not kept:
//! - the current Hessian of every near-field element in A_i (not just the incident ones, the
//!   paper's cubature Hessian taken exactly): 18.3 over 3 steps vs 19.3, at 23× the cost;
//! - one safeguard coefficient per coarse region (2³ / 3³ grid cells) instead of one global:
//!   20.8 / 19.6; kicked 10× harder 244 / 179 vs 144;
//! - a fourth safeguard direction (the step before the previous): 18.0;
//! - Newton's inversion trust region ([`crate::problem::StepProblem::step_limit`]): 28.8;
//! - L-BFGS on top (two-loop recursion over the step's last 5 / 10 (s, y) pairs, the JGS2
//!   sweep as H₀⁻¹, then the safeguard): 19.2 / 19.8; 20× stiffer 15.8 / 16.6 vs 18.4;
//!   cantilever (node fits, the default then) unchanged at 7.4 — secant updates do not capture the
//!   within-step change either;
//! - the residual is local (the top 1% of vertices, all at the kicked foot, hold 62–74% of
//!   its square; the top 5% hold 97–99%), but a Newton step on those vertices with the rest
//!   held (dense, current Hessian) as a fourth safeguard direction does not help: 1% 20.0,
//!   5% 19.0; 20× stiffer 18.0, 17.2. The foot's error is the body's global response;
//! - a coarse space: the 24 lowest modes of (H̄, M), co-rotated per vertex, as further
//!   safeguard directions (a two-level method): 19.2 vs 19.6 (first-order default) — the slow
//!   error is not in the rest shape's low modes.
//!
//! **As a preconditioner** ([`Jgs2Preconditioner`], issue 13): one plain Jacobi step for the
//! gradient `−r`, with the local matrices and rotations frozen at an iterate, is a linear map
//! `r ↦ d` — at rest with exact rows it is `H̄⁻¹` — which the multilevel solver offers as the
//! preconditioner of its full-space PCG (`[solver] smoother = "jgs2"`, and Newton-PCG). It
//! shares `jgs2_matrix`/`jgs2_rhs` with the solver's local systems (which [`jgs2_system`]
//! pairs, bit for bit as before) and leaves out the step filter and safeguard, which are not
//! linear; the map is not symmetric away from rest, so it runs in flexible PCG
//! ([`crate::solver::pcg::Beta::PolakRibiere`]). Measured in `crate::solver::multilevel`.
//!
//! # Layout
//! - `solver.rs`: [`Jgs2Solver`], the one step loop (stop test, plain iteration, the cut
//!   safeguard's plain trial, the model step and its backtracking), generic over
//!   [`Jgs2Backend`] (`backend.rs`: the trait, where IPC contact's per-vertex terms will go, and
//!   the shared minimiser [`model_coefficients`]);
//! - `cpu.rs`: `Jgs2Backend` for [`crate::solver::backend::CpuBackend`], the f64 reference
//!   (`Jgs2Solver::vbd`, `Jgs2Solver::jgs2`);
//! - `local.rs` (the per-element and per-vertex passes), `subspace.rs` (the precompute's
//!   subspaces and their cache), `precond.rs` (JGS2 as a preconditioner);
//! - `device.rs`: `Jgs2Backend` for [`crate::solver::backend::DeviceBackend`], in f32 over the
//!   device API (WGSL kernels on the GPU, or their CPU twins): its state (subspace blob,
//!   colours, local systems, directions, its readback) in the backend's extension slot, on the
//!   backend's device, [`crate::gpu::DeviceModel`], point pair and element cache;
//!   [`DeviceJgs2`] is `Jgs2Solver<DeviceBackend>`. Its `jgs2_combine/trial/apply/dots`
//!   kernels stay its own: each fuses into its pass what the
//!   shared `dev_*` kernels would need further dispatches for (`combine`: three directions and
//!   every vertex's obstacle time of impact; `trial`/`apply`: the obstacle-relative contact
//!   records advanced with the move, the previous-step slot and the per-vertex moves; `dots`:
//!   the weighted residual and all 13 model dots in one reduction). What it lacks
//!   against the f64 path: the per-vertex strict inversion filter (under `strict_inversion` the
//!   loop forces its safeguard on and it rejects trials through a sentinel energy, `DeviceJgs2`
//!   module docs), per-element energy differences (its energies are f32 partials summed on the
//!   host relative to the start's, with a round-off allowance of 1e-6 of the summed terms),
//!   static increments (the runner falls back to the CPU), plain (unsafeguarded) iterations
//!   under IPC contact (its CCD filters only the combined step, so the loop keeps the
//!   safeguard on) and the f64 backend's `contact_coupling = "extended"` and `"coarse"`.

mod backend;
mod coarse;
mod contact;
mod cpu;
mod device;
mod device_ipc;
mod local;
mod precond;
mod solver;
mod subspace;

pub use backend::{
    model_coefficients, Jgs2Backend, Jgs2Sample, Jgs2Setup, Jgs2StepFlags, Jgs2Trial, Next,
};
pub use coarse::MAX_COARSE_UNKNOWNS;
pub use contact::ContactCoupling;
pub use device::{DeviceJgs2, DeviceTerms, PackedHMatrix};
pub use local::{
    barrier_hessian, element_gradient_pass, element_pass, hess_vec, hmatrix_far_field, jgs2_matrix,
    jgs2_rhs, jgs2_system, local_system, rest_frame_gradients, rotations, vbd_local_system,
    vbd_system, vertex_gradient, ElementCache, GradTerm, HessTerm, TreeFrame,
};
pub use precond::{FrozenJgs2, Jgs2Preconditioner};
pub use solver::{
    plain_step_fits, IterateObserver, Jgs2Params, Jgs2Solver, Safeguard, Variant, PLAIN_STEP_WINDOW,
};
pub use subspace::{
    build_subspace, build_subspace_at, cache_key, load_or_build, FarSample, HFarField,
    Jgs2Subspace, SubspaceOptions, SubspaceOrigin, VertexSubspace,
};
