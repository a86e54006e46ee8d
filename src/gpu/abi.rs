//! The ABI of the WGSL kernels: the flag and mode values, sentinels, slot and stride constants
//! and workgroup arithmetic that a kernel, its CPU twin ([`super::twins`]) and the host code
//! dispatching it (solvers, the evaluator) must agree on. The data types the kernels read and
//! write are in [`super::layout`]; these are the numbers in their `Params` and records. Solvers
//! import them from here and never from the twins, which are an implementation detail of the
//! CPU device ([`super::Device::cpu`]).

// ---- `elastic` (`shaders/elastic.wgsl`): Params::u0 flags ----

/// `elastic` flag (Params::u0): write the gradient.
pub const ELASTIC_GRADIENT: u32 = 1;
/// `elastic` flag: write the 12×12 Hessian.
pub const ELASTIC_HESSIAN: u32 = 2;
/// `elastic` flag: project the Hessian to PSD (clamp the 9 ∂P/∂F eigenvalues at 0).
pub const ELASTIC_PROJECT: u32 = 4;
/// `elastic` flag: strict inversion — an element whose J = det F is below `Params::f0` gets the
/// energy [`ELASTIC_STRICT_SENTINEL`] (gradient and Hessian as usual).
pub const ELASTIC_STRICT: u32 = 8;
/// `elastic` flag: the absolute-value eigenvalue filter (|λ| for the 9 ∂P/∂F eigenvalues,
/// [`crate::material::EigenFilter::Abs`]); overrides [`ELASTIC_PROJECT`].
pub const ELASTIC_ABS: u32 = 16;
/// `elastic` flag: the two stable Neo-Hookeans keep their exact (unfiltered) Hessian, whose
/// diagonal 3×3 blocks are PSD at every F ([`crate::material::stress_and_exact_block`]): what
/// plain VBD reads. Overrides [`ELASTIC_PROJECT`] and [`ELASTIC_ABS`] for those models only.
pub const ELASTIC_EXACT_SNH: u32 = 32;
/// `elastic` flag: only the Hessian's four diagonal 3×3 blocks are written, the other twelve
/// keep what they held — what plain VBD reads (its per-colour refresh, `elastic_list`, runs for
/// every element a colour touches: four times per element and sweep).
pub const ELASTIC_DIAGONAL: u32 = 64;
/// The energy (J) [`ELASTIC_STRICT`] writes for an element below the floor: hosts read energy
/// sums of half of it or more as +∞.
pub const ELASTIC_STRICT_SENTINEL: f32 = 1e30;

// ---- Block reductions (`reduce_*`) ----

/// Threads per reduction workgroup.
pub const REDUCE_THREADS: usize = 256;
/// Items per reduction thread.
pub const REDUCE_ITEMS: usize = 4;
/// Items reduced by one workgroup (one partial): 1024.
pub const REDUCE_BLOCK: usize = REDUCE_THREADS * REDUCE_ITEMS;

// ---- The device backend's kernels (`shaders/dev_*.wgsl`) ----

/// Items (vertices or elements) per workgroup of the `dev_*` kernels.
pub const DEV_GROUP: usize = 256;
/// `dev_combine` slot value meaning "no slot".
pub const SLOT_NONE: u32 = 1023;
/// `dev_combine` flag (u1 >> 10): y = c·x instead of y += c·x.
pub const COMBINE_SET: u32 = 1;
/// `dev_combine` flag (u1 >> 10): also the per-group partial dot z·y.
pub const COMBINE_DOT: u32 = 2;
/// `dev_combine` flag (u1 >> 10), and `dev_dots` u0 bit 0: all four lanes of each vec4 (the
/// multilevel solver's subspace vectors, three full vec4s per handle) instead of xyz.
pub const COMBINE_VEC4: u32 = 4;
/// `dev_element_energy` / `dev_vertex_energy` mode (u0 bit 0): the reference pass.
pub const ENERGY_REFERENCE: u32 = 1;
/// `dev_element_energy` flag (u0 bit 1): the strict inversion floor.
pub const ENERGY_STRICT: u32 = 2;

// ---- `dev_inversion_bound` / `dev_inversion_finish`: the step bound's inversion filter ----

/// Levels α_o·2^−k the inversion filter samples: 7 (down to 2^−6 of the obstacle bound α_o;
/// the f64 filter, [`crate::problem::StepProblem::step_limit`], gives up below 1e-2 of it).
pub const INVERSION_LEVELS: u32 = 7;
/// [`INVERSION_LEVELS`] of the strict filter (each element above its volume floor), which does
/// not give up: 32, one bit each in a `u32` mask.
pub const INVERSION_LEVELS_STRICT: u32 = 32;
/// `dev_inversion_bound`'s `Params::u1` flag, and bit 16 of `dev_inversion_finish`'s `u0`
/// (below it the scalar slot): the strict filter.
pub const INVERSION_STRICT: u32 = 1;

/// Workgroups over `n` items.
pub fn dev_groups(n: usize) -> usize {
    n.div_ceil(DEV_GROUP)
}

// ---- ADMM-PD (`shaders/admm_*.wgsl`) ----

/// `admm_local` mode (u0): z = F(x), ū = 0.
pub const ADMM_RESET: u32 = 0;
/// `admm_local` mode: the PD projection z-step.
pub const ADMM_PROX_PD: u32 = 1;
/// `admm_local` mode: the hyperelastic z-step.
pub const ADMM_PROX_HYPERELASTIC: u32 = 2;

// ---- IPC contact pairs (`shaders/ipc_*.wgsl`) ----

/// `ipc_pairs` flag (u0): write the gradient.
pub const IPC_GRADIENT: u32 = 1;
/// `ipc_pairs` flag: write the 12×12 Hessian (144 f32 per pair, row-major, dofs vertex-major
/// in the pair's vertex order — the `elastic` kernel's layout).
pub const IPC_HESSIAN: u32 = 2;
/// `ipc_pairs` flag: project the Hessian to PSD ([`super::twins::sym12`]).
pub const IPC_PROJECT: u32 = 4;
/// `ipc_gather` flag (u0): also gather the Hessians' diagonal blocks into `hdiag`.
pub const IPC_GATHER_HESSIAN: u32 = 1;
/// The energy of a pair at d² ≤ 0 (J): hosts read energy sums of half of it or more as +∞
/// (as `ELASTIC_STRICT_SENTINEL`).
pub const IPC_SENTINEL: f32 = 1e30;

// ---- Friction (`shaders/friction*.wgsl`) ----

/// `ipc_friction` flag (u0): write the per-pair gradient.
pub const FRICTION_GRADIENT: u32 = 1;
/// `ipc_friction` flag: write the per-pair 12×12 Hessian (144 f32 per pair, row-major, dofs
/// vertex-major — `ipc_pairs`' layout, so `ipc_gather` gathers its diagonal blocks).
pub const FRICTION_HESSIAN: u32 = 2;

// ---- The JGS2 H-matrix blob (`hm`) ----

/// Words of the `hm` blob's header.
pub const HM_HEADER: usize = 8;
/// Words per node record of the `hm` blob.
pub const HM_NODE_WORDS: usize = 10;
/// Words per far block and per near pair record.
pub const HM_PAIR_WORDS: usize = 3;
/// "No node" (the root's parent).
pub const HM_NONE: u32 = u32::MAX;

// ---- JGS2 (`shaders/jgs2_*.wgsl`) ----

/// `jgs2_system` blob: the word marking a zero 3×3 block in an incident entry.
pub const ZERO_BLOCK: u32 = u32::MAX;
/// `jgs2_tree_sum`: the child id of a leaf node.
pub const NO_CHILD: u32 = u32::MAX;
/// `jgs2_rotation` flag (u0): keep the rotations, refresh only the rest-frame gradients.
pub const ROTATION_KEEP: u32 = 1;
/// `frame` entries per cluster-tree node: the gradient sum G_c, then its first moments
/// N_c\[x\], N_c\[y\], N_c\[z\] in the rest offsets.
pub const NODE_STRIDE: usize = 4;
/// Top bit of a `jgs2_system` blob's far-sample count: the samples carry 27 slope words.
pub const FAR_LINEAR: u32 = 1 << 31;
/// Bit 30 of a `jgs2_system` blob's far-sample count: after the far samples one word holds the
/// `frame` index of the vertex's H-matrix far sum (`jgs2_hm_backward`).
pub const FAR_HMATRIX: u32 = 1 << 30;
/// Words per `jgs2_dots` block partial (13 used).
pub const DOTS_STRIDE: usize = 16;
/// `vertex_solve` modes (`Params::u0 & 3`).
pub const SOLVE_WITH_FALLBACK: u32 = 0;
/// Primary system only.
pub const SOLVE_PRIMARY: u32 = 1;
/// Fallback system only.
pub const SOLVE_FALLBACK: u32 = 2;
/// `jgs2_dots`'s flag in u0 (beside the direction count): the g·d_p only, no Hessian products.
pub const JGS2_DOTS_GD_ONLY: u32 = 0x100;

// ---- The multilevel solver (`shaders/ml_*.wgsl`) ----

/// vec4s per handle in a subspace vector (the three rows of `[A | t]`).
pub const ML_HANDLE_VEC4: usize = 3;
/// vec4s per handle in the packed 12×12 blocks (row-major, three per row).
pub const ML_BLOCK_VEC4: usize = 36;
