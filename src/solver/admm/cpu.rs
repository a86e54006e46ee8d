//! [`AdmmBackend`] in f64 on the CPU: fields are `Vec<Matrix3<f64>>`, the proxes are
//! [`super::prox`]'s (and a caller's [`CustomProx`]), the scatter adds element by element in
//! element order. The state (fields, constants, custom prox) lives in the backend's extension
//! slot.

use super::backend::{AdmmBackend, GlobalStep, LocalScalars};
use super::prox::{prox_hyperelastic_lanes, prox_hyperelastic_within, prox_pd_within, ProxInput};
use super::{CustomProx, ProxKind};
use crate::error::{JelloError, Result};
use crate::material::{pk1, Material};
use crate::problem::{ElasticTerms, Model, StepProblem, StrainLimit};
use crate::solver::backend::{Backend, CpuBackend, CpuScalar, CpuVector, Point};
use nalgebra::{Matrix3, Vector3};
use rayon::prelude::*;

/// Elements per call of [`prox_hyperelastic_lanes`] in the CPU z-step (as the gradient pass's
/// lane batch: four f64 lanes fill one AVX2 register).
const Z_LANES: usize = 4;

/// Handle to a [`CpuBackend`] per-element field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuField(usize);

/// Per-element constants.
struct Element {
    grads: [Vector3<f64>; 4],
    volume: f64,
    /// w_e² (J).
    w2: f64,
    material: Material,
    /// Hard strain limits, held exactly by the z-step.
    limit: Option<StrainLimit>,
}

/// ADMM's state on the CPU backend (its extension slot).
#[derive(Default)]
struct CpuAdmm {
    /// Per-element 3×3 fields ([`CpuField`]), F form.
    fields: Vec<Vec<Matrix3<f64>>>,
    custom: Option<CustomProx>,
    /// Constants and output slots, once `admm_setup` ran.
    setup: Option<Setup>,
}

/// ADMM's constants and output slots on the CPU backend.
struct Setup {
    elements: Vec<Element>,
    tets: Vec<[u32; 4]>,
    prox: ProxKind,
    /// Slots: dual, primal, residual, energy change.
    out: [CpuScalar; 4],
    /// Per strain-limited element, the limit's force after the last z-step (F form, J):
    /// ν_e = w²ū_e − V_e P(z_e), the normal-cone part of the prox's optimality
    /// w²ū ∈ ∇U(z) + N_S(z). Empty without limits.
    limit_forces: Vec<(usize, Matrix3<f64>)>,
}

impl Setup {
    /// F of every element at positions `x` (3n, m).
    fn deformation(&self, x: &[f64]) -> Vec<Matrix3<f64>> {
        (0..self.tets.len())
            .into_par_iter()
            .map(|e| {
                let el = &self.elements[e];
                let mut out = Matrix3::zeros();
                for (a, &v) in self.tets[e].iter().enumerate() {
                    let v = v as usize;
                    let p = Vector3::new(x[3 * v], x[3 * v + 1], x[3 * v + 2]);
                    out += p * el.grads[a].transpose();
                }
                out
            })
            .collect()
    }

    /// The z- and u-steps of every element: v_e = F_e + ū_e, z_e = prox_e(v_e), ū_e ← v_e − z_e
    /// (F form), with `custom` in place of the model's prox if given. The hyperelastic prox
    /// runs [`Z_LANES`] elements at a time ([`prox_hyperelastic_lanes`], bit-identical to one at
    /// a time).
    fn z_step(
        &self,
        fx: &[Matrix3<f64>],
        u: &[Matrix3<f64>],
        custom: Option<&CustomProx>,
    ) -> (Vec<Matrix3<f64>>, Vec<Matrix3<f64>>) {
        let v: Vec<Matrix3<f64>> = fx.iter().zip(u).map(|(f, u)| f + u).collect();
        let mut z = vec![Matrix3::zeros(); v.len()];
        z.par_chunks_mut(Z_LANES)
            .zip(v.par_chunks(Z_LANES))
            .enumerate()
            .for_each(|(c, (z, v))| self.prox_chunk(c * Z_LANES, v, z, custom));
        let u = v.iter().zip(&z).map(|(v, z)| v - z).collect();
        (z, u)
    }

    /// z ← prox_e(v_e) for the elements `first..first + v.len()` (see [`Setup::z_step`]).
    fn prox_chunk(
        &self,
        first: usize,
        v: &[Matrix3<f64>],
        z: &mut [Matrix3<f64>],
        custom: Option<&CustomProx>,
    ) {
        let els = &self.elements[first..first + v.len()];
        if let (None, ProxKind::Hyperelastic, Ok(v4)) =
            (custom, self.prox, <&[Matrix3<f64>; Z_LANES]>::try_from(v))
        {
            let input: [ProxInput<'_>; Z_LANES] = std::array::from_fn(|l| ProxInput {
                material: &els[l].material,
                volume: els[l].volume,
                v: v4[l],
                w2: els[l].w2,
                limit: els[l].limit,
            });
            z.copy_from_slice(&prox_hyperelastic_lanes(&input));
            return;
        }
        for (k, ((z, v), el)) in z.iter_mut().zip(v).zip(els).enumerate() {
            *z = match (custom, self.prox) {
                (Some(c), _) => c(first + k, v, el.w2),
                (None, ProxKind::Pd) => prox_pd_within(&el.material, el.volume, v, el.w2, el.limit)
                    .expect("PD form checked in AdmmSolver::new"),
                (None, ProxKind::Hyperelastic) => {
                    prox_hyperelastic_within(&el.material, el.volume, v, el.w2, el.limit)
                }
            };
        }
    }

    /// out ← Σ_e w_e² D_eᵀ G_e (per vertex a: w_e² G_e ∇N_a), element by element.
    fn scatter(&self, g: impl Fn(usize) -> Matrix3<f64>, out: &mut [f64]) {
        out.iter_mut().for_each(|v| *v = 0.0);
        for (e, tet) in self.tets.iter().enumerate() {
            let el = &self.elements[e];
            let ge = g(e) * el.w2;
            for (a, &v) in tet.iter().enumerate() {
                let f = ge * el.grads[a];
                for c in 0..3 {
                    out[3 * v as usize + c] += f[c];
                }
            }
        }
    }
}

impl Setup {
    /// g ← g + Σ_e D_eᵀν_e over the strain-limited elements, pinned DOFs left at zero: the
    /// KKT residual of the limited problem (∇E alone does not vanish where a limit holds an
    /// element: at a solution ∇E = −Σ Dᵀν). A no-op without limits.
    fn add_limit_forces(&self, g: &mut [f64], fixed: &[bool]) {
        for (e, nu) in &self.limit_forces {
            let el = &self.elements[*e];
            for (a, &v) in self.tets[*e].iter().enumerate() {
                let f = nu * el.grads[a];
                for c in 0..3 {
                    let k = 3 * v as usize + c;
                    if !fixed[k] {
                        g[k] += f[c];
                    }
                }
            }
        }
    }
}

/// The ADMM state in `b`'s extension slot (made empty on first use).
fn state(b: &mut CpuBackend) -> &mut CpuAdmm {
    let slot = b.extension_mut();
    if !slot.as_deref().is_some_and(|e| e.is::<CpuAdmm>()) {
        *slot = Some(Box::<CpuAdmm>::default());
    }
    slot.as_deref_mut()
        .and_then(|e| e.downcast_mut())
        .expect("set above")
}

/// Runs `f` on `b` and its ADMM state, the state taken out of the slot meanwhile (so that `f`
/// can use both) and put back after.
fn with_state<R>(b: &mut CpuBackend, f: impl FnOnce(&mut CpuBackend, &mut CpuAdmm) -> R) -> R {
    let mut a = std::mem::take(state(b));
    let r = f(b, &mut a);
    *state(b) = a;
    r
}

/// The ADMM state of `b`, if it has one.
fn state_ref(b: &CpuBackend) -> Option<&CpuAdmm> {
    b.extension().as_deref().and_then(|e| e.downcast_ref())
}

/// The constants of `a`, or the error for a backend `admm_setup` did not run on.
fn setup_of(a: Option<&CpuAdmm>) -> Result<&Setup> {
    a.and_then(|a| a.setup.as_ref())
        .ok_or_else(|| JelloError::Solver("cpu backend: admm_setup was not called".into()))
}

impl CpuBackend {
    /// Replaces ADMM's z-step by `prox` (f64 CPU only: the device has no custom proxes).
    pub fn set_custom_prox(&mut self, prox: Option<CustomProx>) {
        state(self).custom = prox;
    }

    /// A field's values.
    pub fn field_values(&self, f: CpuField) -> &[Matrix3<f64>] {
        state_ref(self).map_or(&[], |a| &a.fields[f.0])
    }
}

impl AdmmBackend for CpuBackend {
    type Field = CpuField;

    fn field(&mut self, _label: &str) -> Result<CpuField> {
        let a = state(self);
        a.fields.push(Vec::new());
        Ok(CpuField(a.fields.len() - 1))
    }

    fn admm_setup(&mut self, model: &Model, w2: &[f64], prox: ProxKind) -> Result<()> {
        let ne = model.mesh.tets.len();
        if w2.len() != ne {
            return Err(JelloError::Solver(format!(
                "admm_setup: {} weights for {ne} elements",
                w2.len()
            )));
        }
        let elements = (0..ne)
            .map(|e| Element {
                grads: model.rest[e].shape_gradients(),
                volume: model.rest[e].volume,
                w2: w2[e],
                material: model.materials[e],
                limit: model.strain_limit(e),
            })
            .collect();
        let out = [
            self.scalar()?,
            self.scalar()?,
            self.scalar()?,
            self.scalar()?,
        ];
        let a = state(self);
        for f in &mut a.fields {
            *f = vec![Matrix3::zeros(); ne];
        }
        a.setup = Some(Setup {
            elements,
            tets: model.mesh.tets.clone(),
            prox,
            out,
            limit_forces: Vec::new(),
        });
        Ok(())
    }

    fn admm_reset(&mut self, z: CpuField, u: CpuField) -> Result<()> {
        let fx = setup_of(state_ref(self))?.deformation(self.positions(Point::Current));
        let a = state(self);
        a.setup.as_mut().expect("checked").limit_forces.clear();
        let ne = fx.len();
        a.fields[u.0] = vec![Matrix3::zeros(); ne];
        a.fields[z.0] = fx;
        Ok(())
    }

    fn admm_local(
        &mut self,
        problem: &StepProblem,
        z: CpuField,
        u: CpuField,
        rhs: CpuVector,
    ) -> Result<LocalScalars<CpuScalar>> {
        setup_of(state_ref(self))?;
        with_state(self, |b, a| {
            let s = a.setup.as_mut().expect("checked");
            let fx = s.deformation(b.positions(Point::Current));
            let z_prev = std::mem::take(&mut a.fields[z.0]);
            let custom = a.custom.as_ref();
            let (zn, un) = s.z_step(&fx, &a.fields[u.0], custom);
            // Dual residual s = DᵀW²(zⁿ⁺¹ − zⁿ) on the free vertices.
            let mut sv = vec![0.0; b.positions(Point::Current).len()];
            s.scatter(|e| zn[e] - z_prev[e], &mut sv);
            for (s, &f) in sv.iter_mut().zip(&problem.fixed) {
                if f {
                    *s = 0.0;
                }
            }
            let dual = s.out[0];
            b.set_scalar(dual, sv.iter().map(|s| s * s).sum::<f64>().sqrt());
            s.scatter(|e| zn[e] - un[e], b.values_mut(rhs));
            s.limit_forces.clear();
            for (e, el) in s.elements.iter().enumerate() {
                if el.limit.is_some() {
                    let p = pk1(&el.material, &zn[e]) * el.volume;
                    s.limit_forces.push((e, un[e] * el.w2 - p));
                }
            }
            a.fields[z.0] = zn;
            a.fields[u.0] = un;
            Ok(LocalScalars { dual })
        })
    }

    fn admm_global(
        &mut self,
        rhs: CpuVector,
        x: &mut [f64],
        step: &mut GlobalStep<'_>,
    ) -> Result<()> {
        let mut buf = self.values(rhs).to_vec();
        step(&mut buf, x)?;
        self.set_positions(x);
        Ok(())
    }

    fn admm_primal(&mut self, z: CpuField) -> Result<CpuScalar> {
        let a = state_ref(self);
        let s = setup_of(a)?;
        let fx = s.deformation(self.positions(Point::Current));
        let r = fx
            .iter()
            .zip(&a.expect("checked").fields[z.0])
            .zip(&s.elements)
            .map(|((f, z), el)| el.w2 * (f - z).norm_squared())
            .sum::<f64>()
            .sqrt();
        let slot = s.out[1];
        self.set_scalar(slot, r);
        Ok(slot)
    }

    fn admm_gradient(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        g: CpuVector,
    ) -> Result<(CpuScalar, CpuScalar)> {
        setup_of(state_ref(self))?;
        with_state(self, |b, a| {
            let s = a.setup.as_ref().expect("checked");
            let [_, _, res, ch] = s.out;
            let change = b.gradient_and_change_at_current(problem, elastic, g);
            s.add_limit_forces(b.values_mut(g), &problem.fixed);
            let r = problem.model.char_norm.residual(b.values(g));
            b.set_scalar(res, r);
            b.set_scalar(ch, change);
            Ok((res, ch))
        })
    }

    fn read_field(&mut self, f: CpuField) -> Result<Vec<Matrix3<f64>>> {
        Ok(self.field_values(f).to_vec())
    }

    fn write_field(&mut self, f: CpuField, values: &[Matrix3<f64>]) -> Result<()> {
        state(self).fields[f.0] = values.to_vec();
        Ok(())
    }

    fn admm_weights(&mut self, w2: &[f64]) -> Result<()> {
        setup_of(state_ref(self))?;
        let s = state(self).setup.as_mut().expect("checked");
        if w2.len() != s.elements.len() {
            return Err(JelloError::Solver(format!(
                "admm_weights: {} weights for {} elements",
                w2.len(),
                s.elements.len()
            )));
        }
        for (el, &w) in s.elements.iter_mut().zip(w2) {
            el.w2 = w;
        }
        Ok(())
    }
}
