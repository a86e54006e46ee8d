//! The incremental potential of one time step (implicit Euler or BDF2, see
//! [`super::integrator`]) and its derivatives.

use super::hessian::{pack_element_hessians, PackedTetHessian};
use super::obstacle::barrier;
use super::surface_contact::{
    candidate_pairs, pairs_at_vertex, project_psd, PairEval, SurfacePair,
};
use super::{HessianLayout, Model, Obstacle, State, StepScheme};
use crate::contact::friction::FrictionSet;
use crate::material::{
    dpdf_curvature, element_energy, element_gradient, element_gradients_lanes,
    element_hessian_filtered, element_hessians_filtered_lanes, EigenFilter, ElementState,
    MaterialModel, ELEMENT_LANES,
};
use jello_precompute::sparse::{pack_upper_blocks, SymSparse};
use nalgebra::SMatrix;
use nalgebra::Vector3;
use rayon::prelude::*;

/// The elastic part Ψ(x) of the potential, evaluated by some backend: the f64 CPU reference
/// ([`Model`] itself implements it) or a GPU evaluator.
pub trait ElasticTerms: Sync {
    /// Ψ(x), J; `+∞` where undefined (e.g. an inverted Neo-Hookean element).
    fn elastic_energy(&self, x: &[f64]) -> f64;
    /// Ψ(x) and ∇Ψ added into `g` (N).
    fn elastic_gradient(&self, x: &[f64], g: &mut [f64]) -> f64;
    /// PSD-projected per-element Hessians (row-major 12×12, N/m), one per tet, into `out`, with
    /// ∂P/∂F's negative eigenvalues clamped at 0.
    fn elastic_element_hessians(&self, x: &[f64], out: &mut Vec<[f64; 144]>) {
        self.elastic_element_hessians_filtered(x, EigenFilter::Clamp, out)
    }
    /// PSD per-element Hessians (row-major 12×12, N/m), one per tet, into `out`, ∂P/∂F's nine
    /// eigenvalues passed through `filter` ([`EigenFilter`]).
    fn elastic_element_hessians_filtered(
        &self,
        x: &[f64],
        filter: EigenFilter,
        out: &mut Vec<[f64; 144]>,
    );
    /// [`Self::elastic_element_hessians_filtered`] packed for the block gather
    /// ([`PackedTetHessian`], blocks oriented by the global node indices of `tets`, the model's
    /// tets). The default packs the full matrices; the f64 reference writes the packed blocks
    /// directly (37.5% fewer bytes to write and for the gather to read).
    fn elastic_element_hessian_blocks(
        &self,
        x: &[f64],
        filter: EigenFilter,
        tets: &[[u32; 4]],
        out: &mut Vec<PackedTetHessian>,
    ) {
        let mut full = Vec::new();
        self.elastic_element_hessians_filtered(x, filter, &mut full);
        pack_element_hessians(tets, &full, out);
    }
    /// A short name for reports ("cpu-f64", the adapter name, ...).
    fn backend_name(&self) -> String {
        "cpu-f64".into()
    }
    /// What [`Self::elastic_energy_change`] measures against: Ψ at `x`, per element where the
    /// backend can (the f64 CPU reference does), else only the total.
    fn elastic_reference(&self, x: &[f64]) -> ElasticReference {
        let total = self.elastic_energy(x);
        ElasticReference {
            per_element: Vec::new(),
            total,
            magnitude: total.abs(),
        }
    }
    /// Ψ(x) − Ψ(x_ref), J, from the reference of [`Self::elastic_reference`]: summed element by
    /// element where the reference holds per-element values, so the difference does not cancel
    /// inside one large total.
    fn elastic_energy_change(&self, x: &[f64], reference: &ElasticReference) -> f64 {
        self.elastic_energy(x) - reference.total
    }
    /// [`Self::elastic_gradient`] and [`Self::elastic_energy_change`] at once: Ψ(x), ∇Ψ added
    /// into `g`, and Ψ(x) − Ψ(x_ref). The f64 reference evaluates both in one element pass.
    fn elastic_gradient_and_change(
        &self,
        x: &[f64],
        g: &mut [f64],
        reference: &ElasticReference,
    ) -> (f64, f64) {
        let total = self.elastic_gradient(x, g);
        (total, self.elastic_energy_change(x, reference))
    }
}

/// Ψ at a reference state (the start of a step), for energy differences that do not cancel.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ElasticReference {
    /// Ψ_e per element, J (empty when the backend gives only totals).
    pub per_element: Vec<f64>,
    /// Ψ, J.
    pub total: f64,
    /// Σ_e |Ψ_e|, J: the scale of the round-off in an energy difference.
    pub magnitude: f64,
}

/// The step's energy reference: Ψ per element and the barriers at [`StepProblem::x_start`].
#[derive(Clone, Debug)]
struct EnergyReference {
    elastic: ElasticReference,
    /// The obstacle barrier, J.
    barrier: f64,
    /// The IPC contact sum Σ m·b at κ = 1, m⁴ (κ may be raised during the step, see
    /// [`StepProblem::raise_contact_stiffness`]).
    contact: f64,
}

impl EnergyReference {
    fn barriers_finite(&self) -> bool {
        self.barrier.is_finite() && self.contact.is_finite()
    }
}

/// IPC's contact stiffness κ (J/m⁴) of one step: set at the step's start, raised by Newton when
/// a pair gets too close ([`StepProblem::raise_contact_stiffness`]); an atomic so the solvers
/// can hold the problem by shared reference.
#[derive(Debug, Default)]
struct Stiffness(std::sync::atomic::AtomicU64);

impl Stiffness {
    fn get(&self) -> f64 {
        f64::from_bits(self.0.load(std::sync::atomic::Ordering::Relaxed))
    }
    fn set(&self, k: f64) {
        self.0
            .store(k.to_bits(), std::sync::atomic::Ordering::Relaxed)
    }
}

impl Clone for Stiffness {
    fn clone(&self) -> Self {
        let s = Stiffness::default();
        s.set(self.get());
        s
    }
}

/// The friction lagged for the current Newton solve ([`StepProblem::lag_friction`]) and its
/// energy at [`StepProblem::x_start`]; behind a lock so solvers holding the problem by shared
/// reference can re-lag between passes.
#[derive(Debug, Default)]
struct LaggedFriction(std::sync::RwLock<Option<std::sync::Arc<(FrictionSet, f64)>>>);

impl LaggedFriction {
    fn get(&self) -> Option<std::sync::Arc<(FrictionSet, f64)>> {
        self.0.read().map(|g| g.clone()).unwrap_or(None)
    }
    fn set(&self, v: Option<(FrictionSet, f64)>) {
        if let Ok(mut g) = self.0.write() {
            *g = v.map(std::sync::Arc::new);
        }
    }
}

impl Clone for LaggedFriction {
    fn clone(&self) -> Self {
        LaggedFriction(std::sync::RwLock::new(self.get()))
    }
}

/// The corner positions of `tet` in `x` (flattened, m).
#[inline]
pub(crate) fn corners(x: &[f64], tet: &[u32; 4]) -> [Vector3<f64>; 4] {
    // Written out: `tet.map(from_column_slice)` goes through an out-of-line `try_map` that
    // `perf` put at 16% of a plain VBD iteration and 5% of Newton's assembly.
    let p = |i: u32| {
        let i = 3 * i as usize;
        Vector3::new(x[i], x[i + 1], x[i + 2])
    };
    [p(tet[0]), p(tet[1]), p(tet[2]), p(tet[3])]
}

impl Model {
    /// Ψ_e of element `t` at positions `x` (flattened, m), J.
    fn element_psi(&self, x: &[f64], t: usize) -> f64 {
        element_energy(
            &self.materials[t],
            &self.rest[t],
            &corners(x, &self.mesh.tets[t]),
        )
    }

    /// dᵀ ∇²Ψ(x) d, J/m² × m² = J: the elastic energy's true (unprojected, possibly negative)
    /// curvature along the displacement `d` (flattened, m), in f64 whatever backend evaluates
    /// Ψ elsewhere. Per element: V·vec(δF)ᵀ (∂P/∂F) vec(δF) with δF = D(d)·Dm⁻¹
    /// ([`crate::material::dpdf_curvature`]), summed in element order.
    pub fn elastic_curvature(&self, x: &[f64], d: &[f64]) -> f64 {
        ordered_sum(self.mesh.num_tets(), |t| {
            let tet = &self.mesh.tets[t];
            let rest = &self.rest[t];
            let dv = corners(d, tet);
            let df = rest.deformation_gradient(&dv);
            if df == nalgebra::Matrix3::zeros() {
                return 0.0;
            }
            let f = rest.deformation_gradient(&corners(x, tet));
            rest.volume * dpdf_curvature(&self.materials[t], &f, &df)
        })
    }
}

/// Σ f(i) for i < n, evaluated in parallel and summed in index order: the same bits whatever
/// the thread count or scheduling (rayon's `sum` splits adaptively, so its rounding varied from
/// run to run — a resumed run's reported energy differed from the straight run's in the last
/// bit under load).
fn ordered_sum(n: usize, f: impl Fn(usize) -> f64 + Sync + Send) -> f64 {
    let terms: Vec<f64> = (0..n).into_par_iter().map(f).collect();
    terms.iter().sum()
}

impl Model {
    /// Element `t`'s energy (J) and gradient (N, vertex-major) at `x`: only the 13 numbers the
    /// gradient passes gather (an [`crate::material::ElementState`] carries room for a 12×12
    /// Hessian, ~1.3 KB a tet: collecting those made each gradient of armadillo_114k allocate
    /// and fault in ~150 MB).
    fn element_energy_gradient(&self, x: &[f64], t: usize) -> ElementEnergyGradient {
        let s = element_gradient(
            &self.materials[t],
            &self.rest[t],
            &corners(x, &self.mesh.tets[t]),
        );
        ElementEnergyGradient {
            energy: s.energy,
            gradient: s.gradient.into(),
        }
    }
}

/// One element's energy (J) and gradient (N).
#[derive(Clone, Copy, Default)]
struct ElementEnergyGradient {
    energy: f64,
    gradient: [f64; 12],
}

impl Model {
    /// Every element's energy (J) and gradient (N) at `x`, tet `t` at index `t`: the tets in
    /// groups of [`ELEMENT_LANES`] ([`element_gradients_lanes`]: the corotated family's SVDs in
    /// lock-step), the mesh's last partial group one by one — the same bits either way.
    fn element_energy_gradients(&self, x: &[f64]) -> Vec<ElementEnergyGradient> {
        let mut per = vec![ElementEnergyGradient::default(); self.mesh.num_tets()];
        per.par_chunks_mut(ELEMENT_LANES)
            .enumerate()
            .for_each(|(chunk, out)| {
                let t0 = chunk * ELEMENT_LANES;
                if out.len() < ELEMENT_LANES {
                    for (l, o) in out.iter_mut().enumerate() {
                        *o = self.element_energy_gradient(x, t0 + l);
                    }
                    return;
                }
                element_gradients_lanes::<f64, ELEMENT_LANES>(
                    std::array::from_fn(|l| &self.materials[t0 + l]),
                    std::array::from_fn(|l| &self.rest[t0 + l]),
                    &std::array::from_fn(|l| corners(x, &self.mesh.tets[t0 + l])),
                    |l, s| {
                        out[l] = ElementEnergyGradient {
                            energy: s.energy,
                            gradient: s.gradient.into(),
                        }
                    },
                );
            });
        per
    }

    /// Adds the per-element gradients `per` (one per tet) into `g`: gathered per vertex in
    /// parallel over the vertex → tet incidence, each vertex's contributions in ascending tet
    /// order — the order of a sequential scatter over the elements, so the same bits, and the
    /// pass no longer ends in a serial loop over every element (which bounds its scaling with
    /// threads).
    fn add_element_gradients(&self, per: &[ElementEnergyGradient], g: &mut [f64]) {
        let Some(vt) = self
            .vertex_tets()
            .filter(|_| g.len() == 3 * self.num_vertices())
        else {
            for (t, s) in per.iter().enumerate() {
                for (a, &v) in self.mesh.tets[t].iter().enumerate() {
                    for i in 0..3 {
                        g[3 * v as usize + i] += s.gradient[3 * a + i];
                    }
                }
            }
            return;
        };
        g.par_chunks_mut(3).enumerate().for_each(|(v, gv)| {
            let (k0, k1) = (vt.offsets[v] as usize, vt.offsets[v + 1] as usize);
            for (&t, &a) in vt.tets[k0..k1].iter().zip(&vt.local[k0..k1]) {
                let c = &per[t as usize].gradient[3 * a as usize..3 * a as usize + 3];
                gv[0] += c[0];
                gv[1] += c[1];
                gv[2] += c[2];
            }
        });
    }
}

impl ElasticTerms for Model {
    fn elastic_energy(&self, x: &[f64]) -> f64 {
        ordered_sum(self.mesh.num_tets(), |t| self.element_psi(x, t))
    }

    fn elastic_reference(&self, x: &[f64]) -> ElasticReference {
        let per_element: Vec<f64> = (0..self.mesh.num_tets())
            .into_par_iter()
            .map(|t| self.element_psi(x, t))
            .collect();
        ElasticReference {
            total: per_element.iter().sum(),
            magnitude: per_element.iter().map(|e| e.abs()).sum(),
            per_element,
        }
    }

    fn elastic_energy_change(&self, x: &[f64], reference: &ElasticReference) -> f64 {
        if reference.per_element.len() != self.mesh.num_tets() {
            return self.elastic_energy(x) - reference.total;
        }
        ordered_sum(self.mesh.num_tets(), |t| {
            self.element_psi(x, t) - reference.per_element[t]
        })
    }

    fn elastic_gradient(&self, x: &[f64], g: &mut [f64]) -> f64 {
        let per = self.element_energy_gradients(x);
        self.add_element_gradients(&per, g);
        per.iter().map(|s| s.energy).sum()
    }

    fn elastic_gradient_and_change(
        &self,
        x: &[f64],
        g: &mut [f64],
        reference: &ElasticReference,
    ) -> (f64, f64) {
        if reference.per_element.len() != self.mesh.num_tets() {
            let total = self.elastic_gradient(x, g);
            return (total, self.elastic_energy_change(x, reference));
        }
        let per = self.element_energy_gradients(x);
        self.add_element_gradients(&per, g);
        let (mut e, mut change) = (0.0, 0.0);
        for (s, r) in per.iter().zip(&reference.per_element) {
            e += s.energy;
            change += s.energy - r;
        }
        (e, change)
    }

    fn elastic_element_hessians_filtered(
        &self,
        x: &[f64],
        filter: EigenFilter,
        out: &mut Vec<[f64; 144]>,
    ) {
        out.resize(self.mesh.num_tets(), [0.0; 144]);
        out.par_chunks_mut(ELEMENT_LANES)
            .enumerate()
            .for_each(|(chunk, o)| {
                self.element_hessians_row_major(x, chunk * ELEMENT_LANES, filter, |l, h| {
                    o[l].copy_from_slice(h)
                })
            });
    }

    fn elastic_element_hessian_blocks(
        &self,
        x: &[f64],
        filter: EigenFilter,
        tets: &[[u32; 4]],
        out: &mut Vec<PackedTetHessian>,
    ) {
        out.resize(self.mesh.num_tets(), [0.0; 90]);
        out.par_chunks_mut(ELEMENT_LANES)
            .enumerate()
            .for_each(|(chunk, o)| {
                let t0 = chunk * ELEMENT_LANES;
                self.element_hessians_row_major(x, t0, filter, |l, h| {
                    pack_upper_blocks(&tets[t0 + l], h, &mut o[l])
                })
            });
    }
}

impl Model {
    /// The filtered Hessians of the tets `t0 ..` (up to [`ELEMENT_LANES`] of them, fewer at the
    /// mesh's end) at `x`, each handed to `write(l, h)` (tet `t0 + l`) as a row-major 12×12
    /// slice; bit-identical to evaluating them one by one.
    fn element_hessians_row_major(
        &self,
        x: &[f64],
        t0: usize,
        filter: EigenFilter,
        mut write: impl FnMut(usize, &[f64]),
    ) {
        self.element_hessian_states(x, t0, filter, |l, s| {
            self.write_row_major(t0 + l, s, |h| write(l, h))
        });
    }

    /// Energy, gradient and `filter`ed Hessian of the tets `t0 ..` (up to [`ELEMENT_LANES`] of
    /// them, fewer at the mesh's end) at `x`, each handed to `each(l, state)` (tet `t0 + l`):
    /// a full group through [`element_hessians_filtered_lanes`] (SVDs in lock-step), the
    /// mesh's last partial group one by one — the same bits either way. The element passes
    /// (Newton's assembly, JGS2's projected cache) walk the tets in such groups.
    pub(crate) fn element_hessian_states(
        &self,
        x: &[f64],
        t0: usize,
        filter: EigenFilter,
        mut each: impl FnMut(usize, ElementState<f64>),
    ) {
        let n = self.mesh.num_tets();
        if t0 + ELEMENT_LANES > n {
            for t in t0..n {
                let s = element_hessian_filtered(
                    &self.materials[t],
                    &self.rest[t],
                    &corners(x, &self.mesh.tets[t]),
                    Some(filter),
                );
                each(t - t0, s);
            }
            return;
        }
        element_hessians_filtered_lanes::<f64, ELEMENT_LANES>(
            std::array::from_fn(|l| &self.materials[t0 + l]),
            std::array::from_fn(|l| &self.rest[t0 + l]),
            &std::array::from_fn(|l| corners(x, &self.mesh.tets[t0 + l])),
            Some(filter),
            each,
        );
    }

    /// Hands tet `t`'s Hessian in `s` to `write` as a row-major 12×12 slice.
    fn write_row_major(&self, t: usize, s: ElementState<f64>, write: impl FnOnce(&[f64])) {
        if let Some(h) = s.hessian {
            if self.materials[t].model == MaterialModel::Linear {
                // Contracted from ∂P/∂F: symmetric only to round-off, so transposed.
                let row_major: [f64; 144] = std::array::from_fn(|k| h[(k / 12, k % 12)]);
                write(&row_major);
            } else {
                // Symmetrised by construction, so its column-major storage is the row-major
                // matrix (a plain copy: the transposing loop cost ~10%).
                write(h.as_slice());
            }
        }
    }
}

/// The strict inversion filter's floor on an element's J for one move from `j` (> 0): it may
/// shrink to a tenth of its volume, but not below [`STRICT_MIN_J`] (an element already below
/// that may not shrink at all). A bare J > 0 test fails on elements flattened to round-off
/// (J ~ 1e-21 after repeated filtered moves against the ground, where the sign of the
/// volume is noise).
pub fn strict_volume_floor(j: f64) -> f64 {
    j.min((0.1 * j).max(STRICT_MIN_J))
}

/// The smallest J (volume ratio) the strict filter lets an element shrink to, 1e-8: far above
/// the round-off of a volume in f64 (~1e-15 of an edge cubed), and flat enough that a solver
/// blocked by it is stuck on a physically flattened element (at 1e-4 an element flattened by
/// an earlier step blocked every Newton direction that would squash it further: a thrown ball's
/// strict retry stopped after one iteration).
pub const STRICT_MIN_J: f64 = 1e-8;

/// Why the jump of the obstacles (and pinned vertices) from `from` to `to` (full collision
/// position arrays, m) at the start of the step from `t` to `t_end` (s) is unsafe, if it is
/// ([`crate::contact::IpcContact::obstacle_jump_conflict`]).
fn obstacle_jump(
    ipc: &crate::contact::IpcContact,
    from: &[[f64; 3]],
    to: &[[f64; 3]],
    t: f64,
    t_end: f64,
) -> Option<String> {
    match ipc.obstacle_jump_conflict(from, to) {
        Ok(None) => None,
        Ok(Some(c)) => Some(format!(
            "obstacle `{}` jumps to its scripted position at t = {t_end:.6} s at the step's \
             start, outside the step filter, and would cross or touch `{}` (vertices {:?}, \
             {:.3e} m apart at t = {t:.6} s; the jump is clear for {:.0}% of its length): use \
             a smaller time step h or a slower script",
            c.obstacle,
            c.other,
            c.pair.ids,
            c.distance,
            100.0 * c.t
        )),
        Err(e) => Some(format!("the obstacles' scripted positions: {e}")),
    }
}

/// An axis-aligned box (lower, upper corner), m.
type Bounds = (Vector3<f64>, Vector3<f64>);

/// One time step's minimisation problem E(x) = ½‖x − x̃‖²_M / ĥ² + Ψ(x) + B(x) (ĥ = h for
/// implicit Euler, 2h/3 for BDF2: [`super::integrator`]), or a static load increment
/// E(x) = Ψ(x) + B(x) − f·x ([`StepProblem::new_static`]).
#[derive(Clone, Debug)]
pub struct StepProblem<'a> {
    /// The model.
    pub model: &'a Model,
    /// Time step, s (a static solve's pseudo-time per increment: pins follow their scripts in
    /// it). The obstacle barrier's weight is κ·m/h² with this h whatever the integrator (see
    /// [`super::integrator`]); the inertia weight is [`Self::inertia`].
    pub h: f64,
    /// Time at the end of the step, s.
    pub t_end: f64,
    /// Positions at the start of the step, m.
    pub x_prev: Vec<f64>,
    /// Inertial target x̃ = x̂ + ĥ v̂ + ĥ² g (xᵗ + h vᵗ + h² g for implicit Euler), m, pinned
    /// DOFs at their script targets (xᵗ in a static solve, where it is unused).
    pub x_tilde: Vec<f64>,
    /// Inertia weight 1/ĥ², 1/s² (1/h² for implicit Euler, 9/(4h²) for BDF2): the inertia term
    /// is ½ Σ_v m_v·`inertia`·|x_v − x̃_v|². Zero in a static solve.
    pub inertia: f64,
    /// x̂, m: the base of the step's velocity, v^{t+1} = (x^{t+1} − x̂)/ĥ (xᵗ for implicit
    /// Euler and static increments, 4/3 xᵗ − 1/3 xᵗ⁻¹ for BDF2). Solvers that need the
    /// velocity an iterate implies (ADMM's friction) take it from here and [`Self::h_hat`].
    pub x_hat: Vec<f64>,
    /// ĥ, s: h for implicit Euler (and a static increment's pseudo-time), 2h/3 for BDF2.
    pub h_hat: f64,
    /// Static load per DOF, N (gravity and forces times the increment's load fraction), whose
    /// potential −f·x replaces inertia; empty for a dynamic step.
    pub load: Vec<f64>,
    /// Per DOF: driven by a pin (its value is fixed to the script's target).
    pub fixed: Vec<bool>,
    /// A feasible initial guess: x̃ pulled back toward xᵗ until no vertex crosses an obstacle and
    /// no element inverts, with pinned vertices at their targets — or xᵗ itself (pins at their
    /// targets) when that has the lower energy. [`Self::offer_starts`] may replace it (the
    /// pins' carry of [`crate::sim::Simulation`] when moving pins invert their neighbours here).
    pub x_start: Vec<f64>,
    /// Every iterate keeps every element positively oriented: [`Self::step_limit`] never lets
    /// the step through zero volume, and the vertex solvers filter their local moves (set for
    /// the strict retry of `inversion = "forbid"`, see [`crate::sim::Simulation::step`]).
    pub strict_inversion: bool,
    /// Ψ and the barrier at `x_start`, made on first use by [`Self::energy_change`].
    reference: std::sync::OnceLock<EnergyReference>,
    /// IPC contact stiffness κ, J/m⁴ (unused without [`Model::contact`]).
    kappa: Stiffness,
    /// IPC friction lagged for the current solve (none until [`Self::lag_friction`]).
    friction: LaggedFriction,
    /// Where the triangle-mesh obstacles of [`Model::contact`] are during the step: their
    /// scripted positions at `t_end` (m, one per obstacle vertex), `None` when no obstacle
    /// moves (they stay where they were at t = 0). Every contact evaluation of the step puts
    /// them here ([`crate::contact::obstacles`]).
    pub obstacles_end: Option<Vec<[f64; 3]>>,
    /// The obstacles' positions at the step's start (t_end − h), m; `None` as above.
    pub obstacles_start: Option<Vec<[f64; 3]>>,
    /// Why the obstacles' jump to `obstacles_end` at the step's start is unsafe (it would make
    /// a surface touch or cross another), if it is: the step must not be solved
    /// ([`crate::sim::Simulation`] fails it with this message).
    pub obstacle_jump: Option<String>,
}

impl<'a> StepProblem<'a> {
    /// Sets up the dynamic step from `state` with time step `h` (s) under the model's
    /// integrator ([`StepScheme::new`]: BDF2 when the model asks for it and `state` has a
    /// history, else implicit Euler).
    pub fn new(model: &'a Model, state: &State, h: f64) -> Self {
        let scheme = StepScheme::new(model, state, h);
        let n = state.x.len();
        let g = model.gravity;
        let hh = scheme.h_hat;
        let mut x_tilde: Vec<f64> = if scheme.bdf2 {
            (0..n)
                .map(|k| scheme.x_hat[k] + hh * scheme.v_hat[k] + hh * hh * g[k % 3])
                .collect()
        } else {
            // Implicit Euler, written as it always was (x̂ = xᵗ, v̂ = vᵗ, ĥ = h): the same bits.
            (0..n)
                .map(|k| state.x[k] + h * state.v[k] + h * h * g[k % 3])
                .collect()
        };
        // External forces: x̃ += ĥ² f_v / m_v, with the total force split by mass.
        for f in model.forces.iter().filter(|f| f.active(state.t)) {
            let m_total: f64 = f.vertices.iter().map(|&v| model.mass[v as usize]).sum();
            if m_total > 0.0 {
                for &v in &f.vertices {
                    for k in 0..3 {
                        x_tilde[3 * v as usize + k] += hh * hh * f.force[k] / m_total;
                    }
                }
            }
        }
        let inertia = scheme.inertia();
        let mut prob = Self::assemble_step(model, state, h, x_tilde, inertia, Vec::new());
        prob.x_hat = scheme.x_hat;
        prob.h_hat = hh;
        prob
    }

    /// A static load increment from `state`: no inertia; the load is `fraction` (0..=1) of
    /// gravity's weight m·g plus the forces active at `state.t`, and pins move to their script
    /// positions at `state.t + h` (`h` is the pseudo-time of one increment).
    pub fn new_static(model: &'a Model, state: &State, h: f64, fraction: f64) -> Self {
        let n = state.x.len();
        let g = model.gravity;
        let mut load: Vec<f64> = (0..n)
            .map(|k| fraction * model.mass[k / 3] * g[k % 3])
            .collect();
        for f in model.forces.iter().filter(|f| f.active(state.t)) {
            let m_total: f64 = f.vertices.iter().map(|&v| model.mass[v as usize]).sum();
            if m_total > 0.0 {
                for &v in &f.vertices {
                    let share = model.mass[v as usize] / m_total;
                    for k in 0..3 {
                        load[3 * v as usize + k] += fraction * f.force[k] * share;
                    }
                }
            }
        }
        Self::assemble_step(model, state, h, state.x.clone(), 0.0, load)
    }

    fn assemble_step(
        model: &'a Model,
        state: &State,
        h: f64,
        mut x_tilde: Vec<f64>,
        inertia: f64,
        load: Vec<f64>,
    ) -> Self {
        let n = state.x.len();
        let t_end = state.t + h;
        let mut fixed = vec![false; n];
        let mut targets = state.x.clone();
        for pin in &model.pins {
            for (&v, &p0) in pin.vertices.iter().zip(&pin.start) {
                let p = pin.script.position(p0, t_end);
                for k in 0..3 {
                    fixed[3 * v as usize + k] = true;
                    targets[3 * v as usize + k] = p[k];
                    x_tilde[3 * v as usize + k] = p[k];
                }
            }
        }
        let mut load = load;
        for (k, f) in load.iter_mut().enumerate() {
            if fixed[k] {
                *f = 0.0;
            }
        }
        let mut prob = StepProblem {
            model,
            h,
            t_end,
            x_prev: state.x.clone(),
            x_tilde: x_tilde.clone(),
            inertia,
            x_hat: state.x.clone(),
            h_hat: h,
            load,
            fixed,
            x_start: Vec::new(),
            strict_inversion: false,
            reference: std::sync::OnceLock::new(),
            kappa: Stiffness::default(),
            friction: LaggedFriction::default(),
            obstacles_end: None,
            obstacles_start: None,
            obstacle_jump: None,
        };
        prob.kappa.set(prob.initial_kappa_bound());
        let mut base = state.x.clone();
        for k in 0..n {
            if prob.fixed[k] {
                base[k] = targets[k];
            }
        }
        if let Some(ipc) = model.contact.as_ref().filter(|c| c.obstacles_move()) {
            let (start, end) = (
                ipc.obstacle_positions_at(state.t),
                ipc.obstacle_positions_at(t_end),
            );
            prob.obstacle_jump = obstacle_jump(
                ipc,
                &ipc.positions_with(&state.x, &start),
                &ipc.positions_with(&base, &end),
                state.t,
                t_end,
            );
            prob.obstacles_start = Some(start);
            prob.obstacles_end = Some(end);
        }
        if inertia == 0.0 {
            // Static: start from the last equilibrium (pins at their new targets).
            prob.x_start = base;
            return prob;
        }
        // Initial guess: move free DOFs from xᵗ toward x̃ as far as the filters allow.
        let dx: Vec<f64> = (0..n)
            .map(|k| {
                if prob.fixed[k] {
                    0.0
                } else {
                    x_tilde[k] - state.x[k]
                }
            })
            .collect();
        let alpha = prob.max_step(&base, &dx);
        let predicted: Vec<f64> = (0..n).map(|k| base[k] + alpha * dx[k]).collect();
        // With huge steps (h²g of metres) the inertial prediction can be a far worse start than
        // staying put; take whichever has the lower energy (compared term by term, so the
        // inertia's large constant does not decide). The chosen point's Ψ per element is the
        // step's energy reference (every `ElasticTerms` evaluates Ψ with the model's f64
        // elements).
        let at_base = prob.reference_at(model.elastic_reference(&base), &base);
        let at_pred = prob.reference_at(model.elastic_reference(&predicted), &predicted);
        let diff = prob.inertia_difference(&base, &predicted)
            + at_pred
                .elastic
                .per_element
                .iter()
                .zip(&at_base.elastic.per_element)
                .map(|(p, b)| p - b)
                .sum::<f64>()
            + prob.barrier_change(&at_base, &at_pred);
        let (x_start, reference) = if diff.is_finite() && diff <= 0.0 {
            (predicted, at_pred)
        } else {
            (base, at_base)
        };
        prob.x_start = x_start;
        let _ = prob.reference.set(reference);
        prob
    }

    /// The collision routines' position array at the flat model positions `x` (m) with the
    /// obstacles where this step has them ([`Self::obstacles_end`]).
    pub fn contact_positions<'b>(
        &self,
        ipc: &crate::contact::IpcContact,
        x: &'b [f64],
    ) -> std::borrow::Cow<'b, [[f64; 3]]> {
        match &self.obstacles_end {
            Some(o) => ipc.positions_with(x, o),
            None => ipc.positions(x),
        }
    }

    /// Whether any pinned vertex moves in this step (its target differs from xᵗ).
    pub fn pins_move(&self) -> bool {
        (0..self.fixed.len()).any(|k| self.fixed[k] && self.x_tilde[k] != self.x_prev[k])
    }

    /// Elements inverted (J ≤ 0) at [`Self::x_start`] that are positively oriented at xᵗ: what
    /// the pins' move did to their neighbours (see [`Self::offer_starts`]).
    pub fn start_inversions(&self) -> usize {
        self.new_inversions(&self.x_start)
    }

    /// Offers other initial guesses (3n, pinned DOFs are set to their targets here): the step
    /// starts from the one — [`Self::x_start`] included — with the fewest elements inverted
    /// that are positive at xᵗ, then the lowest energy (compared term by term as in
    /// [`Self::new`]); candidates with an infinite energy (inside an obstacle) are skipped.
    /// Returns the index of the candidate taken, `None` when `x_start` stays.
    ///
    /// [`crate::solver::pd::PinCarry`] makes such candidates when a moving pin inverts its
    /// neighbours at the default guess: the strict filter of `inversion = "forbid"` keeps
    /// elements positive only where they are positive at `x_start`, so a step that starts
    /// inverted cannot be repaired by any solver.
    pub fn offer_starts(&mut self, candidates: Vec<Vec<f64>>) -> Option<usize> {
        let m = self.model;
        let n = self.x_start.len();
        // (candidate index, positions, new inversions, reference); `None` is x_start itself.
        let mut entries = vec![(
            None,
            self.x_start.clone(),
            self.new_inversions(&self.x_start),
            self.reference_at(m.elastic_reference(&self.x_start), &self.x_start),
        )];
        for (i, mut x) in candidates.into_iter().enumerate() {
            if x.len() != n || x.iter().any(|v| !v.is_finite()) {
                continue;
            }
            for ((xk, &fixed), &target) in x.iter_mut().zip(&self.fixed).zip(&self.x_tilde) {
                if fixed {
                    *xk = target;
                }
            }
            let reference = self.reference_at(m.elastic_reference(&x), &x);
            if reference.elastic.total.is_finite() && reference.barriers_finite() {
                let inverted = self.new_inversions(&x);
                entries.push((Some(i), x, inverted, reference));
            }
        }
        // Energies relative to the first finite entry, term by term (x_start's own energy is
        // infinite when an inverted element has an energy barrier, e.g. neo-Hookean).
        let finite = |r: &EnergyReference| r.elastic.total.is_finite() && r.barriers_finite();
        let base = entries.iter().position(|e| finite(&e.3))?;
        let energy = |e: &(Option<usize>, Vec<f64>, usize, EnergyReference)| {
            if !finite(&e.3) {
                return f64::INFINITY;
            }
            let r = &entries[base];
            self.inertia_difference(&r.1, &e.1)
                + e.3
                    .elastic
                    .per_element
                    .iter()
                    .zip(&r.3.elastic.per_element)
                    .map(|(c, r)| c - r)
                    .sum::<f64>()
                + self.barrier_change(&r.3, &e.3)
        };
        let keys: Vec<(usize, f64)> = entries.iter().map(|e| (e.2, energy(e))).collect();
        let best = (0..entries.len())
            .min_by(|&a, &b| {
                keys[a]
                    .0
                    .cmp(&keys[b].0)
                    .then(keys[a].1.total_cmp(&keys[b].1))
            })
            .expect("x_start is an entry");
        let (taken, x, _, reference) = entries.swap_remove(best);
        let i = taken?;
        self.x_start = x;
        self.reference = std::sync::OnceLock::new();
        let _ = self.reference.set(reference);
        Some(i)
    }

    /// Elements positive at xᵗ and inverted (J ≤ 0) at `x`.
    fn new_inversions(&self, x: &[f64]) -> usize {
        let m = self.model;
        (0..m.mesh.num_tets())
            .into_par_iter()
            .filter(|&t| m.element_j(&self.x_prev, t) > 0.0 && m.element_j(x, t) <= 0.0)
            .count()
    }

    /// Whether E(x_start) is finite (else the step cannot start; see
    /// [`Self::diagnose_non_finite`]).
    pub fn start_is_finite(&self, elastic: &dyn ElasticTerms) -> bool {
        let r = self.reference(elastic);
        r.elastic.total.is_finite()
            && r.barriers_finite()
            && self.inertia_energy(&self.x_start).is_finite()
            && self.x_start.iter().all(|v| v.is_finite())
    }

    /// Whether this is a static load increment (no inertia).
    pub fn is_static(&self) -> bool {
        self.inertia == 0.0
    }

    /// Inertia term ½ Σ_v m_v·inertia·|x_v − x̃_v|² (½‖x − x̃‖²_M / ĥ² for a dynamic step), minus
    /// the static load's work f·x in a static increment, J.
    pub fn inertia_energy(&self, x: &[f64]) -> f64 {
        let w = self.inertia;
        let inertia: f64 = if w == 0.0 {
            0.0
        } else {
            self.model
                .mass
                .iter()
                .enumerate()
                .map(|(v, m)| {
                    let mut s = 0.0;
                    for k in 0..3 {
                        let d = x[3 * v + k] - self.x_tilde[3 * v + k];
                        s += d * d;
                    }
                    0.5 * m * w * s
                })
                .sum()
        };
        inertia - self.load.iter().zip(x).map(|(f, x)| f * x).sum::<f64>()
    }

    /// The inertia (and load) part of E(x_b) − E(x_a), J, vertex by vertex:
    /// ½m·w·(x_b − x_a)·(x_b + x_a − 2x̃) − f·(x_b − x_a). It never forms ½m·w|x − x̃|², whose
    /// constant part (½‖h²g‖²_M: ~5e10 J for a 1 m beam at h = 1e4 s) would swamp the change.
    pub fn inertia_difference(&self, xa: &[f64], xb: &[f64]) -> f64 {
        let w = self.inertia;
        let mut e = 0.0;
        for (v, m) in self.model.mass.iter().enumerate() {
            let mut s = 0.0;
            for k in 0..3 {
                let i = 3 * v + k;
                s += (xb[i] - xa[i]) * (xb[i] + xa[i] - 2.0 * self.x_tilde[i]);
            }
            e += 0.5 * m * w * s;
        }
        e - self
            .load
            .iter()
            .enumerate()
            .map(|(i, f)| f * (xb[i] - xa[i]))
            .sum::<f64>()
    }

    /// E(x_b) − E(x_a), J, summed per element and per vertex so that no large constant cancels
    /// (+∞ when x_b is infeasible).
    pub fn energy_difference(&self, elastic: &dyn ElasticTerms, xa: &[f64], xb: &[f64]) -> f64 {
        let b = self.barrier_parts(xb);
        if !(b.0.is_finite() && b.1.is_finite()) {
            return f64::INFINITY;
        }
        let a = self.barrier_parts(xa);
        let reference = elastic.elastic_reference(xa);
        self.inertia_difference(xa, xb)
            + elastic.elastic_energy_change(xb, &reference)
            + (b.0 - a.0)
            + self.kappa() * (b.1 - a.1)
            + (self.friction_energy(xb).0 - self.friction_energy(xa).0)
    }

    fn reference(&self, elastic: &dyn ElasticTerms) -> &EnergyReference {
        self.reference.get_or_init(|| {
            self.reference_at(elastic.elastic_reference(&self.x_start), &self.x_start)
        })
    }

    /// E(x) − E(x_start), J: the step's energy relative to its initial guess, evaluated per
    /// element and per vertex ([`Self::energy_difference`]; Ψ at `x_start` is computed once per
    /// step). Line searches compare these, so acceptance never depends on the absolute energy's
    /// size. +∞ when `x` is infeasible.
    pub fn energy_change(&self, elastic: &dyn ElasticTerms, x: &[f64]) -> f64 {
        let b = self.barrier_parts(x);
        if !(b.0.is_finite() && b.1.is_finite()) {
            return f64::INFINITY;
        }
        let r = self.reference(elastic);
        let (d, d_start) = self.friction_energy(x);
        self.inertia_difference(&self.x_start, x)
            + elastic.elastic_energy_change(x, &r.elastic)
            + (b.0 - r.barrier)
            + self.kappa() * (b.1 - r.contact)
            + (d - d_start)
    }

    /// Round-off allowance (J) of a comparison between energy changes near `e` (J) evaluated
    /// at points near `x`: 1e-13 × (|e| + Σ_e |Ψ_e(x_start)| + B(x_start)) plus the round-off
    /// the terms carry even where they nearly cancel — 1e-14 × Σ_e V_e(|μ_e| + |λ_e|) for the
    /// elements (an SVD-based Ψ at a rotation is ~1e-16 of μ·V, not 0) and 8ε ×
    /// Σ_v ½m·w·|x − x₀|·(|x| + |x₀| + 2|x̃|) for inertia. Near convergence a true decrease is
    /// below those digits; without the allowance a converged step stalls (a falling ball's
    /// Newton step, ΔE ~ 1e-14 J, backtracked 40 times).
    pub fn energy_slack(&self, elastic: &dyn ElasticTerms, e: f64, x: &[f64]) -> f64 {
        let r = self.reference(elastic);
        let w = self.inertia;
        let mut inertia = 0.0;
        if w > 0.0 {
            for (v, m) in self.model.mass.iter().enumerate() {
                let mut s = 0.0;
                for k in 0..3 {
                    let i = 3 * v + k;
                    s += (x[i] - self.x_start[i]).abs()
                        * (x[i].abs() + self.x_start[i].abs() + 2.0 * self.x_tilde[i].abs());
                }
                inertia += 0.5 * m * w * s;
            }
        }
        let friction = self.friction_start();
        1e-13
            * (e.abs()
                + r.elastic.magnitude
                + r.barrier.abs()
                + self.kappa() * r.contact
                + friction)
            + 1e-14 * self.model.energy_scale
            + 8.0 * f64::EPSILON * inertia
    }

    /// IPC's contact stiffness κ of this step, J/m⁴ (0 without [`Model::contact`]).
    pub fn kappa(&self) -> f64 {
        self.kappa.get()
    }

    /// κ's bounds ([`crate::contact::barrier::stiffness_bounds`]) for this step: the mass scale
    /// is the mean vertex mass times the inertia weight (1/h² in a dynamic step; a static
    /// increment, which has no inertia, uses 1/h² of its pseudo-time step).
    fn kappa_bounds(&self) -> Option<crate::contact::barrier::StiffnessBounds> {
        let ipc = self.model.contact.as_ref()?;
        let n = self.model.mass.len().max(1) as f64;
        let mean_mass = self.model.mass.iter().sum::<f64>() / n;
        Some(ipc.stiffness_bounds(mean_mass * self.mass_weight()))
    }

    /// κ before [`Self::init_contact_stiffness`]: the fixed κ if the scene sets one, else κ_min.
    fn initial_kappa_bound(&self) -> f64 {
        match (&self.model.contact, self.kappa_bounds()) {
            (Some(ipc), Some(b)) => ipc.kappa.unwrap_or(b.min),
            _ => 0.0,
        }
    }

    /// What every contact-aware solver does at the start of a step (Newton, multilevel, and
    /// the runner's rebuilt step for residual pictures): κ balanced at `x_start`
    /// ([`Self::init_contact_stiffness`], from `elastic`) and friction lagged at the step's start
    /// xᵗ ([`Self::lag_friction`]). Returns how many further lagging passes the scene's
    /// friction asks for after this one (`passes − 1`; 0 without friction or with no active
    /// pair). A no-op returning 0 without contact.
    pub fn begin_contact_step(&self, elastic: &dyn ElasticTerms) -> usize {
        self.init_contact_stiffness(elastic);
        match self
            .model
            .contact
            .as_ref()
            .and_then(|c| c.friction.as_ref())
        {
            Some(f) if self.lag_friction(&self.x_prev) > 0 => f.passes - 1,
            _ => 0,
        }
    }

    /// Sets κ for the step as IPC does: the value that best balances the incremental
    /// potential's gradient against the contact gradient at `x_start`, clamped to
    /// [κ_min, κ_max] ([`crate::contact::barrier::initial_stiffness`]); κ_min when no pair is
    /// active. A fixed κ from the scene is kept. Returns κ (J/m⁴).
    pub fn init_contact_stiffness(&self, elastic: &dyn ElasticTerms) -> f64 {
        let (Some(ipc), Some(bounds)) = (&self.model.contact, self.kappa_bounds()) else {
            return 0.0;
        };
        if let Some(k) = ipc.kappa {
            self.kappa.set(k);
            return k;
        }
        let x = &self.x_start;
        let xs = self.contact_positions(ipc, x);
        let pairs = ipc.active_pairs(&xs).unwrap_or_default();
        let mut gb = vec![0.0; x.len()];
        if !ipc.add_gradient(&pairs, &xs, 1.0, &mut gb).is_finite() {
            // A start with a touching pair: no balance to strike (the step reports it).
            gb.iter_mut().for_each(|g| *g = 0.0);
        }
        for (g, &f) in gb.iter_mut().zip(&self.fixed) {
            if f {
                *g = 0.0;
            }
        }
        let k = if gb.iter().all(|&g| g == 0.0) {
            bounds.min
        } else {
            self.kappa.set(0.0);
            let mut ge = vec![0.0; x.len()];
            self.gradient(elastic, x, &mut ge);
            crate::contact::barrier::initial_stiffness(&ge, &gb, bounds)
        };
        self.kappa.set(k);
        k
    }

    /// IPC's κ raise after a Newton iteration: doubles κ (up to κ_max) when the smallest pair
    /// distance at `x` and the previous one (`prev_min_sq`, m², updated here) are both below
    /// the raise gap and still shrinking ([`crate::contact::barrier::raise_stiffness`]).
    /// Returns whether κ changed (the energy and gradient at `x` must then be re-evaluated).
    pub fn raise_contact_stiffness(&self, x: &[f64], prev_min_sq: &mut f64) -> bool {
        // Adaptive κ only: skip the pair search otherwise.
        let adaptive = |c: &&std::sync::Arc<crate::contact::IpcContact>| {
            c.kappa.is_none() && self.kappa_bounds().is_some()
        };
        let Some(ipc) = self.model.contact.as_ref().filter(adaptive) else {
            return false;
        };
        let xs = self.contact_positions(ipc, x);
        let min_sq = ipc
            .active_pairs(&xs)
            .map(|p| ipc.min_distance_sq(&p, &xs))
            .unwrap_or(f64::INFINITY);
        self.raise_contact_stiffness_at(min_sq, prev_min_sq)
    }

    /// [`Self::raise_contact_stiffness`] from the smallest squared distance of the pairs within
    /// d̂ at the current point, `min_sq` (m², +∞ without such a pair), as a device computes it
    /// (below IPC's raise gap, [`crate::contact::barrier::KAPPA_RAISE_GAP`] of the bounding-box
    /// diagonal, on every backend: `solver/jgs2/device_ipc.rs`, "κ and friction", says why the
    /// f32 iteration needs no larger one).
    pub fn raise_contact_stiffness_at(&self, min_sq: f64, prev_min_sq: &mut f64) -> bool {
        let (Some(ipc), Some(bounds)) = (&self.model.contact, self.kappa_bounds()) else {
            return false;
        };
        if ipc.kappa.is_some() {
            return false;
        }
        let k = self.kappa();
        let raised = crate::contact::barrier::raise_stiffness(
            k,
            bounds.max,
            *prev_min_sq,
            min_sq,
            ipc.bbox_diagonal,
            crate::contact::barrier::KAPPA_RAISE_GAP,
        );
        *prev_min_sq = min_sq;
        if raised != k {
            self.kappa.set(raised);
            true
        } else {
            false
        }
    }

    /// The IPC contact pairs' PSD-projected Hessians κ·∇²(m·b) at `x` (N/m), with their
    /// stencils (global collision-mesh ids: ids ≥ the model's vertex count are obstacle
    /// vertices, without degrees of freedom). Empty without contact.
    pub fn contact_hessian_blocks(&self, x: &[f64]) -> Vec<([u32; 4], SMatrix<f64, 12, 12>)> {
        let Some(ipc) = &self.model.contact else {
            return Vec::new();
        };
        let xs = self.contact_positions(ipc, x);
        let mut blocks = match ipc.active_pairs(&xs) {
            Ok(pairs) => ipc.hessian_blocks(&pairs, &xs, self.kappa()),
            Err(_) => Vec::new(),
        };
        if let Some(f) = self.friction.get() {
            blocks.extend(f.0.hessian_blocks(x, &self.x_hat));
        }
        blocks
    }

    /// Lags IPC friction ([`crate::contact::friction`]) at `x` (m) with the current κ: the
    /// normal forces and tangent frames of the pairs active there stay fixed until the next
    /// call. The tangential displacement is measured from x̂ (xᵗ for implicit Euler) and the
    /// mollifier's width is ε_v·ĥ, so a sticking pair ends the step with zero relative
    /// velocity under either integrator. Returns the number of lagged pairs: 0 without
    /// friction, in a static solve (no velocity) or with no active pair. After a call the
    /// energy changes ([`Self::energy_change`]) include the new potential at both ends.
    /// Scripted triangle-mesh obstacles are lagged where they were at t when `x` is xᵗ (else
    /// at [`Self::obstacles_end`]), and an obstacle vertex's displacement is ĥ × its velocity
    /// over the step, the counterpart of a model vertex's x − x̂.
    pub fn lag_friction(&self, x: &[f64]) -> usize {
        let lagged = self.model.contact.as_ref().and_then(|ipc| {
            let params = ipc.friction.as_ref()?;
            if self.inertia == 0.0 {
                return None;
            }
            let eps = params.eps_v * self.h_hat;
            // At xᵗ the obstacles are where they were at t (IPC lags at the previous step's
            // configuration); anywhere else where the step has them.
            let xs = match (&self.obstacles_start, &self.obstacles_end) {
                (Some(o), Some(_)) if x == self.x_prev.as_slice() => ipc.positions_with(x, o),
                _ => self.contact_positions(ipc, x),
            };
            let mut set =
                FrictionSet::lag_at(ipc, &xs, self.kappa(), |a, b| params.mu(a, b), eps).ok()?;
            if let (Some(a), Some(b)) = (&self.obstacles_start, &self.obstacles_end) {
                // The obstacle's counterpart of x − x̂: its velocity over the step times ĥ.
                let w = self.h_hat / self.h;
                set.obstacle_motion = a
                    .iter()
                    .zip(b)
                    .map(|(p, q)| [0, 1, 2].map(|k| w * (q[k] - p[k])))
                    .collect();
            }
            if set.pairs.is_empty() {
                return None;
            }
            let start = set.energy(&self.x_start, &self.x_hat);
            Some((set, start))
        });
        let n = lagged.as_ref().map_or(0, |(s, _)| s.pairs.len());
        self.friction.set(lagged);
        n
    }

    /// D(x_start), J: the lagged friction potential at the step's initial guess (0 before
    /// [`Self::lag_friction`]).
    /// The friction lagged for the current solve ([`Self::lag_friction`]) and its energy at
    /// [`Self::x_start`] (J); `None` before the first lagging or without friction. Friction's
    /// step displacement is measured from [`Self::x_hat`].
    pub fn lagged_friction(&self) -> Option<std::sync::Arc<(FrictionSet, f64)>> {
        self.friction.get()
    }

    fn friction_start(&self) -> f64 {
        self.friction.get().map_or(0.0, |f| f.1)
    }

    /// The lagged friction potential D(x) and D(x_start), J (0 before [`Self::lag_friction`]).
    fn friction_energy(&self, x: &[f64]) -> (f64, f64) {
        match self.friction.get() {
            Some(f) => (f.0.energy(x, &self.x_hat), f.1),
            None => (0.0, 0.0),
        }
    }

    /// The vertex pairs `(a, b)`, a < b, free model vertices, that `blocks` couple: the
    /// off-diagonal 3×3 blocks a matrix needs to hold them (sorted, unique).
    pub fn contact_couplings(&self, blocks: &[([u32; 4], SMatrix<f64, 12, 12>)]) -> Vec<[u32; 2]> {
        let n = self.model.num_vertices();
        let free = |v: u32| (v as usize) < n && !self.fixed[3 * v as usize];
        let mut out: Vec<[u32; 2]> = blocks
            .iter()
            .flat_map(|(ids, _)| {
                let mut v = Vec::with_capacity(6);
                for a in 0..4 {
                    for b in a + 1..4 {
                        let (p, q) = (ids[a].min(ids[b]), ids[a].max(ids[b]));
                        if p != q && free(p) && free(q) {
                            v.push([p, q]);
                        }
                    }
                }
                v
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Adds `blocks` ([`Self::contact_hessian_blocks`]) into `out`, skipping pinned and obstacle
    /// DOFs; errors when `out`'s pattern lacks an entry (it must hold
    /// [`Self::contact_couplings`]).
    pub fn add_contact_hessian(
        &self,
        blocks: &[([u32; 4], SMatrix<f64, 12, 12>)],
        out: &mut SymSparse,
    ) -> crate::error::Result<()> {
        let n = self.model.num_vertices();
        let pattern = out.pattern().clone();
        let values = out.values_mut();
        for (ids, h) in blocks {
            for (a, &va) in ids.iter().enumerate() {
                for (b, &vb) in ids.iter().enumerate() {
                    if va as usize >= n || vb as usize >= n {
                        continue;
                    }
                    for i in 0..3 {
                        for j in 0..3 {
                            let (r, c) = (3 * va as usize + i, 3 * vb as usize + j);
                            if r > c || self.fixed[r] || self.fixed[c] {
                                continue;
                            }
                            let k = pattern.find(r, c).ok_or_else(|| {
                                crate::error::JelloError::Solver(format!(
                                    "contact Hessian: entry ({r}, {c}) is not in the pattern"
                                ))
                            })?;
                            values[k] += h[(3 * a + i, 3 * b + j)];
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// 1/h², 1/s², with the real step h (a static increment's pseudo-time step), not 1/ĥ²:
    /// what the obstacle barrier's weight scales with ([`Self::barrier_weight`] is κ·m_v times
    /// it). Every solver and backend takes it from here (a device converts it to f32 where it
    /// uploads it).
    pub fn inv_h2(&self) -> f64 {
        1.0 / (self.h * self.h)
    }

    /// The obstacle barrier's weight at vertex `v`, κ·m_v/h² (κ's units times kg/s²), with the
    /// real step h, not 1/ĥ²: the barrier is a force potential of the ODE, which BDF2
    /// discretises without changing it (see [`super::integrator`]).
    pub fn barrier_weight(&self, v: usize) -> f64 {
        self.model.barrier.kappa * self.model.mass[v] / (self.h * self.h)
    }

    /// The mass weight of a step's quadratic terms, 1/s²: the inertia weight [`Self::inertia`]
    /// in a dynamic step, 1/h² of the pseudo-time step in a static increment (which has no
    /// inertia: this keeps a matrix built on it definite where no pin holds a body, and gives
    /// κ's bounds a mass scale).
    pub fn mass_weight(&self) -> f64 {
        if self.inertia > 0.0 {
            self.inertia
        } else {
            self.inv_h2()
        }
    }

    /// The spheres and boxes of the model with their bounds grown by `margin` (m).
    fn bounded_obstacles(&self, margin: f64) -> Vec<(&Obstacle, Bounds)> {
        self.model
            .obstacles
            .iter()
            .filter_map(|o| {
                o.bounds()
                    .map(|(lo, hi)| (o, (lo.add_scalar(-margin), hi.add_scalar(margin))))
            })
            .collect()
    }

    /// The surface pairs with spheres and boxes within reach at `x`, evaluated
    /// ([`super::surface_contact`]).
    pub fn surface_pairs(&self, x: &[f64]) -> Vec<(SurfacePair, PairEval)> {
        if !self.model.obstacles.iter().any(|o| o.is_bounded()) {
            return Vec::new();
        }
        candidate_pairs(self.model, x)
            .into_par_iter()
            .filter_map(|p| p.eval(self.model, x, self.h).map(|e| (p, e)))
            .collect()
    }

    /// Barrier energy B(x), J: the obstacles' plus IPC contact's at the current κ (+∞ if any
    /// vertex is on or inside an obstacle, a surface primitive touches a sphere or box, or two
    /// surface primitives touch).
    pub fn barrier_energy(&self, x: &[f64]) -> f64 {
        let (b, c) = self.barrier_parts(x);
        b + self.kappa() * c
    }

    /// The obstacle barrier (J) and the IPC contact sum Σ m·b at κ = 1 (m⁴; 0 without
    /// contact) at `x`.
    fn barrier_parts(&self, x: &[f64]) -> (f64, f64) {
        let c = match &self.model.contact {
            Some(ipc) => {
                let xs = self.contact_positions(ipc, x);
                match ipc.active_pairs(&xs) {
                    Ok(pairs) => ipc.energy_unit(&pairs, &xs),
                    // Only a non-finite position fails the broad phase.
                    Err(_) => f64::INFINITY,
                }
            }
            None => 0.0,
        };
        (self.obstacle_barrier_energy(x), c)
    }

    /// E(b) − E(a) of the barriers between two references, at the current κ.
    fn barrier_change(&self, a: &EnergyReference, b: &EnergyReference) -> f64 {
        (b.barrier - a.barrier) + self.kappa() * (b.contact - a.contact)
    }

    /// An energy reference from Ψ's at `x`.
    fn reference_at(&self, elastic: ElasticReference, x: &[f64]) -> EnergyReference {
        let (barrier, contact) = self.barrier_parts(x);
        EnergyReference {
            elastic,
            barrier,
            contact,
        }
    }

    /// Obstacle barrier energy, J (+∞ if any vertex is on or inside an obstacle, or a surface
    /// primitive touches a sphere or box). IPC contact between meshes is not included.
    pub fn obstacle_barrier_energy(&self, x: &[f64]) -> f64 {
        if self.model.obstacles.is_empty() {
            return 0.0;
        }
        let dhat = self.model.barrier.dhat;
        let mut e = 0.0;
        for v in 0..self.model.num_vertices() {
            let p = Vector3::from_column_slice(&x[3 * v..3 * v + 3]);
            for o in self.model.obstacles.iter().filter(|o| o.acts_on_vertices()) {
                let d = o.distance(&p).d;
                if d < dhat {
                    e += self.barrier_weight(v) * barrier(d, dhat).0;
                }
            }
        }
        e + self
            .surface_pairs(x)
            .iter()
            .map(|(_, e)| e.energy)
            .sum::<f64>()
    }

    /// The surface pairs' barrier gradient (N) at vertex `v` and the Gauss–Newton diagonal
    /// 3×3 block w·m·b''·(∂d/∂x_v)(∂d/∂x_v)ᵀ (N/m) — what the vertex solvers need. Their local
    /// systems only precondition a filtered, safeguarded step, so the curvature term Newton
    /// needs (see [`Self::assemble`]) is left out here: it costs six more distance evaluations
    /// per pair and vertex and a 3×3 eigen-projection, for no change in their iterations
    /// (a ball of 1,700 tets resting on a 4 mm sphere and on a 3 mm plate, 40 steps: JGS2 and
    /// VBD take the same counts, within ±5% per step, with either block; the per-vertex
    /// methods are slow there either way, up to their 1000-iteration cap).
    pub fn face_barrier_at_vertex(
        &self,
        x: &[f64],
        v: usize,
    ) -> (Vector3<f64>, nalgebra::Matrix3<f64>) {
        let model = self.model;
        let mut g = Vector3::zeros();
        let mut h = nalgebra::Matrix3::zeros();
        if !model.obstacles.iter().any(|o| o.is_bounded()) {
            return (g, h);
        }
        for pair in pairs_at_vertex(model, x, v) {
            let Some(e) = pair.eval(model, x, self.h) else {
                continue;
            };
            if !e.energy.is_finite() {
                continue;
            }
            let k = pair.vertices[..pair.count]
                .iter()
                .position(|&u| u as usize == v)
                .unwrap_or(0);
            g += e.grad.fixed_rows::<3>(3 * k);
            let j = e.dd.fixed_rows::<3>(3 * k);
            h += j * j.transpose() * e.gn;
        }
        (g, h)
    }

    /// E(x), J (+∞ outside the feasible set).
    pub fn energy(&self, elastic: &dyn ElasticTerms, x: &[f64]) -> f64 {
        let b = self.barrier_energy(x);
        if !b.is_finite() {
            return f64::INFINITY;
        }
        self.inertia_energy(x) + elastic.elastic_energy(x) + b + self.friction_energy(x).0
    }

    /// E(x) and ∇E into `g` (zero on pinned DOFs).
    pub fn gradient(&self, elastic: &dyn ElasticTerms, x: &[f64], g: &mut [f64]) -> f64 {
        g.iter_mut().for_each(|v| *v = 0.0);
        let e = elastic.elastic_gradient(x, g) + self.inertia_energy(x);
        let (b, c, d) = self.add_vertex_terms(x, g);
        e + b + self.kappa() * c + d
    }

    /// E(x) and ∇E into `g` as [`Self::gradient`], and E(x) − E(x_start) as
    /// [`Self::energy_change`] — the elastic part of both from one pass over the elements where
    /// the backend fuses them ([`ElasticTerms::elastic_gradient_and_change`]): a line search that
    /// evaluates the gradient at every trial (quasi-Newton's) gets the energy change with it.
    pub fn gradient_and_change(
        &self,
        elastic: &dyn ElasticTerms,
        x: &[f64],
        g: &mut [f64],
    ) -> (f64, f64) {
        g.iter_mut().for_each(|v| *v = 0.0);
        let r = self.reference(elastic);
        let (psi, dpsi) = elastic.elastic_gradient_and_change(x, g, &r.elastic);
        let (b, c, d) = self.add_vertex_terms(x, g);
        let k = self.kappa();
        let e = psi + self.inertia_energy(x) + b + k * c + d;
        if !(b.is_finite() && c.is_finite()) {
            return (e, f64::INFINITY);
        }
        let change = self.inertia_difference(&self.x_start, x)
            + dpsi
            + (b - r.barrier)
            + k * (c - r.contact)
            + (d - self.friction_start());
        (e, change)
    }

    /// Adds the inertia (or load), vertex-barrier, surface-pair, IPC contact and lagged friction
    /// gradients to `g` and zeroes pinned DOFs; returns the obstacle barrier energy (J), the
    /// contact sum at κ = 1 (m⁴) and the friction potential (J).
    fn add_vertex_terms(&self, x: &[f64], g: &mut [f64]) -> (f64, f64, f64) {
        let mut e = 0.0;
        let w = self.inertia;
        for (v, m) in self.model.mass.iter().enumerate() {
            for k in 0..3 {
                g[3 * v + k] += m * w * (x[3 * v + k] - self.x_tilde[3 * v + k]);
            }
        }
        for (gk, f) in g.iter_mut().zip(&self.load) {
            *gk -= f;
        }
        let dhat = self.model.barrier.dhat;
        for v in 0..self.model.num_vertices() {
            let p = Vector3::from_column_slice(&x[3 * v..3 * v + 3]);
            for o in self.model.obstacles.iter().filter(|o| o.acts_on_vertices()) {
                let de = o.distance(&p);
                if de.d < dhat {
                    let (b, db, _) = barrier(de.d, dhat);
                    let w = self.barrier_weight(v);
                    e += w * b;
                    for k in 0..3 {
                        g[3 * v + k] += w * db * de.grad[k];
                    }
                }
            }
        }
        for (pair, ev) in self.surface_pairs(x) {
            e += ev.energy;
            for k in 0..pair.count {
                let v = pair.vertices[k] as usize;
                for c in 0..3 {
                    g[3 * v + c] += ev.grad[3 * k + c];
                }
            }
        }
        let mut contact = 0.0;
        if let Some(ipc) = &self.model.contact {
            let xs = self.contact_positions(ipc, x);
            // A touching pair makes the sum +∞ or NaN (and `g` meaningless): infeasible.
            contact = match ipc.active_pairs(&xs) {
                Ok(pairs) => ipc.add_gradient(&pairs, &xs, self.kappa(), g),
                Err(_) => f64::INFINITY,
            };
            if !contact.is_finite() {
                contact = f64::INFINITY;
            }
        }
        let friction = match self.friction.get() {
            Some(f) => f.0.add_gradient(x, &self.x_hat, g),
            None => 0.0,
        };
        for (gk, &f) in g.iter_mut().zip(&self.fixed) {
            if f {
                *gk = 0.0;
            }
        }
        (e, contact, friction)
    }

    /// Fills `out` with the PSD-projected Hessian of E at `x` (element ∂P/∂F eigenvalues clamped
    /// at 0); pinned rows/columns become identity. `scratch` holds the element Hessians.
    pub fn hessian(
        &self,
        elastic: &dyn ElasticTerms,
        x: &[f64],
        layout: &HessianLayout,
        out: &mut SymSparse,
        scratch: &mut Vec<PackedTetHessian>,
    ) {
        self.hessian_filtered(elastic, x, layout, out, scratch, EigenFilter::Clamp);
    }

    /// [`Self::hessian`] with the element ∂P/∂F eigenvalues passed through `filter`. Only the
    /// elastic terms are filtered: the barrier's curvature is kept PSD its own way (see
    /// [`Self::assemble`]) whatever the filter.
    pub fn hessian_filtered(
        &self,
        elastic: &dyn ElasticTerms,
        x: &[f64],
        layout: &HessianLayout,
        out: &mut SymSparse,
        scratch: &mut Vec<PackedTetHessian>,
        filter: EigenFilter,
    ) {
        elastic.elastic_element_hessian_blocks(x, filter, &self.model.mesh.tets, scratch);
        self.assemble(layout, scratch, x, out);
    }

    /// dᵀ H₀ d (J) for a displacement `d` (m) at `x`: the curvature of the quadratic model a
    /// trust-region ratio compares the energy against. H₀ is the inertia term, the true
    /// (unprojected) elastic Hessian ([`Model::elastic_curvature`]) and the barrier terms as
    /// [`Self::assemble`] holds them (PSD by construction, no eigenvalue filter involved).
    /// Pinned DOFs of `d` are ignored.
    pub fn model_curvature(&self, x: &[f64], d: &[f64]) -> f64 {
        self.curvature_with(x, d, |d| self.model.elastic_curvature(x, d))
    }

    /// dᵀ H d (J) for a displacement `d` (m), H the matrix [`Self::assemble`] builds from the
    /// element Hessians `elem` (N/m) at `x` — without building it: Σ_e d_eᵀ H_e d_e plus the
    /// inertia and barrier terms at `x`. Pinned DOFs of `d` are ignored. The element sum runs
    /// in fixed chunks, so the result does not depend on the thread count (bit-for-bit
    /// resumes).
    pub fn assembled_curvature(&self, elem: &[[f64; 144]], x: &[f64], d: &[f64]) -> f64 {
        const CHUNK: usize = 2048;
        let tets = &self.model.mesh.tets;
        self.curvature_with(x, d, |d| {
            let parts: Vec<f64> = tets
                .par_chunks(CHUNK)
                .zip(elem.par_chunks(CHUNK))
                .map(|(ts, hs)| {
                    let mut acc = 0.0;
                    for (t, h) in ts.iter().zip(hs) {
                        let c = |k: usize| d[3 * t[k / 3] as usize + k % 3];
                        for r in 0..12 {
                            let row: f64 = (0..12).map(|k| h[12 * r + k] * c(k)).sum();
                            acc += c(r) * row;
                        }
                    }
                    acc
                })
                .collect();
            parts.iter().sum()
        })
    }

    /// The per-vertex 3×3 block of the Hessian besides the elements' (N/m): inertia m_v/ĥ²·I
    /// and the vertex barrier's PSD block at `x` as [`Self::assemble`] adds them; zero for a
    /// pinned vertex. (Surface pairs couple vertices: they are not in it.)
    pub fn vertex_block(&self, x: &[f64], v: usize) -> nalgebra::Matrix3<f64> {
        if self.fixed[3 * v] {
            return nalgebra::Matrix3::zeros();
        }
        let mut k = nalgebra::Matrix3::identity() * (self.model.mass[v] * self.inertia);
        if let Some(hb) = self.vertex_barrier_hessian(x, v) {
            k += hb;
        }
        k
    }

    /// dᵀ H d with the elastic part from `elastic(d)` (d with pinned DOFs zeroed) and the
    /// vertex and surface-pair terms at `x` as [`Self::assemble`] holds them.
    fn curvature_with(&self, x: &[f64], d: &[f64], elastic: impl FnOnce(&[f64]) -> f64) -> f64 {
        let mut free = Vec::new();
        let d = if self.fixed.iter().any(|&f| f) {
            free.extend(
                d.iter()
                    .zip(&self.fixed)
                    .map(|(&v, &f)| if f { 0.0 } else { v }),
            );
            &free[..]
        } else {
            d
        };
        let mut q = elastic(d);
        for v in 0..self.model.num_vertices() {
            let dv = Vector3::from_column_slice(&d[3 * v..3 * v + 3]);
            q += (dv.transpose() * self.vertex_block(x, v) * dv)[(0, 0)];
        }
        for (pair, h9) in self.pair_hessians(x) {
            let mut dp = nalgebra::SVector::<f64, 9>::zeros();
            for (a, &va) in pair.vertices[..pair.count].iter().enumerate() {
                for i in 0..3 {
                    dp[3 * a + i] = d[3 * va as usize + i];
                }
            }
            q += (dp.transpose() * h9 * dp)[(0, 0)];
        }
        let n = self.model.num_vertices();
        for (ids, h) in self.contact_hessian_blocks(x) {
            let mut dp = nalgebra::SVector::<f64, 12>::zeros();
            for (a, &va) in ids.iter().enumerate() {
                if (va as usize) < n {
                    for i in 0..3 {
                        dp[3 * a + i] = d[3 * va as usize + i];
                    }
                }
            }
            q += (dp.transpose() * h * dp)[(0, 0)];
        }
        q
    }

    /// The PSD barrier block of vertex `v` against the obstacles that act on vertices, when it
    /// is within d̂ of one: b''∇d∇dᵀ, plus b'∇²d where b' > 0 (b' < 0 with ∇²d ⪰ 0 would make it
    /// indefinite, so that part is dropped: projected Newton needs PSD).
    fn vertex_barrier_hessian(&self, x: &[f64], v: usize) -> Option<nalgebra::Matrix3<f64>> {
        let dhat = self.model.barrier.dhat;
        let p = Vector3::from_column_slice(&x[3 * v..3 * v + 3]);
        let mut out = None;
        for o in self.model.obstacles.iter().filter(|o| o.acts_on_vertices()) {
            let de = o.distance(&p);
            if de.d < dhat {
                let (_, db, ddb) = barrier(de.d, dhat);
                let w = self.barrier_weight(v);
                let mut hb = de.grad * de.grad.transpose() * (w * ddb);
                if db > 0.0 {
                    hb += de.hess * (w * db);
                }
                *out.get_or_insert_with(nalgebra::Matrix3::zeros) += hb;
            }
        }
        out
    }

    /// Surface pairs with spheres and boxes: each pair's Hessian w·∇²(m·b(d)) (central
    /// differences of the analytic gradient), PSD-projected ([`super::surface_contact`]).
    /// Unlike a vertex against a convex obstacle, a triangle turning over a sphere or a box
    /// edge sees a concave distance: there the curvature term is what keeps it from rolling
    /// into the obstacle.
    fn pair_hessians(&self, x: &[f64]) -> Vec<(SurfacePair, SMatrix<f64, 9, 9>)> {
        self.surface_pair_hessians(x, true)
    }

    /// The surface pairs' barrier Hessians at `x` (N/m, 9×9 over each pair's vertices, unused
    /// rows zero), PSD-projected when `project` (Newton's) or exact (the adjoint's,
    /// [`crate::adjoint`]); pairs out of reach or touching are left out.
    pub fn surface_pair_hessians(
        &self,
        x: &[f64],
        project: bool,
    ) -> Vec<(SurfacePair, SMatrix<f64, 9, 9>)> {
        let pairs = self.surface_pairs(x);
        pairs
            .par_iter()
            .filter(|(_, e)| e.energy.is_finite())
            .map(|(p, _)| {
                let h = p.hessian(self.model, x, self.h);
                (*p, if project { project_psd(&h) } else { h })
            })
            .collect()
    }

    /// Assembles given element Hessians (one per tet, packed: [`PackedTetHessian`],
    /// [`pack_element_hessians`]) plus inertia and barrier terms into `out`.
    pub fn assemble(
        &self,
        layout: &HessianLayout,
        elem: &[PackedTetHessian],
        x: &[f64],
        out: &mut SymSparse,
    ) {
        out.gather_blocks(&layout.block_gather, elem.as_flattened());
        self.add_vertex_hessian(layout, x, out);
    }

    /// Adds what [`Self::assemble`] adds besides the element Hessians to `out` (an elastic
    /// Hessian, or zeros for these terms alone): inertia, vertex barriers and surface pairs, and
    /// identity rows for pinned DOFs.
    pub fn add_vertex_hessian(&self, layout: &HessianLayout, x: &[f64], out: &mut SymSparse) {
        let w = self.inertia;
        let pattern = layout.pattern.clone();
        let blocks = self.pair_hessians(x);
        let values = out.values_mut();
        for v in 0..self.model.num_vertices() {
            if self.fixed[3 * v] {
                continue;
            }
            for k in 0..3 {
                values[layout.diag[3 * v + k]] += self.model.mass[v] * w;
            }
            if let Some(hb) = self.vertex_barrier_hessian(x, v) {
                for i in 0..3 {
                    for j in i..3 {
                        if let Some(k) = pattern.find(3 * v + i, 3 * v + j) {
                            values[k] += hb[(i, j)];
                        }
                    }
                }
            }
        }
        // Surface pairs ([`Self::pair_hessians`]): their vertices share a tet, so the pattern
        // holds every block.
        for (pair, h9) in blocks {
            let vs = &pair.vertices[..pair.count];
            for (a, &va) in vs.iter().enumerate() {
                for (b, &vb) in vs.iter().enumerate() {
                    for i in 0..3 {
                        for j in 0..3 {
                            let (r, col) = (3 * va as usize + i, 3 * vb as usize + j);
                            if r > col || self.fixed[r] || self.fixed[col] {
                                continue;
                            }
                            if let Some(k) = pattern.find(r, col) {
                                values[k] += h9[(3 * a + i, 3 * b + j)];
                            }
                        }
                    }
                }
            }
        }
        for (k, &f) in self.fixed.iter().enumerate() {
            if f {
                values[layout.diag[k]] = 1.0;
            }
        }
    }

    /// Largest α ≤ 1 such that no part of a body crosses an obstacle along `x + α·dx`, without
    /// the inversion filter of [`Self::max_step`]: every vertex (0.9 × its first time of
    /// impact, as in IPC), and for spheres and boxes — which can slip between vertices — every
    /// surface triangle (a conservative additive-CCD time of impact,
    /// [`Obstacle::triangle_time_of_impact`]).
    /// With IPC contact ([`Model::contact`]) also every surface pair that could meet along the
    /// step (additive CCD, [`crate::contact::IpcContact::max_step`]).
    pub fn max_obstacle_step(&self, x: &[f64], dx: &[f64]) -> f64 {
        let mut alpha = 1.0f64;
        for v in 0..self.model.num_vertices() {
            let p = Vector3::from_column_slice(&x[3 * v..3 * v + 3]);
            let d = Vector3::from_column_slice(&dx[3 * v..3 * v + 3]);
            if d == Vector3::zeros() {
                continue;
            }
            for o in &self.model.obstacles {
                let toi = o.time_of_impact(&p, &d);
                if toi < 1.0 {
                    alpha = alpha.min(0.9 * toi);
                }
            }
        }
        let alpha = alpha.min(self.surface_step(x, dx, alpha));
        match &self.model.contact {
            // Only a non-finite position or step fails the broad phase: no step then.
            Some(ipc) => ipc
                .max_step_at(&self.contact_positions(ipc, x), dx, alpha)
                .unwrap_or(0.0),
            None => alpha,
        }
    }

    /// The largest α ≤ `limit` keeping every surface triangle out of every bounded obstacle
    /// along `x + α·dx` (triangles whose swept bounds miss an obstacle's are skipped).
    fn surface_step(&self, x: &[f64], dx: &[f64], limit: f64) -> f64 {
        let model = self.model;
        let bounded = self.bounded_obstacles(0.0);
        if bounded.is_empty() || limit <= 0.0 {
            return limit;
        }
        let at =
            |a: &[f64], v: u32| Vector3::from_column_slice(&a[3 * v as usize..3 * v as usize + 3]);
        model
            .surface
            .triangles
            .par_iter()
            .map(|tri| {
                let p = tri.map(|v| at(x, v));
                let d = tri.map(|v| at(dx, v) * limit);
                if d.iter().all(|v| *v == Vector3::zeros()) {
                    return limit;
                }
                let mut lo = p[0];
                let mut hi = p[0];
                for k in 0..3 {
                    for q in [p[k], p[k] + d[k]] {
                        lo = lo.inf(&q);
                        hi = hi.sup(&q);
                    }
                }
                let mut t = 1.0f64;
                for (o, (olo, ohi)) in &bounded {
                    let apart = (0..3).any(|k| hi[k] < olo[k] || lo[k] > ohi[k]);
                    if !apart {
                        t = t.min(o.triangle_time_of_impact(&p, &d, 200));
                    }
                }
                limit * t
            })
            .reduce(|| limit, f64::min)
    }

    /// The largest fraction of vertex `v`'s own move `d` (the other vertices held) before one of
    /// its surface triangles reaches a bounded obstacle — the per-vertex filter of the vertex
    /// solvers (their point filter covers the vertex itself).
    pub fn vertex_surface_step(&self, x: &[f64], v: usize, d: &Vector3<f64>) -> f64 {
        let model = self.model;
        if *d == Vector3::zeros() || !model.obstacles.iter().any(|o| o.is_bounded()) {
            return 1.0;
        }
        let at = |u: u32| Vector3::from_column_slice(&x[3 * u as usize..3 * u as usize + 3]);
        let mut t = 1.0f64;
        for &f in model.faces_of(v) {
            let tri = model.surface.triangles[f as usize];
            let p = tri.map(at);
            let dd = tri.map(|u| {
                if u as usize == v {
                    *d
                } else {
                    Vector3::zeros()
                }
            });
            for o in model.obstacles.iter().filter(|o| o.is_bounded()) {
                t = t.min(o.triangle_time_of_impact(&p, &dd, 200));
            }
        }
        t
    }

    /// The line-search filter of the solvers: the start α of a backtracking search along `dx`.
    ///
    /// Always keeps vertices outside obstacles ([`Self::max_obstacle_step`]). Also keeps
    /// positively oriented elements positive ([`Self::max_step`]) — a trust region: full
    /// projected-Newton steps through inversion overshoot (armadillo_18k kicked with 3 kN took
    /// 9.2 Newton iterations per step without it, 5.8 with it) — unless that would cut the step
    /// below 1% of the obstacle limit: a flattened element whose Newton direction points through
    /// zero volume would then stall the iteration for good (the same armadillo kicked with
    /// 30 kN sat at residual 0.1 for 100 iterations; 15 per step with this rule). Inversion is
    /// then left to the energy: stable Neo-Hookean, ARAP, corotated and linear are finite
    /// through it; Neo-Hookean's +∞ for J ≤ 0 fails the Armijo test.
    ///
    /// With [`Self::strict_inversion`] the inversion filter is never dropped.
    pub fn step_limit(&self, x: &[f64], dx: &[f64]) -> f64 {
        let obstacle = self.max_obstacle_step(x, dx);
        let uninverted = self.uninverted_from(x, dx, obstacle);
        if self.strict_inversion || uninverted >= 1e-2 * obstacle {
            uninverted
        } else {
            obstacle
        }
    }

    /// The largest step fraction α ∈ [0, 1] along `dx` from `x` that keeps every vertex outside
    /// every obstacle (with a 0.9 safety factor on the time of impact, as in IPC) and every
    /// element that is positively oriented at `x` positively oriented.
    pub fn max_step(&self, x: &[f64], dx: &[f64]) -> f64 {
        self.uninverted_from(x, dx, self.max_obstacle_step(x, dx))
    }

    /// Halves `alpha` until every element positively oriented at `x` stays so at x + α·dx.
    fn uninverted_from(&self, x: &[f64], dx: &[f64], mut alpha: f64) -> f64 {
        // Inversion filter: halve until every initially positive tet stays positive — under
        // the strict filter, until no element shrinks below its allowed floor
        // ([`strict_volume_floor`]: a positive margin above round-off).
        let vol = |y: &[f64], tet: &[u32; 4]| {
            let p = corners(y, tet);
            (p[1] - p[0]).dot(&(p[2] - p[0]).cross(&(p[3] - p[0])))
        };
        let strict = self.strict_inversion;
        let rest = &self.model.rest;
        let mut y = vec![0.0; x.len()];
        for _ in 0..60 {
            for k in 0..x.len() {
                y[k] = x[k] + alpha * dx[k];
            }
            let ok = self.model.mesh.tets.par_iter().enumerate().all(|(t, tet)| {
                let v0 = vol(x, tet);
                if strict {
                    let six_rest = 6.0 * rest[t].volume;
                    v0 <= 0.0 || vol(&y, tet) >= strict_volume_floor(v0 / six_rest) * six_rest
                } else {
                    v0 <= 0.0 || vol(&y, tet) > 0.0
                }
            });
            if ok {
                return alpha;
            }
            alpha *= 0.5;
        }
        0.0
    }
}
