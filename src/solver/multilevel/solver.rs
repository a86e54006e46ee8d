//! The multilevel solver's inexact-Newton direction (levels, then the smoother; f64 on the CPU
//! or f32 on a device), its stop rule and lag refresh: the [`InnerSolve`] of the Newton-type
//! outer loop it shares with projected Newton. See the module docs for the algorithm and the
//! choices it makes. Its work goes to [`StepWork::cg_iterations`] per level, finest first
//! (full space, SMS, affine).

use super::backend::DirectionRun;
use super::device::DeviceDirection;
use super::device_energy::{device_backtracking, DeviceEnergy};
use super::levels::Level;
use super::operator::{invert_blocks, ElementTerm, HessianOperator};
use super::params::{LagRefresh, MultilevelParams, MultilevelStop, Preconditioner};
use crate::clock::Instant;
use crate::error::{JelloError, Result};
use crate::material::{element_hessian_filtered, EigenFilter};
use crate::problem::{ElasticTerms, HessianLayout, Model, StepProblem};
use crate::solver::jgs2::{FrozenJgs2, Jgs2Preconditioner, Jgs2Subspace};
use crate::solver::newton::{newton_loop, InnerSolve, Iterate};
use crate::solver::pcg::{dot, pcg, pcg_with, Beta, HostCorrection};
use crate::solver::report::{max_vertex_norm, ms};
use crate::solver::{
    backtracking, LineSearchResult, StepReport, StepSolver, StepTimings, StepWork,
};
use jello_precompute::sms::{AffineBasis, SmsBasis, HANDLE_DOFS};
use jello_precompute::sparse::SymSparse;
use nalgebra::Vector3;
use rayon::prelude::*;
use std::collections::VecDeque;
use std::sync::Arc;

/// Full-space PCG iterations when there is no SMS level and no override (the paper's upper
/// N_cg value).
const DEFAULT_N_CG: usize = 40;

/// Work counts of the last step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MultilevelStats {
    /// Newton iterations.
    pub iterations: usize,
    /// Block-Jacobi PCG iterations of the affine level, summed over the step.
    pub affine_cg: usize,
    /// Block-Jacobi PCG iterations of the SMS level, summed over the step.
    pub sms_cg: usize,
    /// Full-space Jacobi-PCG iterations, summed over the step.
    pub full_cg: usize,
    /// Rebuilds of the lagged elastic Hessian (the step's first included).
    pub lag_refreshes: usize,
    /// Iterations whose composed direction was not a descent direction and were replaced by
    /// the full-space PCG from zero (a descent direction by construction).
    pub descent_fallbacks: usize,
    /// Newton iterations run under the stall rescue ([`super::Rescue`]).
    pub rescued: usize,
    /// Line-search trials decided on the device's energy change
    /// ([`super::device_energy::device_backtracking`]).
    pub ls_device_trials: usize,
    /// Line-search trials decided in f64 on the host: every trial on the CPU path; with the
    /// device, those whose device change was within its round-off bound of the threshold.
    pub ls_host_trials: usize,
}

impl MultilevelStats {
    /// All CG iterations of the step (affine + SMS + full space).
    pub fn total_cg(&self) -> usize {
        self.affine_cg + self.sms_cg + self.full_cg
    }
}

/// The multilevel solver (`--solver multilevel`): affine and SMS Galerkin levels by
/// block-Jacobi PCG, then N_cg Jacobi-PCG iterations in full space on the lagged Hessian, a
/// CCD-filtered backtracking line search on the full incremental potential.
pub struct MultilevelSolver {
    params: MultilevelParams,
    layout: HessianLayout,
    affine: Option<Level>,
    sms: Option<Level>,
    basis: Option<Arc<SmsBasis>>,
    /// Cubature samples: (element, w_e / vol_e).
    samples: Vec<(u32, f64)>,
    /// Per SMS handle: its object and `o_h − c_object` (m), for the affine coarse space of
    /// the SMS solve (see [`Coarse`]).
    sms_coarse: Option<Coarse>,
    n_cg: usize,
    /// Largest rest extent (m), for the Dx rule.
    extent: f64,
    /// Rest bounding-box diagonal (m), for the paper's rule.
    diagonal: f64,
    fixed: Vec<bool>,
    elastic_lag: SymSparse,
    elem: Vec<crate::problem::PackedTetHessian>,
    stats: MultilevelStats,
    /// Where the direction is computed when not on the CPU ([`Self::attach_device`]).
    device: Option<DeviceDirection>,
    /// The line search's energies on `device` ([`MultilevelParams::device_line_search`];
    /// built at the first step).
    device_energy: Option<DeviceEnergy>,
    /// The JGS2 preconditioner of the full-space PCG ([`Preconditioner::Jgs2`];
    /// [`Self::set_jgs2_subspace`]).
    jgs2: Option<Jgs2Preconditioner>,
    /// The state of the step in progress.
    step_state: StepState,
}

impl MultilevelSolver {
    /// The solver for `model` on an SMS basis built for it (`None` only when
    /// `params.handles == Some(0)`: no SMS level).
    pub fn new(
        model: &Model,
        params: MultilevelParams,
        basis: Option<Arc<SmsBasis>>,
    ) -> Result<Self> {
        check_params(&params)?;
        let n = model.num_vertices();
        let sms_wanted = params.handles != Some(0);
        let basis = match (sms_wanted, basis) {
            (true, Some(b)) => {
                if b.n_vertices() != n {
                    return Err(JelloError::Solver(format!(
                        "multilevel: the SMS basis has {} vertices, the model {n}",
                        b.n_vertices()
                    )));
                }
                Some(b)
            }
            (true, None) => {
                return Err(JelloError::Solver(
                    "multilevel: an SMS level needs a basis (or handles = 0)".into(),
                ))
            }
            (false, _) => None,
        };
        let layout = HessianLayout::new(model)?;
        let affine = if params.affine {
            let a = AffineBasis::new(&model.mesh.positions, &model.mesh.tets)
                .map_err(|e| JelloError::Solver(format!("multilevel: affine level: {e}")))?;
            Some(Level::affine(&a, &model.pinned))
        } else {
            None
        };
        let sms = basis.as_ref().map(|b| Level::sms(b, &model.pinned));
        let samples = match &basis {
            Some(b) => (0..b.n_handles())
                .flat_map(|p| b.cubature.partition_rule(p))
                .map(|(e, w)| (e, w / model.rest[e as usize].volume))
                .collect(),
            None => Vec::new(),
        };
        let sms_coarse = match (&basis, params.sms_coarse) {
            (Some(b), true) => {
                let a = AffineBasis::new(&model.mesh.positions, &model.mesh.tets)
                    .map_err(|e| JelloError::Solver(format!("multilevel: affine level: {e}")))?;
                Some(Coarse::new(b, &a))
            }
            _ => None,
        };
        let n_cg = params
            .n_cg
            .or_else(|| basis.as_ref().map(|b| b.n_cg.n_cg))
            .unwrap_or(DEFAULT_N_CG);
        let diagonal = model
            .mesh
            .bounding_box()
            .map(|(lo, hi)| (Vector3::from(hi) - Vector3::from(lo)).norm())
            .unwrap_or(1.0);
        Ok(MultilevelSolver {
            params,
            step_state: StepState::new(&layout),
            elastic_lag: layout.zeros(),
            layout,
            affine,
            sms,
            basis,
            samples,
            sms_coarse,
            n_cg,
            extent: model.largest_extent(),
            diagonal,
            fixed: (0..3 * n).map(|k| model.pinned[k / 3]).collect(),
            elem: Vec::new(),
            stats: MultilevelStats::default(),
            device: None,
            device_energy: None,
            jgs2: None,
        })
    }

    /// Computes each Newton direction (the levels' PCGs and the smoother) on `device` (a
    /// [`crate::solver::backend::DeviceBackend`] for `model`, the model this solver steps) from now
    /// on, in f32 (`--backend gpu`; the CPU twins with [`Device::cpu`]), and with
    /// [`MultilevelParams::device_line_search`] the line search's energies
    /// ([`super::device_energy`]); gradients, Hessian terms and the step filter stay f64 on
    /// the host, and so does the SMS
    /// level's affine coarse correction (a small dense Cholesky, added to the device's block
    /// Jacobi once per PCG iteration: one subspace vector each way).
    ///
    /// [`Device::cpu`]: crate::gpu::Device::cpu
    pub fn attach_device(&mut self, device: crate::gpu::Device, model: &Model) -> Result<()> {
        if self.params.smoother == Preconditioner::Jgs2 {
            return Err(JelloError::Invalid(
                "solver.smoother: jgs2 runs on the CPU path only (the device smoother is \
                 Jacobi-PCG)"
                    .into(),
            ));
        }
        if self.params.subspace_direct {
            return Err(JelloError::Invalid(
                "solver.subspace_solve: direct runs on the CPU path only (the device solves \
                 the levels by block-Jacobi PCG)"
                    .into(),
            ));
        }
        let pinned: Vec<bool> = self.fixed.iter().step_by(3).copied().collect();
        if let (Some(old), Some(e)) = (self.device.as_mut(), self.device_energy.take()) {
            e.free(old.backend_mut());
        }
        self.device = Some(DeviceDirection::new(
            device,
            model,
            [self.affine.as_ref(), self.sms.as_ref()],
            &pinned,
        )?);
        Ok(())
    }

    /// Gives the full-space PCG its JGS2 preconditioner ([`Preconditioner::Jgs2`]): a JGS2
    /// subspace built for this model and the step's inertia weight
    /// ([`crate::solver::jgs2::load_or_build`]). Errors when the vertex counts differ.
    pub fn set_jgs2_subspace(&mut self, model: &Model, subspace: Arc<Jgs2Subspace>) -> Result<()> {
        self.jgs2 = Some(Jgs2Preconditioner::new(model, subspace)?);
        Ok(())
    }

    /// The device's description, when the direction runs on one.
    pub fn device_name(&self) -> Option<String> {
        self.device.as_ref().map(|d| d.device().info().to_string())
    }

    /// Work counts of the last step.
    pub fn last_stats(&self) -> MultilevelStats {
        self.stats
    }

    /// CG iterations of the last step per level, finest first: the full-space smoother, then
    /// the SMS and the affine level where the solver has them (0 for a level solved directly).
    fn cg_per_level(&self) -> Vec<usize> {
        let mut counts = vec![self.stats.full_cg];
        if self.sms.is_some() {
            counts.push(self.stats.sms_cg);
        }
        if self.affine.is_some() {
            counts.push(self.stats.affine_cg);
        }
        counts
    }

    /// Full-space PCG iterations per Newton iteration.
    pub fn n_cg(&self) -> usize {
        self.n_cg
    }

    /// The SMS basis (none without an SMS level).
    pub fn basis(&self) -> Option<&Arc<SmsBasis>> {
        self.basis.as_ref()
    }

    /// Cubature-weighted element Hessians at `x` (clamp filter), one term per sample.
    pub fn cubature_terms(&self, model: &Model, x: &[f64]) -> Vec<ElementTerm> {
        self.samples
            .par_iter()
            .map(|&(e, scale)| {
                let tet = model.mesh.tets[e as usize];
                let corners =
                    tet.map(|i| Vector3::from_column_slice(&x[3 * i as usize..3 * i as usize + 3]));
                let s = element_hessian_filtered(
                    &model.materials[e as usize],
                    &model.rest[e as usize],
                    &corners,
                    Some(EigenFilter::Clamp),
                );
                let mut hessian = [0.0; 144];
                if let Some(h) = s.hessian {
                    for r in 0..12 {
                        for c in 0..12 {
                            hessian[12 * r + c] = h[(r, c)];
                        }
                    }
                }
                ElementTerm {
                    vertices: tet,
                    scale,
                    hessian,
                }
            })
            .collect()
    }

    /// The subspace direction `d_s` for right-hand side `rhs` (= −∇E, pinned entries 0): each
    /// level in turn (affine, then SMS) solves its Galerkin system `UᵀHU q = Uᵀr` by
    /// block-Jacobi PCG to the subspace tolerance (or, with
    /// [`MultilevelParams::subspace_direct`], a dense Cholesky) and updates `r ← r − H U q`.
    /// Returns `d_s` and the CG iterations per level (affine, SMS; 0 for a direct solve).
    pub fn subspace_direction(&self, h: &HessianOperator, rhs: &[f64]) -> (Vec<f64>, [usize; 2]) {
        let n = rhs.len();
        let mut d = vec![0.0; n];
        let mut r = rhs.to_vec();
        let mut counts = [0; 2];
        let mut u = vec![0.0; n];
        let mut hu = vec![0.0; n];
        for (slot, level) in [&self.affine, &self.sms].into_iter().enumerate() {
            let Some(level) = level else { continue };
            let mut b = vec![0.0; level.dim()];
            level.restrict(&r, &mut b);
            let direct = (self.params.subspace_direct && level.dim() <= SUBSPACE_DIRECT_MAX_DIM)
                .then(|| galerkin_direct(h, level, &b))
                .flatten();
            let q = match direct {
                Some(q) => q,
                None => {
                    let (q, iterations) = self.level_pcg(h, level, slot, &b, &mut u, &mut hu);
                    counts[slot] = iterations;
                    q
                }
            };
            level.lift(&q, &mut u);
            h.apply(&u, &mut hu);
            for k in 0..n {
                d[k] += u[k];
                r[k] -= hu[k];
            }
        }
        (d, counts)
    }

    /// The level's block-Jacobi PCG (plus, at the SMS level, the affine coarse correction) on
    /// `Uᵀ H U q = b` to [`MultilevelParams::subspace_tolerance`]; `(q, iterations)`. `u`, `hu`:
    /// full-space scratch.
    fn level_pcg(
        &self,
        h: &HessianOperator,
        level: &Level,
        slot: usize,
        b: &[f64],
        u: &mut [f64],
        hu: &mut [f64],
    ) -> (Vec<f64>, usize) {
        let inv = invert_blocks(&h.galerkin_diagonal(level));
        let mut galerkin = |q: &[f64], out: &mut [f64]| {
            level.lift(q, u);
            h.apply(u, hu);
            level.restrict(hu, out);
        };
        // The SMS level's preconditioner: block Jacobi, plus (by default) the additive
        // coarse correction on the objects' affine motions embedded in the SMS DOFs.
        let coarse = match (&self.sms_coarse, slot) {
            (Some(c), 1) => c.factor(&mut galerkin, level.dim()),
            _ => None,
        };
        let mut q = vec![0.0; level.dim()];
        let out = pcg(
            &mut galerkin,
            &|r: &[f64], z: &mut [f64]| {
                block_apply(&inv, r, z);
                if let Some((c, chol)) = &coarse {
                    c.add_correction(chol, r, z);
                }
            },
            b,
            &mut q,
            self.params.subspace_tolerance,
            self.params.subspace_max_iterations,
        );
        (q, out.iterations)
    }

    fn refresh_lag(&mut self, elastic: &dyn ElasticTerms, tets: &[[u32; 4]], x: &[f64]) {
        elastic.elastic_element_hessian_blocks(x, EigenFilter::Clamp, tets, &mut self.elem);
        self.elastic_lag
            .gather_blocks(&self.layout.block_gather, self.elem.as_flattened());
        self.stats.lag_refreshes += 1;
    }
}

/// The affine motions of each object written in SMS handle DOFs, `R a`: handle `h` of object
/// `o` gets `[A | t + A (o_h − c_o)]`, so `U_s R a = Σ_h φ_h (A (x − c_o) + t)`, the object's
/// affine map wherever the weights sum to 1 (everywhere without pins). Used as the coarse
/// space of an additive two-level preconditioner `P⁻¹ = B⁻¹ + R (Rᵀ G R)⁻¹ Rᵀ` of the SMS
/// Galerkin matrix G: block Jacobi B cannot see the soft global modes (rigid motions held
/// only by inertia) against the stiff elastic ones.
struct Coarse {
    objects: usize,
    object: Vec<u32>,
    shift: Vec<[f64; 3]>,
}

impl Coarse {
    /// The embedding of `affine`'s objects into `sms`'s handles (a handle belongs to the
    /// object of its centroid vertex).
    fn new(sms: &SmsBasis, affine: &AffineBasis) -> Self {
        let (object, shift) = (0..sms.n_handles())
            .map(|h| {
                let o = affine.object[sms.partition.centroid[h] as usize];
                let c = affine.origin[o as usize];
                let oh = sms.origin[h];
                (o, [oh[0] - c[0], oh[1] - c[1], oh[2] - c[2]])
            })
            .unzip();
        Coarse {
            objects: affine.n_objects(),
            object,
            shift,
        }
    }

    /// `q = R a`.
    fn embed(&self, a: &[f64], q: &mut [f64]) {
        for (h, (&o, s)) in self.object.iter().zip(&self.shift).enumerate() {
            let ao = &a[HANDLE_DOFS * o as usize..][..HANDLE_DOFS];
            let qh = &mut q[HANDLE_DOFS * h..][..HANDLE_DOFS];
            for r in 0..3 {
                let row = &ao[4 * r..4 * r + 4];
                qh[4 * r..4 * r + 3].copy_from_slice(&row[..3]);
                qh[4 * r + 3] = row[3] + row[0] * s[0] + row[1] * s[1] + row[2] * s[2];
            }
        }
    }

    /// `a = Rᵀ q`.
    fn project(&self, q: &[f64], a: &mut [f64]) {
        a.fill(0.0);
        for (h, (&o, s)) in self.object.iter().zip(&self.shift).enumerate() {
            let qh = &q[HANDLE_DOFS * h..][..HANDLE_DOFS];
            let ao = &mut a[HANDLE_DOFS * o as usize..][..HANDLE_DOFS];
            for r in 0..3 {
                for c in 0..3 {
                    ao[4 * r + c] += qh[4 * r + c] + qh[4 * r + 3] * s[c];
                }
                ao[4 * r + 3] += qh[4 * r + 3];
            }
        }
    }

    /// The Cholesky factor of `Rᵀ G R` (one Galerkin product per coarse DOF), or `None` when
    /// it is not SPD (then block Jacobi alone).
    fn factor(
        &self,
        galerkin: &mut dyn FnMut(&[f64], &mut [f64]),
        dim: usize,
    ) -> Option<(&Self, nalgebra::Cholesky<f64, nalgebra::Dyn>)> {
        let nc = HANDLE_DOFS * self.objects;
        let mut m = nalgebra::DMatrix::<f64>::zeros(nc, nc);
        let (mut e, mut q, mut gq, mut col) =
            (vec![0.0; nc], vec![0.0; dim], vec![0.0; dim], vec![0.0; nc]);
        for j in 0..nc {
            e.fill(0.0);
            e[j] = 1.0;
            self.embed(&e, &mut q);
            galerkin(&q, &mut gq);
            self.project(&gq, &mut col);
            for i in 0..nc {
                m[(i, j)] = col[i];
            }
        }
        let m = (&m + m.transpose()) * 0.5;
        m.cholesky().map(|c| (self, c))
    }

    /// `z += R (Rᵀ G R)⁻¹ Rᵀ r`.
    fn add_correction(
        &self,
        chol: &nalgebra::Cholesky<f64, nalgebra::Dyn>,
        r: &[f64],
        z: &mut [f64],
    ) {
        let nc = HANDLE_DOFS * self.objects;
        let mut a = vec![0.0; nc];
        self.project(r, &mut a);
        let sol = chol.solve(&nalgebra::DVector::from_vec(a));
        let mut q = vec![0.0; z.len()];
        self.embed(sol.as_slice(), &mut q);
        for (zk, qk) in z.iter_mut().zip(&q) {
            *zk += qk;
        }
    }
}

/// `z = blockdiag(inv) r`, 12×12 blocks.
fn block_apply(inv: &[[f64; 144]], r: &[f64], z: &mut [f64]) {
    for (h, b) in inv.iter().enumerate() {
        let rh = &r[HANDLE_DOFS * h..][..HANDLE_DOFS];
        for i in 0..HANDLE_DOFS {
            z[HANDLE_DOFS * h + i] = (0..HANDLE_DOFS).map(|j| b[12 * i + j] * rh[j]).sum();
        }
    }
}

/// Largest subspace (DOFs) that [`MultilevelParams::subspace_direct`] solves densely: 100
/// handles (a dense Cholesky of 1,200² in well under a second); larger levels keep the PCG.
pub const SUBSPACE_DIRECT_MAX_DIM: usize = 1_200;

/// `Uᵀ H U q = b` by a dense Cholesky of the assembled Galerkin matrix
/// ([`HessianOperator::galerkin_matrix`]); rows of handles that cover only pinned vertices
/// (all zero) get a unit diagonal. `None` when the matrix is not SPD (the caller falls back to
/// the PCG).
fn galerkin_direct(h: &HessianOperator, level: &Level, b: &[f64]) -> Option<Vec<f64>> {
    let dim = level.dim();
    let mut g = nalgebra::DMatrix::<f64>::from_row_slice(dim, dim, &h.galerkin_matrix(level));
    for i in 0..dim {
        if g[(i, i)] == 0.0 {
            g[(i, i)] = 1.0;
        }
    }
    let chol = g.cholesky()?;
    Some(
        chol.solve(&nalgebra::DVector::from_column_slice(b))
            .as_slice()
            .to_vec(),
    )
}

/// The full-space smoother of one Newton iteration: PCG on the lagged (or, under the rescue,
/// fresh) Hessian with its preconditioner, tolerance and cap.
struct Smoother<'a> {
    h_lag: &'a HessianOperator<'a>,
    precond: &'a dyn Fn(&[f64], &mut [f64]),
    beta: Beta,
    tolerance: f64,
    cap: usize,
}

impl Smoother<'_> {
    /// `H_l d = rhs` from `d = 0` — a descent direction by construction — on the device when
    /// one is attached (its H uploaded this iteration), else in f64; counts its iterations.
    fn solve_from_zero(
        &self,
        device: Option<&mut DeviceDirection>,
        rhs: &[f64],
        stats: &mut MultilevelStats,
    ) -> Result<Vec<f64>> {
        if let Some(dd) = device {
            let out = dd.solve(
                rhs,
                [None, None],
                DirectionRun {
                    subspace: false,
                    sms_correction: None,
                    level_tolerance: 0.0,
                    level_max: 0,
                    n_cg: self.cap,
                    full_tolerance: self.tolerance,
                },
            )?;
            stats.full_cg += out.counts[2];
            return Ok(out.d);
        }
        let mut d = vec![0.0; rhs.len()];
        let out = pcg_with(
            &mut |v: &[f64], o: &mut [f64]| self.h_lag.apply(v, o),
            self.precond,
            rhs,
            &mut d,
            self.tolerance,
            self.cap,
            self.beta,
        );
        stats.full_cg += out.iterations;
        Ok(d)
    }
}

fn check_params(p: &MultilevelParams) -> Result<()> {
    let bad = |key: &str, msg: String| Err(JelloError::Invalid(format!("solver.{key}: {msg}")));
    if p.n_cg == Some(0) {
        return bad("n_cg", "must be ≥ 1".into());
    }
    if !(p.jump_factor.is_finite() && p.jump_factor > 0.0) {
        return bad("jump_factor", format!("must be > 0, got {}", p.jump_factor));
    }
    if !(p.subspace_tolerance.is_finite()
        && p.subspace_tolerance > 0.0
        && p.subspace_tolerance < 1.0)
    {
        return bad(
            "subspace_tolerance",
            format!("must lie in (0, 1), got {}", p.subspace_tolerance),
        );
    }
    if !(p.full_tolerance.is_finite() && (0.0..1.0).contains(&p.full_tolerance)) {
        return bad(
            "full_tolerance",
            format!("must lie in [0, 1), got {}", p.full_tolerance),
        );
    }
    if let LagRefresh::Adaptive {
        window,
        threshold,
        min_gap,
    } = p.lag
    {
        if window == 0 || min_gap == 0 || !(threshold > 0.0 && threshold <= 1.0) {
            return bad(
                "lag_refresh",
                format!("adaptive rule needs window ≥ 1, min_gap ≥ 1, threshold in (0, 1]; got {window}, {min_gap}, {threshold}"),
            );
        }
    }
    if let Some(r) = p.rescue {
        if !(r.tolerance.is_finite() && r.tolerance > 0.0 && r.tolerance < 1.0) || r.max_cg == 0 {
            return bad(
                "rescue",
                format!(
                    "needs tolerance in (0, 1) and max_cg ≥ 1; got {} and {}",
                    r.tolerance, r.max_cg
                ),
            );
        }
    }
    if let MultilevelStop::Subspace { tol } = p.stop {
        if !(tol.is_finite() && tol > 0.0) {
            return bad("subspace_stop", format!("must be > 0, got {tol}"));
        }
    }
    Ok(())
}

impl StepSolver for MultilevelSolver {
    fn name(&self) -> String {
        "multilevel".into()
    }

    fn step(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        x: &mut Vec<f64>,
        trace: bool,
    ) -> Result<StepReport> {
        newton_loop(self, problem, elastic, x, trace)
    }
}

/// The multilevel solver's state within one step.
struct StepState {
    /// Whether the adaptive rule asks for a lag refresh at the next iteration.
    refresh_due: bool,
    /// The iteration of the last lag refresh.
    last_refresh: usize,
    /// The last line-search step lengths, for [`LagRefresh::Adaptive`].
    alphas: VecDeque<f64>,
    /// Per-vertex and pair terms on the elastic pattern (inertia, pins, obstacles).
    nonelastic: SymSparse,
    /// `nonelastic` plus the lagged elastic Hessian: the smoother's matrix.
    full: SymSparse,
    /// The current iteration's number within the step.
    iteration: usize,
    /// Largest per-vertex norm of the last direction's subspace part (of the direction when
    /// the levels did not take part), m.
    ds_norm: f64,
    /// The paper's stop ratio of the last accepted step, 1/s.
    last_ds_ratio: f64,
}

impl StepState {
    /// The state at a step's start.
    fn new(layout: &HessianLayout) -> Self {
        StepState {
            refresh_due: true,
            last_refresh: 0,
            iteration: 0,
            alphas: VecDeque::new(),
            nonelastic: layout.zeros(),
            full: layout.zeros(),
            ds_norm: f64::INFINITY,
            last_ds_ratio: f64::INFINITY,
        }
    }
}

impl InnerSolve for MultilevelSolver {
    fn max_iterations(&self) -> usize {
        self.params.max_iterations
    }

    fn extent(&self) -> f64 {
        self.extent
    }

    fn begin_step(&mut self, problem: &StepProblem) -> Result<()> {
        self.stats = MultilevelStats::default();
        if self.params.device_line_search {
            if let Some(dd) = self.device.as_mut() {
                // On the device backend's model, uploaded when the device was attached.
                if !DeviceEnergy::fits(dd.backend_mut(), problem.model) {
                    return Err(JelloError::Solver(
                        "multilevel device: the step's model is not the one the device was \
                         attached with"
                            .into(),
                    ));
                }
                if self.device_energy.is_none() {
                    self.device_energy = Some(DeviceEnergy::new(dd.backend_mut())?);
                }
            }
        }
        self.step_state = StepState::new(&self.layout);
        Ok(())
    }

    fn stop_met(&self, residual: f64, moved: Option<f64>) -> bool {
        match moved {
            Some(dx) => self
                .params
                .stop
                .met(residual, dx, self.step_state.last_ds_ratio),
            None => self.params.stop.met(residual, f64::INFINITY, f64::INFINITY),
        }
    }

    /// The levels' and the smoother's direction (see the module docs), on the device when one
    /// is attached; falls back to the smoother from zero when the composition does not descend.
    fn direction(
        &mut self,
        at: &Iterate,
        d_out: &mut Vec<f64>,
        timings: &mut StepTimings,
        _work: &mut StepWork,
    ) -> Result<Option<f64>> {
        let (problem, elastic, x, g, iterations) =
            (at.problem, at.elastic, at.x, at.g, at.iteration);
        let n = x.len();
        let contact = problem.model.contact.is_some();
        self.step_state.iteration = iterations;
        // Past the rescue's threshold the step finishes as Newton-PCG: the Hessian fresh,
        // the levels skipped, the full-space PCG from zero to the rescue's tolerance.
        let rescue = self.params.rescue.filter(|r| iterations > r.after);
        let (cg_tolerance, cg_cap) = match rescue {
            Some(r) => (r.tolerance, r.max_cg.max(self.n_cg)),
            None => (self.params.full_tolerance, self.n_cg),
        };
        if rescue.is_some() {
            self.stats.rescued += 1;
        }
        // Hessian terms at x: per-vertex/pair terms and contact fresh, the elastic part
        // lagged for the smoother and cubature-weighted (fresh) for the subspace levels.
        let t0 = Instant::now();
        self.step_state.nonelastic.clear();
        problem.add_vertex_hessian(&self.layout, x, &mut self.step_state.nonelastic);
        let blocks = if contact {
            problem.contact_hessian_blocks(x)
        } else {
            Vec::new()
        };
        let refresh = rescue.is_some()
            || match self.params.lag {
                LagRefresh::Iteration => true,
                LagRefresh::Step => iterations == 1,
                LagRefresh::Adaptive { .. } => iterations == 1 || self.step_state.refresh_due,
            };
        if refresh {
            self.refresh_lag(elastic, &problem.model.mesh.tets, x);
            self.step_state.last_refresh = iterations;
            self.step_state.refresh_due = false;
            self.step_state.alphas.clear();
        }
        self.step_state
            .full
            .values_mut()
            .copy_from_slice(self.step_state.nonelastic.values());
        for (f, l) in self
            .step_state
            .full
            .values_mut()
            .iter_mut()
            .zip(self.elastic_lag.values())
        {
            *f += l;
        }
        // Under the rescue the levels are skipped: their direction, from the cubature
        // Hessian, can be far off on a stalled step, and a PCG warm-started there and stopped
        // relative to its (large) initial residual is no better than it.
        let levels = rescue.is_none() && (self.affine.is_some() || self.sms.is_some());
        let cub = if levels {
            self.cubature_terms(problem.model, x)
        } else {
            Vec::new()
        };
        // The levels' base holds per-vertex terms only (inertia, pins, obstacle pairs) on
        // the elastic pattern: dropping its zeros makes each Galerkin product's H·v and
        // each Galerkin block assembly cost what is there, not the pattern's width.
        let sub_base = self.step_state.nonelastic.without_zeros();
        timings.assembly_ms += ms(t0);
        let t0 = Instant::now();
        let h_sub = HessianOperator {
            base: &sub_base,
            elements: &cub,
            contact: &blocks,
            fixed: &self.fixed,
        };
        let h_lag = HessianOperator {
            base: &self.step_state.full,
            elements: &[],
            contact: &blocks,
            fixed: &self.fixed,
        };
        let rhs: Vec<f64> = g
            .iter()
            .zip(&self.fixed)
            .map(|(&gk, &f)| if f { 0.0 } else { -gk })
            .collect();
        // The full-space preconditioner: Jacobi (classical PCG), or the JGS2 map frozen at
        // x (flexible PCG: it is not exactly symmetric away from rest).
        let frozen: Option<FrozenJgs2> = match (self.params.smoother, self.jgs2.as_mut()) {
            (Preconditioner::Jacobi, _) => None,
            (Preconditioner::Jgs2, Some(p)) => Some(p.freeze(problem, x, &blocks)),
            (Preconditioner::Jgs2, None) => {
                return Err(JelloError::Solver(
                    "multilevel: smoother jgs2 needs a JGS2 subspace (set_jgs2_subspace)".into(),
                ))
            }
        };
        let diag = if frozen.is_none() {
            h_lag.diagonal()
        } else {
            Vec::new()
        };
        let beta = if frozen.is_some() {
            Beta::PolakRibiere
        } else {
            Beta::FletcherReeves
        };
        let precond = |r: &[f64], z: &mut [f64]| match &frozen {
            Some(f) => f.apply(r, z),
            None => {
                for k in 0..r.len() {
                    z[k] = r[k] / diag[k];
                }
            }
        };
        let smoother = Smoother {
            h_lag: &h_lag,
            precond: &precond,
            beta,
            tolerance: cg_tolerance,
            cap: cg_cap,
        };
        let (d_s, mut d) = if !levels {
            // Newton-PCG: the smoother from zero on the (fresh, under the rescue) Hessian.
            if let Some(dd) = self.device.as_mut() {
                dd.upload(&h_sub, &h_lag)?;
            }
            let d = smoother.solve_from_zero(self.device.as_mut(), &rhs, &mut self.stats)?;
            (vec![0.0; n], d)
        } else if let Some(dd) = self.device.as_mut() {
            // The direction on the device (f32): H uploaded, levels and smoother there. The
            // SMS level's coarse correction is host f64 (its small Cholesky, and `RᵀGR`
            // from 12 Galerkin products per object as on the CPU path), added to the
            // device's block Jacobi once per PCG iteration.
            dd.upload(&h_sub, &h_lag)?;
            let inv = [&self.affine, &self.sms].map(|l| {
                l.as_ref()
                    .map(|l| invert_blocks(&h_sub.galerkin_diagonal(l)))
            });
            let coarse = match (&self.sms_coarse, &self.sms) {
                (Some(c), Some(level)) => {
                    let (mut u, mut hu) = (vec![0.0; n], vec![0.0; n]);
                    c.factor(
                        &mut |q: &[f64], out: &mut [f64]| {
                            level.lift(q, &mut u);
                            h_sub.apply(&u, &mut hu);
                            level.restrict(&hu, out);
                        },
                        level.dim(),
                    )
                }
                _ => None,
            };
            let mut correction = coarse.as_ref().map(|(c, chol)| {
                move |r: &[f64]| -> Result<Vec<f64>> {
                    let mut z = vec![0.0; r.len()];
                    c.add_correction(chol, r, &mut z);
                    Ok(z)
                }
            });
            let out = dd.solve(
                &rhs,
                [inv[0].as_deref(), inv[1].as_deref()],
                DirectionRun {
                    subspace: true,
                    sms_correction: correction.as_mut().map(|f| f as &mut HostCorrection),
                    level_tolerance: self.params.subspace_tolerance,
                    level_max: self.params.subspace_max_iterations,
                    n_cg: cg_cap,
                    full_tolerance: cg_tolerance,
                },
            )?;
            self.stats.affine_cg += out.counts[0];
            self.stats.sms_cg += out.counts[1];
            self.stats.full_cg += out.counts[2];
            (out.d_s, out.d)
        } else {
            let (d_s, counts) = self.subspace_direction(&h_sub, &rhs);
            self.stats.affine_cg += counts[0];
            self.stats.sms_cg += counts[1];
            // Full-space smoother: Jacobi PCG on H_lag d = −g warm-started at d_s, i.e.
            // the correction d_f of H_lag d_f = −g − H_lag d_s (see the module docs).
            let mut d = d_s.clone();
            let out = pcg_with(
                &mut |v: &[f64], o: &mut [f64]| h_lag.apply(v, o),
                &precond,
                &rhs,
                &mut d,
                cg_tolerance,
                cg_cap,
                beta,
            );
            self.stats.full_cg += out.iterations;
            (d_s, d)
        };
        let mut g_dot_d = dot(g, &d);
        let mut used_subspace = levels;
        // Without the levels `d` already is the PCG from zero: rerunning it cannot help.
        if levels && (g_dot_d.is_nan() || g_dot_d >= 0.0) {
            // The levels use the cubature Hessian, the smoother the lagged one: their
            // composition is not guaranteed to descend. PCG from zero on one SPD operator is.
            self.stats.descent_fallbacks += 1;
            used_subspace = false;
            d = smoother.solve_from_zero(self.device.as_mut(), &rhs, &mut self.stats)?;
            g_dot_d = dot(g, &d);
        }
        timings.solve_ms += ms(t0);
        self.step_state.ds_norm = if used_subspace {
            max_vertex_norm(&d_s)
        } else {
            max_vertex_norm(&d)
        };
        *d_out = d;
        Ok((!(g_dot_d.is_nan() || g_dot_d >= 0.0)).then_some(g_dot_d))
    }

    fn line_search(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        x: &[f64],
        d: &[f64],
        change: f64,
        change_exact: &mut bool,
        g_dot_d: f64,
        x_new: &mut Vec<f64>,
    ) -> Result<LineSearchResult> {
        Ok(match (self.device.as_mut(), self.device_energy.as_mut()) {
            (Some(dd), Some(de)) if self.params.device_line_search => {
                let out = device_backtracking(
                    de,
                    dd.backend_mut(),
                    problem,
                    elastic,
                    x,
                    d,
                    change,
                    *change_exact,
                    g_dot_d,
                    x_new,
                )?;
                self.stats.ls_device_trials += out.device_trials;
                self.stats.ls_host_trials += out.host_trials;
                if out.result.accepted {
                    *change_exact = out.exact;
                }
                out.result
            }
            _ => {
                let r = backtracking(problem, elastic, x, d, change, g_dot_d, x_new);
                self.stats.ls_host_trials += r.trials;
                r
            }
        })
    }

    fn accepted(
        &mut self,
        problem: &StepProblem,
        _x: &[f64],
        _d: &[f64],
        _g_dot_d: f64,
        _e0: f64,
        ls: &LineSearchResult,
        _timings: &mut StepTimings,
    ) {
        let st = &mut self.step_state;
        if let LagRefresh::Adaptive {
            window,
            threshold,
            min_gap,
        } = self.params.lag
        {
            st.alphas.push_back(ls.alpha);
            if st.alphas.len() > window {
                st.alphas.pop_front();
            }
            let mean = st.alphas.iter().sum::<f64>() / st.alphas.len() as f64;
            if st.alphas.len() == window
                && mean < threshold
                && st.iteration + 1 - st.last_refresh >= min_gap
            {
                st.refresh_due = true;
            }
        }
        let h_step = if problem.h > 0.0 { problem.h } else { 1.0 };
        st.last_ds_ratio = st.ds_norm / (h_step * self.diagonal);
    }

    fn finish(&mut self, iterations: usize, work: &mut StepWork) {
        self.stats.iterations = iterations;
        work.cg_iterations = self.cg_per_level();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jello_precompute::sms::{build_sms, SmsOptions};

    /// The coarse embedding is exact: lifting `R a` through the SMS basis gives the affine
    /// level's lift of `a` (weights sum to 1 without pins), for two objects, and `Rᵀ` is its
    /// adjoint.
    #[test]
    fn coarse_embedding_lifts_to_the_affine_field() {
        let a_mesh = crate::mesh::box_grid([0.0, 0.0, 0.0], [0.4, 0.1, 0.1], [8, 2, 2]);
        let b_mesh = crate::mesh::box_grid([0.0, 0.3, 0.0], [0.2, 0.4, 0.1], [4, 2, 2]);
        let off = a_mesh.positions.len() as u32;
        let mut positions = a_mesh.positions.clone();
        positions.extend_from_slice(&b_mesh.positions);
        let mut tets = a_mesh.tets.clone();
        tets.extend(b_mesh.tets.iter().map(|t| t.map(|v| v + off)));
        let n = positions.len();
        let pinned = vec![false; n];
        let sms = build_sms(
            &positions,
            &tets,
            &vec![1e6; tets.len()],
            &pinned,
            &SmsOptions::new(6),
        )
        .unwrap();
        let affine = AffineBasis::new(&positions, &tets).unwrap();
        assert_eq!(affine.n_objects(), 2);
        let c = Coarse::new(&sms, &affine);
        let (ls, la) = (Level::sms(&sms, &pinned), Level::affine(&affine, &pinned));
        // Deterministic, irregular coefficients (A of order 1, t in metres).
        let a: Vec<f64> = (0..24)
            .map(|k| ((k * 7919 % 23) as f64 - 11.0) / 10.0)
            .collect();
        let mut q = vec![0.0; ls.dim()];
        c.embed(&a, &mut q);
        let (mut us, mut ua) = (vec![0.0; 3 * n], vec![0.0; 3 * n]);
        ls.lift(&q, &mut us);
        la.lift(&a, &mut ua);
        let err = us
            .iter()
            .zip(&ua)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max);
        let scale = ua.iter().map(|y| y.abs()).fold(0.0, f64::max);
        assert!(err <= 1e-12 * scale, "{err:e} vs {scale:e}");
        // Adjoint: (R a)·y = a·(Rᵀ y).
        let y: Vec<f64> = (0..ls.dim())
            .map(|k| ((k * 104_729 % 31) as f64 - 15.0) / 7.0)
            .collect();
        let mut rty = vec![0.0; 24];
        c.project(&y, &mut rty);
        let lhs: f64 = q.iter().zip(&y).map(|(p, r)| p * r).sum();
        let rhs: f64 = a.iter().zip(&rty).map(|(p, r)| p * r).sum();
        assert!(
            (lhs - rhs).abs() <= 1e-12 * lhs.abs().max(rhs.abs()),
            "{lhs} vs {rhs}"
        );
    }
}
