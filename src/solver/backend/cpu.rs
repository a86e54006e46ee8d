//! The f64 CPU backend: vectors are `Vec<f64>`, operations run when called, and the potential
//! is [`StepProblem`]'s own f64 energy, gradient and step filter.

use super::{Backend, Coef, Combine, Dots, GradientScalars, Point, PotentialBackend, TrialScalars};
use crate::error::{JelloError, Result};
use crate::material::EigenFilter;
use crate::problem::{ElasticTerms, StepProblem};
use crate::solver::report::max_vertex_norm;
use rayon::prelude::*;
use std::any::Any;

/// Handle to a [`CpuBackend`] vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuVector(usize);

/// Handle to a [`CpuBackend`] scalar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuScalar(usize);

/// See the module docs.
#[derive(Debug, Default)]
pub struct CpuBackend {
    vectors: Vec<Vec<f64>>,
    scalars: Vec<f64>,
    /// Current and trial positions.
    x: [Vec<f64>; 2],
    cur: usize,
    /// Scalars the potential's operations return (residual, energy, inverted, move, α, bound).
    out: Option<[CpuScalar; 6]>,
    /// E at the last gradient of each point (the report's energy).
    energy_at: [f64; 2],
    n: usize,
    /// A solver's own state on this backend ([`Self::extension`]).
    ext: Option<Box<dyn Any + Send + Sync>>,
    /// Element Hessians at x_start ([`PotentialBackend::start_element_hessians`]) and whether
    /// they belong to the current step.
    start_hess: Vec<[f64; 144]>,
    start_hess_valid: bool,
}

impl CpuBackend {
    /// A backend for models of `num_vertices` vertices.
    pub fn new(num_vertices: usize) -> Self {
        CpuBackend {
            n: 3 * num_vertices,
            ..CpuBackend::default()
        }
    }

    /// The values of a vector (3n, interleaved).
    pub fn values(&self, v: CpuVector) -> &[f64] {
        &self.vectors[v.0]
    }

    /// The positions of a point (3n, m).
    pub fn positions(&self, at: Point) -> &[f64] {
        match at {
            Point::Current => &self.x[self.cur],
            Point::Trial => &self.x[1 - self.cur],
        }
    }

    /// The extension slot: state a solver's own extension of this backend keeps here (ADMM's
    /// fields and constants), typed by that solver — the backend does not know it.
    pub(crate) fn extension(&self) -> &Option<Box<dyn Any + Send + Sync>> {
        &self.ext
    }

    /// The extension slot, mutable.
    pub(crate) fn extension_mut(&mut self) -> &mut Option<Box<dyn Any + Send + Sync>> {
        &mut self.ext
    }

    /// The values of a vector, mutable (3n, interleaved).
    pub(crate) fn values_mut(&mut self, v: CpuVector) -> &mut [f64] {
        &mut self.vectors[v.0]
    }

    /// Sets a scalar's value.
    pub(crate) fn set_scalar(&mut self, s: CpuScalar, value: f64) {
        self.scalars[s.0] = value;
    }

    /// The current and trial positions (3n each, m), mutable: for a solver extension that
    /// moves the points itself.
    pub(crate) fn points_mut(&mut self) -> (&mut Vec<f64>, &mut Vec<f64>) {
        let (a, b) = self.x.split_at_mut(1);
        if self.cur == 0 {
            (&mut a[0], &mut b[0])
        } else {
            (&mut b[0], &mut a[0])
        }
    }

    /// Makes `x` (3n, m) the current point.
    pub(crate) fn set_positions(&mut self, x: &[f64]) {
        self.x[self.cur].copy_from_slice(x);
    }

    /// ∇E at the current point into `g` (its E kept for the step's report); returns
    /// E − E(x_start), J.
    pub(crate) fn gradient_and_change_at_current(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        g: CpuVector,
    ) -> f64 {
        let c = self.cur;
        let (e, change) = problem.gradient_and_change(elastic, &self.x[c], &mut self.vectors[g.0]);
        self.energy_at[c] = e;
        change
    }

    fn outputs(&mut self) -> [CpuScalar; 6] {
        if let Some(o) = self.out {
            return o;
        }
        let o = std::array::from_fn(|_| {
            self.scalars.push(0.0);
            CpuScalar(self.scalars.len() - 1)
        });
        self.out = Some(o);
        o
    }

    fn coef(&mut self, c: &Coef<CpuScalar>) -> f64 {
        let a = c.a.map_or(1.0, |s| self.scalars[s.0]);
        let ratio = match (c.num, c.den) {
            (Some(n), Some(d)) => {
                let den = self.scalars[d.0];
                if den > 0.0 && den.is_finite() {
                    self.scalars[n.0] / den
                } else {
                    0.0
                }
            }
            (Some(n), None) => self.scalars[n.0],
            _ => 0.0,
        };
        if let Some(s) = c.store {
            self.scalars[s.0] = ratio;
        }
        c.base * a - c.ratio * ratio
    }

    /// Two distinct vectors, the first mutable.
    fn pair(&mut self, y: usize, x: usize) -> (&mut Vec<f64>, &Vec<f64>) {
        assert_ne!(y, x, "combine: y and x must differ");
        if y < x {
            let (a, b) = self.vectors.split_at_mut(x);
            (&mut a[y], &b[0])
        } else {
            let (a, b) = self.vectors.split_at_mut(y);
            (&mut b[0], &a[x])
        }
    }
}

/// a·b, summed per fixed chunk in parallel and then the chunks in order: the same bits whatever
/// the thread count or scheduling (rayon's `sum` splits adaptively, so its rounding varied
/// from run to run, and a resumed run must repeat the straight run bit for bit).
fn dot(a: &[f64], b: &[f64]) -> f64 {
    const CHUNK: usize = 4096;
    let parts: Vec<f64> = a
        .par_chunks(CHUNK)
        .zip(b.par_chunks(CHUNK))
        .map(|(x, y)| x.iter().zip(y).map(|(p, q)| p * q).sum::<f64>())
        .collect();
    parts.iter().sum()
}

impl Backend for CpuBackend {
    type Vector = CpuVector;
    type Scalar = CpuScalar;

    fn name(&self) -> String {
        "cpu-f64".into()
    }

    fn is_f64(&self) -> bool {
        true
    }

    fn vector(&mut self, _label: &str) -> Result<CpuVector> {
        self.vectors.push(vec![0.0; self.n]);
        Ok(CpuVector(self.vectors.len() - 1))
    }

    fn flat_vector(&mut self, _label: &str, len: usize) -> Result<CpuVector> {
        self.vectors.push(vec![0.0; len]);
        Ok(CpuVector(self.vectors.len() - 1))
    }

    fn scalar(&mut self) -> Result<CpuScalar> {
        self.scalars.push(0.0);
        Ok(CpuScalar(self.scalars.len() - 1))
    }

    fn write_vector(&mut self, v: CpuVector, values: &[f64]) -> Result<()> {
        let dst = &mut self.vectors[v.0];
        if dst.len() != values.len() {
            return Err(JelloError::Solver(format!(
                "CPU backend: {} values for a vector of {}",
                values.len(),
                dst.len()
            )));
        }
        dst.copy_from_slice(values);
        Ok(())
    }

    fn read_vector(&mut self, v: CpuVector) -> Result<Vec<f64>> {
        Ok(self.vectors[v.0].clone())
    }

    fn combine(
        &mut self,
        y: CpuVector,
        coef: Coef<CpuScalar>,
        x: CpuVector,
        mode: Combine,
        dot_with: Option<(CpuVector, CpuScalar)>,
    ) -> Result<()> {
        let c = self.coef(&coef);
        {
            let (yv, xv) = self.pair(y.0, x.0);
            if yv.len() != xv.len() {
                return Err(JelloError::Solver(format!(
                    "combine: vectors of {} and {} values",
                    yv.len(),
                    xv.len()
                )));
            }
            match mode {
                Combine::Add => yv.par_iter_mut().zip(xv).for_each(|(y, x)| *y += c * x),
                Combine::Set => yv.par_iter_mut().zip(xv).for_each(|(y, x)| *y = c * x),
            }
        }
        if let Some((z, s)) = dot_with {
            if z == y {
                return Err(JelloError::Solver("combine: z must differ from y".into()));
            }
            self.scalars[s.0] = dot(&self.vectors[z.0], &self.vectors[y.0]);
        }
        Ok(())
    }

    fn dots(&mut self, a: CpuVector, b: CpuVector, out: Dots<CpuScalar>) -> Result<()> {
        let (av, bv) = (&self.vectors[a.0], &self.vectors[b.0]);
        if av.len() != bv.len() {
            return Err(JelloError::Solver(format!(
                "dots: vectors of {} and {} values",
                av.len(),
                bv.len()
            )));
        }
        let vals = [
            out.ab.map(|s| (s, dot(av, bv))),
            out.aa.map(|s| (s, dot(av, av))),
            out.bb.map(|s| (s, dot(bv, bv))),
        ];
        for (s, v) in vals.into_iter().flatten() {
            self.scalars[s.0] = v;
        }
        Ok(())
    }

    fn read(&mut self, scalars: &[CpuScalar]) -> Result<Vec<f64>> {
        Ok(scalars.iter().map(|s| self.scalars[s.0]).collect())
    }

    fn host_solve(
        &mut self,
        q: CpuVector,
        r: CpuVector,
        f: &mut dyn FnMut(&mut [f64]) -> Result<()>,
    ) -> Result<()> {
        let (rv, qv) = self.pair(r.0, q.0);
        rv.copy_from_slice(qv);
        f(rv)
    }

    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
}

impl PotentialBackend for CpuBackend {
    fn check(&self, problem: &StepProblem) -> Result<()> {
        if problem.x_start.len() != self.n {
            return Err(JelloError::Solver(format!(
                "CPU backend built for {} DOFs, the problem has {}",
                self.n,
                problem.x_start.len()
            )));
        }
        Ok(())
    }

    fn begin_step(&mut self, problem: &StepProblem, _elastic: &dyn ElasticTerms) -> Result<()> {
        self.check(problem)?;
        self.cur = 0;
        self.x[0].clone_from(&problem.x_start);
        self.x[1].clone_from(&problem.x_start);
        self.start_hess_valid = false;
        Ok(())
    }

    fn gradient(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        at: Point,
        g: CpuVector,
    ) -> Result<GradientScalars<CpuScalar>> {
        let o = self.outputs();
        let i = match at {
            Point::Current => self.cur,
            Point::Trial => 1 - self.cur,
        };
        let e = problem.gradient(elastic, &self.x[i], &mut self.vectors[g.0]);
        self.energy_at[i] = e;
        self.scalars[o[0].0] = problem.model.char_norm.residual(&self.vectors[g.0]);
        Ok(GradientScalars { residual: o[0] })
    }

    fn step_bound(&mut self, problem: &StepProblem, d: CpuVector) -> Result<CpuScalar> {
        let o = self.outputs();
        self.scalars[o[5].0] = problem.step_limit(&self.x[self.cur], &self.vectors[d.0]);
        Ok(o[5])
    }

    fn trial(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        d: CpuVector,
        scale: f64,
        bound: CpuScalar,
        step: CpuVector,
        gradient: Option<CpuVector>,
    ) -> Result<TrialScalars<CpuScalar>> {
        let o = self.outputs();
        let alpha = scale * self.scalars[bound.0];
        let (c, t) = (self.cur, 1 - self.cur);
        {
            let (xs, ts) = self.x.split_at_mut(1);
            let (xc, xt) = if c == 0 {
                (&xs[0], &mut ts[0])
            } else {
                (&ts[0], &mut xs[0])
            };
            let dv = &self.vectors[d.0];
            xt.par_iter_mut()
                .zip(xc)
                .zip(dv)
                .for_each(|((t, x), d)| *t = x + alpha * d);
        }
        if step != d {
            let (sv, dv) = self.pair(step.0, d.0);
            sv.par_iter_mut().zip(dv).for_each(|(s, d)| *s = alpha * d);
        } else {
            return Err(JelloError::Solver("trial: step must differ from d".into()));
        }
        let residual = match gradient {
            Some(g) => {
                let (e, change) =
                    problem.gradient_and_change(elastic, &self.x[t], &mut self.vectors[g.0]);
                self.energy_at[t] = e;
                self.scalars[o[1].0] = change;
                self.scalars[o[0].0] = problem.model.char_norm.residual(&self.vectors[g.0]);
                Some(o[0])
            }
            None => {
                self.scalars[o[1].0] = problem.energy_change(elastic, &self.x[t]);
                None
            }
        };
        self.scalars[o[2].0] = 0.0;
        self.scalars[o[3].0] = max_vertex_norm(&self.vectors[step.0]);
        self.scalars[o[4].0] = alpha;
        Ok(TrialScalars {
            energy: o[1],
            inverted: o[2],
            max_move: o[3],
            alpha: o[4],
            residual,
        })
    }

    fn accept(&mut self) {
        self.cur = 1 - self.cur;
    }

    fn host_positions(&self) -> Option<&[f64]> {
        Some(&self.x[self.cur])
    }

    fn start_element_hessians(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        filter: EigenFilter,
    ) -> Result<&[[f64; 144]]> {
        elastic.elastic_element_hessians_filtered(&problem.x_start, filter, &mut self.start_hess);
        self.start_hess_valid = true;
        Ok(&self.start_hess)
    }

    fn start_curvature(
        &mut self,
        problem: &StepProblem,
        d: CpuVector,
        out: CpuScalar,
    ) -> Result<()> {
        if !self.start_hess_valid {
            return Err(JelloError::Solver(
                "start_curvature before start_element_hessians in this step".into(),
            ));
        }
        self.scalars[out.0] =
            problem.assembled_curvature(&self.start_hess, &problem.x_start, &self.vectors[d.0]);
        Ok(())
    }

    fn contact_terms(
        &mut self,
        problem: &StepProblem,
        out: &mut Vec<crate::solver::pd::ContactTerm>,
    ) -> Result<()> {
        crate::solver::pd::contact_terms(problem, &self.x[self.cur], out);
        Ok(())
    }

    fn energy_slack(&self, problem: &StepProblem, elastic: &dyn ElasticTerms, e: f64) -> f64 {
        problem.energy_slack(elastic, e, &self.x[self.cur])
    }

    fn finish_step(
        &mut self,
        _problem: &StepProblem,
        _elastic: &dyn ElasticTerms,
        change: f64,
        x: &mut Vec<f64>,
    ) -> Result<(f64, f64)> {
        x.clone_from(&self.x[self.cur]);
        Ok((self.energy_at[self.cur], change))
    }
}
