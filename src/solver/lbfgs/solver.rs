//! The L-BFGS loop, written once over [`PotentialBackend`] and [`InitialInverse`].

use super::contact::ContactSchedule;
use super::{InitialInverse, LbfgsParams};
use crate::clock::Instant;
use crate::error::{JelloError, Result};
use crate::problem::{ElasticTerms, StepProblem};
use crate::solver::backend::{Coef, Combine, Dots, Point, PotentialBackend};
use crate::solver::report::ms;
use crate::solver::QnMode;
use crate::solver::{IterationRecord, StepReport, StepSolver, StepTimings, StepWork, StopRule};

/// What one L-BFGS iteration did (for tests, traces and benches).
#[derive(Clone, Copy, Debug, Default)]
pub struct LbfgsIteration {
    /// ∇E·d of the direction taken (< 0 for a descent direction), J.
    pub slope: f64,
    /// Accepted step fraction α (0 when nothing was accepted).
    pub alpha: f64,
    /// The step filter's bound on α for the direction taken.
    pub bound: f64,
    /// Line-search trials evaluated.
    pub trials: usize,
    /// E − E(x_start) after the iteration, J.
    pub energy: f64,
    /// Characteristic-norm residual after the iteration.
    pub residual: f64,
    /// History pairs the direction used.
    pub pairs: usize,
    /// Contact curvature terms in the initial inverse Hessian.
    pub contacts: usize,
    /// The first trial's step length asked for by the initial inverse Hessian (DOT's
    /// quadratic model, [`InitialInverse::start_length`]) or carried from the last iteration
    /// ([`super::TrialRule::Carry`]); 0 when α started at 1.
    pub start_length: f64,
    /// Whether the new curvature pair was kept (false: sᵀt failed the guard, or m = 0).
    pub pair_kept: bool,
    /// Whether the history (and, if that failed too, the initial inverse Hessian's own
    /// fallback: [`InitialInverse::fallback`]) was dropped after a non-descent direction or a
    /// failed line search along the L-BFGS one.
    pub reset: bool,
    /// Whether the history was dropped because the set of vertices in contact changed (the
    /// initial inverse Hessian's barrier terms; see the module docs).
    pub contacts_changed: bool,
    /// Whether IPC's κ was doubled after the iteration (the potential changed, the history
    /// was dropped: [`super::contact`]).
    pub kappa_raised: bool,
}

/// Wall time per phase over a solver's life, ms (exact per phase with
/// [`LbfgsParams::profile`]; otherwise a device's asynchronous work lands where it is waited
/// for).
#[derive(Clone, Copy, Debug, Default)]
pub struct LbfgsPhases {
    /// Gradients at the start and at every trial, with the trial's positions and energy
    /// change (one element pass for both on either backend).
    pub gradient_ms: f64,
    /// Both loops of the two-loop recursion, and the curvature pair.
    pub two_loop_ms: f64,
    /// The initial inverse Hessian's applications, with a device's transfers.
    pub solve_ms: f64,
    /// The step filter and the reads of the line search's scalars.
    pub line_search_ms: f64,
    /// The initial inverse Hessian's per-step work ([`InitialInverse::begin_step`]:
    /// (re)factorisations, DOT's Hessian assembly).
    pub factor_ms: f64,
    /// Iterations these times cover.
    pub iterations: usize,
    /// Line-search trials (energy and gradient evaluations after each direction) over these
    /// iterations.
    pub trials: usize,
}

/// L-BFGS on a backend `B` with the initial inverse Hessian `H`; see the module docs.
pub struct LbfgsSolver<B: PotentialBackend, H: InitialInverse<B>> {
    params: LbfgsParams,
    backend: B,
    h0: H,
    extent: f64,
    g: [B::Vector; 2],
    gc: usize,
    q: B::Vector,
    d: B::Vector,
    s: Vec<B::Vector>,
    t: Vec<B::Vector>,
    rho: Vec<B::Scalar>,
    zeta: Vec<B::Scalar>,
    chain: [B::Scalar; 2],
    slope: B::Scalar,
    ss: B::Scalar,
    tt: B::Scalar,
    /// Ring slots of the kept pairs, oldest first.
    history: Vec<usize>,
    log: Vec<LbfgsIteration>,
    phases: LbfgsPhases,
    /// With a start length ([`InitialInverse::wants_start_length`]): a spare vector the
    /// scaled direction is written to (then the two swap), and the curvature's scalar.
    scratch: Option<(B::Vector, B::Scalar)>,
}

/// A trial the line search accepted, with what the next iteration needs.
struct Accepted {
    energy: f64,
    moved: f64,
    alpha: f64,
    residual: f64,
    rho: f64,
    ss: f64,
    tt: f64,
    /// The history including the trial's pair.
    history: Vec<usize>,
}

/// A curvature pair is kept when sᵀt > `pair_guard` · ‖s‖‖t‖: the paper skips sᵀt ≤ 0; the
/// margin is the round-off of the dot products (f64: 1e-10; f32 sums: 1e-5), below which the
/// sign of sᵀt is not known.
fn pair_guard(f64_backend: bool) -> f64 {
    if f64_backend {
        1e-10
    } else {
        1e-5
    }
}

impl<B: PotentialBackend, H: InitialInverse<B>> LbfgsSolver<B, H> {
    /// A solver for a model of largest extent `extent` (m, for the dx stop rule) on
    /// `backend` with the initial inverse Hessian `h0`.
    pub fn with_initial(mut backend: B, h0: H, params: LbfgsParams, extent: f64) -> Result<Self> {
        params.validate()?;
        let slots = params.history + 1;
        let g = [
            backend.vector("gradient")?,
            backend.vector("trial gradient")?,
        ];
        let q = backend.vector("two-loop q")?;
        let d = backend.vector("direction")?;
        let mut s = Vec::with_capacity(slots);
        let mut t = Vec::with_capacity(slots);
        let mut rho = Vec::with_capacity(slots);
        let mut zeta = Vec::with_capacity(slots);
        for _ in 0..slots {
            s.push(backend.vector("history s")?);
            t.push(backend.vector("history t")?);
            rho.push(backend.scalar()?);
            zeta.push(backend.scalar()?);
        }
        let chain = [backend.scalar()?, backend.scalar()?];
        let (slope, ss, tt) = (backend.scalar()?, backend.scalar()?, backend.scalar()?);
        let scratch = if h0.wants_start_length() {
            Some((backend.vector("scaled direction")?, backend.scalar()?))
        } else {
            None
        };
        Ok(LbfgsSolver {
            params,
            backend,
            h0,
            extent,
            g,
            gc: 0,
            q,
            d,
            s,
            t,
            rho,
            zeta,
            chain,
            slope,
            ss,
            tt,
            history: Vec::new(),
            log: Vec::new(),
            phases: LbfgsPhases::default(),
            scratch,
        })
    }

    /// The loop's parameters.
    pub fn loop_params(&self) -> &LbfgsParams {
        &self.params
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The initial inverse Hessian.
    pub fn initial(&self) -> &H {
        &self.h0
    }

    /// The iterations of the last step.
    pub fn last_step(&self) -> &[LbfgsIteration] {
        &self.log
    }

    /// Per-phase times over the solver's life.
    pub fn phases(&self) -> LbfgsPhases {
        self.phases
    }

    fn sync_if_profiling(&mut self) -> Result<()> {
        if self.params.profile {
            self.backend.sync()?;
        }
        Ok(())
    }

    /// The two-loop recursion's first loop on the gradient g[`gi`] with the pairs in `hist`
    /// (ring slots, oldest first): q = −g, then newest to oldest ζ_i = s_iᵀq/ρ_i,
    /// q ← q − ζ_i t_i. Each dot product is fused into the update before it.
    fn first_loop(&mut self, gi: usize, hist: &[usize]) -> Result<()> {
        let b = &mut self.backend;
        let k = hist.len();
        let first_dot = hist.last().map(|&i| (self.s[i], self.chain[0]));
        b.combine(
            self.q,
            Coef::constant(-1.0),
            self.g[gi],
            Combine::Set,
            first_dot,
        )?;
        for j in (0..k).rev() {
            let i = hist[j];
            let cur = self.chain[(k - 1 - j) % 2];
            let next = (j > 0).then(|| (self.s[hist[j - 1]], self.chain[(k - j) % 2]));
            b.combine(
                self.q,
                Coef {
                    base: 0.0,
                    a: None,
                    ratio: 1.0,
                    num: Some(cur),
                    den: Some(self.rho[i]),
                    store: Some(self.zeta[i]),
                },
                self.t[i],
                Combine::Add,
                next,
            )?;
        }
        Ok(())
    }

    /// The second loop on d = A⁻¹q: oldest to newest η = t_iᵀd/ρ_i, d ← d + (ζ_i − η) s_i.
    fn second_loop(&mut self, hist: &[usize]) -> Result<()> {
        let b = &mut self.backend;
        let k = hist.len();
        if k == 0 {
            return Ok(());
        }
        b.dots(
            self.t[hist[0]],
            self.d,
            Dots {
                ab: Some(self.chain[0]),
                aa: None,
                bb: None,
            },
        )?;
        for j in 0..k {
            let i = hist[j];
            let cur = self.chain[j % 2];
            let next = (j + 1 < k).then(|| (self.t[hist[j + 1]], self.chain[(j + 1) % 2]));
            b.combine(
                self.d,
                Coef {
                    base: 1.0,
                    a: Some(self.zeta[i]),
                    ratio: 1.0,
                    num: Some(cur),
                    den: Some(self.rho[i]),
                    store: None,
                },
                self.s[i],
                Combine::Add,
                next,
            )?;
        }
        Ok(())
    }

    /// slope ← ∇E·d at the current iterate.
    fn record_slope(&mut self) -> Result<()> {
        self.backend.dots(
            self.g[self.gc],
            self.d,
            Dots {
                ab: Some(self.slope),
                aa: None,
                bb: None,
            },
        )
    }

    /// H₀'s first trial length for the direction d (None: α starts at 1 of the filter's
    /// bound): the slope and H₀'s curvature dᵀH d, both computed where d is, in one read.
    fn start_length(&mut self, problem: &StepProblem) -> Result<Option<f64>> {
        let Some((_, curvature)) = self.scratch else {
            return Ok(None);
        };
        self.h0
            .curvature(problem, &mut self.backend, self.d, curvature)?;
        let v = self.backend.read(&[self.slope, curvature])?;
        Ok(self.h0.start_length(v[0], v[1]))
    }

    /// After the potential changed at the current iterate (IPC's κ raised, friction
    /// re-lagged): ∇E there, the history dropped and the first loop recorded without it.
    /// Returns the residual and E − E(x_start) (J) under the new potential.
    fn reevaluate(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
    ) -> Result<(f64, f64)> {
        let gi = self
            .backend
            .gradient(problem, elastic, Point::Current, self.g[self.gc])?;
        let residual = self.backend.read(&[gi.residual])?[0];
        let x = self
            .backend
            .host_positions()
            .expect("a contact schedule runs on host positions");
        let change = problem.energy_change(elastic, x);
        self.history.clear();
        self.first_loop(self.gc, &[])?;
        Ok((residual, change))
    }

    /// Whether the stop rule holds for `residual` and the last iteration's largest move.
    fn rule_met(&self, residual: f64, last_move: f64) -> bool {
        self.params.stop.met(residual, last_move / self.extent)
    }
}

impl<B: PotentialBackend, H: InitialInverse<B>> StepSolver for LbfgsSolver<B, H> {
    fn name(&self) -> String {
        self.h0.name()
    }

    fn step(
        &mut self,
        problem: &StepProblem,
        elastic: &dyn ElasticTerms,
        x: &mut Vec<f64>,
        trace: bool,
    ) -> Result<StepReport> {
        let start = Instant::now();
        let mut timings = StepTimings::default();
        self.backend.check(problem)?;
        self.log.clear();
        let m = self.params.history;

        // H₀ for this step (the PD matrix when h or the pins changed; DOT's subdomain
        // factors at x_start every step).
        let t0 = Instant::now();
        self.backend.begin_step(problem, elastic)?;
        // IPC: κ balanced and friction lagged at the start, before the first gradient.
        let mut contact = ContactSchedule::begin(problem, &self.backend, &self.h0.name())?;
        let t1 = Instant::now();
        let built = self.h0.begin_step(problem, elastic, &mut self.backend)?;
        let h0_ms = ms(t1);
        if built {
            timings.factor_ms += h0_ms;
            self.phases.factor_ms += h0_ms;
        }
        self.gc = 0;
        self.history.clear();
        let gi = self
            .backend
            .gradient(problem, elastic, Point::Current, self.g[0])?;
        self.first_loop(0, &[])?;
        let residual0 = self.backend.read(&[gi.residual])?[0];
        timings.setup_ms += ms(t0) - h0_ms;
        self.phases.gradient_ms += ms(t0) - h0_ms;
        if !residual0.is_finite() {
            return Err(JelloError::Solver(format!(
                "{}: non-finite gradient at the step's start ({})",
                self.h0.name(),
                problem.diagnose_non_finite(elastic, &problem.x_start)
            )));
        }
        let start_met = self.params.stop.met(residual0, f64::INFINITY);
        let mut residual = residual0;
        let mut change = 0.0;
        let mut last_move = f64::INFINITY;
        let mut iterations = 0;
        let mut records = trace.then(Vec::new);
        if let Some(r) = records.as_mut() {
            r.push(IterationRecord {
                residual,
                energy: 0.0,
                alpha: 0.0,
                ..IterationRecord::default()
            });
        }
        let mut gave_up = false;
        // The first trial's α for the next direction from the last accepted pair
        // ([`super::TrialRule::Carry`]). None at the step's start: carried across steps it
        // would save the first iteration's rejected α = 1 on most steps, but a step would
        // then depend on the solver's past, and a resumed run must equal the straight one
        // bit for bit (the checkpoint holds the state only).
        let mut carried = None;
        loop {
            let mut met = self.rule_met(residual, last_move);
            if met && iterations > 0 && contact.lag_friction(problem, &self.backend) {
                // Another lagging pass: friction's normal forces and frames from this point;
                // the dx rule needs a step under the new potential, CN can stop at once.
                (residual, change) = self.reevaluate(problem, elastic)?;
                last_move = f64::INFINITY;
                carried = None;
                met = self.rule_met(residual, last_move);
            }
            let done = match self.params.mode {
                QnMode::Fixed(n) => iterations >= n,
                QnMode::Rule => StopRule::stop_now(met, iterations, self.params.max_iterations),
            };
            if done {
                break;
            }
            iterations += 1;
            let mut it = LbfgsIteration::default();
            // Try the L-BFGS direction; on a non-descent direction or a failed line search,
            // once more without the history, and then with H₀'s own safer variants
            // ([`InitialInverse::fallback`]: QN's plain PD direction without the contact
            // correction, DOT's symmetric gather), until none is left.
            self.h0.begin_iteration();
            let accepted = loop {
                // d = H∇ : q is ready (first loop recorded); solve; second loop.
                let t0 = Instant::now();
                let refresh = self.h0.refresh(problem, &mut self.backend)?;
                it.contacts = refresh.terms;
                if refresh.changed && !self.history.is_empty() {
                    // H₀ changed where the barrier is stiffest: pairs measured under the old
                    // contact set mix the barrier's curvature into directions H₀ now treats
                    // differently (kept, they drove a vertex 90% closer to the ground per
                    // iteration on `drop.toml`'s impact until the step gave up; see
                    // [`crate::solver::qn`]).
                    self.history.clear();
                    self.first_loop(self.gc, &[])?;
                    it.contacts_changed = true;
                }
                let hist = self.history.clone();
                it.pairs = hist.len();
                let h0 = &mut self.h0;
                self.backend
                    .host_solve(self.q, self.d, &mut |v| h0.apply(v))?;
                timings.solve_ms += ms(t0);
                self.phases.solve_ms += ms(t0);
                let t0 = Instant::now();
                self.second_loop(&hist)?;
                self.record_slope()?;
                self.sync_if_profiling()?;
                self.phases.two_loop_ms += ms(t0);
                let new = (0..=m)
                    .find(|i| !hist.contains(i))
                    .expect("m + 1 ring slots for at most m pairs");
                let gt = 1 - self.gc;
                let t0 = Instant::now();
                // H₀'s first trial length (DOT's quadratic model): a length above 1 scales
                // the direction (the step filter bounds α ≤ 1 of a direction), one below 1
                // starts the search at min(length, filter bound) — as does the last
                // iteration's curvature when H₀ has no length ([`super::TrialRule::Carry`]).
                let start = self.start_length(problem)?.or(carried);
                it.start_length = start.unwrap_or(0.0);
                if let (Some(a), Some((spare, c))) = (start, self.scratch) {
                    if a > 1.0 {
                        self.backend.combine(
                            spare,
                            Coef::constant(a),
                            self.d,
                            Combine::Set,
                            None,
                        )?;
                        self.scratch = Some((self.d, c));
                        self.d = spare;
                        self.record_slope()?;
                    }
                }
                let bound = self.backend.step_bound(problem, self.d)?;
                let mut scale = 1.0;
                if let Some(a) = start.filter(|&a| a < 1.0) {
                    let b = self.backend.read(&[bound])?[0];
                    if b > 0.0 {
                        scale = (a / b).min(1.0);
                    }
                }
                timings.line_search_ms += ms(t0);
                self.phases.line_search_ms += ms(t0);
                let mut halvings = 0;
                // The smallest trial: 2^−max_halvings of the first (halving stops exactly
                // where it always did).
                let floor = scale * 0.5f64.powi(self.params.max_halvings as i32);
                let mut ignore_inversion = false;
                let mut outcome = None;
                loop {
                    // The trial, and speculatively the gradient there (fused with the energy
                    // on the f64 backend), the curvature pair and the next first loop: one read
                    // below then serves the Armijo decision and the next direction.
                    let t0 = Instant::now();
                    let tr = self.backend.trial(
                        problem,
                        elastic,
                        self.d,
                        scale,
                        bound,
                        self.s[new],
                        Some(self.g[gt]),
                    )?;
                    self.sync_if_profiling()?;
                    let trial_ms = ms(t0);
                    timings.assembly_ms += trial_ms;
                    self.phases.gradient_ms += trial_ms;
                    let residual_handle = tr.residual.expect("a gradient was asked for");
                    let t1 = Instant::now();
                    let mut with_new = hist.clone();
                    if m > 0 {
                        let b = &mut self.backend;
                        b.combine(
                            self.t[new],
                            Coef::constant(1.0),
                            self.g[gt],
                            Combine::Set,
                            None,
                        )?;
                        b.combine(
                            self.t[new],
                            Coef::constant(-1.0),
                            self.g[self.gc],
                            Combine::Add,
                            None,
                        )?;
                        b.dots(
                            self.s[new],
                            self.t[new],
                            Dots {
                                ab: Some(self.rho[new]),
                                aa: Some(self.ss),
                                bb: Some(self.tt),
                            },
                        )?;
                        if with_new.len() == m {
                            with_new.remove(0);
                        }
                        with_new.push(new);
                    }
                    self.first_loop(gt, &with_new)?;
                    self.sync_if_profiling()?;
                    self.phases.two_loop_ms += ms(t1);
                    let t1 = Instant::now();
                    let v = self.backend.read(&[
                        tr.energy,
                        tr.inverted,
                        tr.max_move,
                        tr.alpha,
                        self.slope,
                        residual_handle,
                        self.rho[new],
                        self.ss,
                        self.tt,
                    ])?;
                    self.phases.line_search_ms += ms(t1);
                    timings.line_search_ms += ms(t1);
                    let [energy, inverted, moved, alpha, slope, res, rho, ss, tt] =
                        <[f64; 9]>::try_from(v).expect("nine scalars read");
                    it.slope = slope;
                    if it.trials == 0 {
                        it.bound = alpha;
                    }
                    it.trials += 1;
                    self.phases.trials += 1;
                    if !(slope < 0.0 && slope.is_finite()) {
                        break;
                    }
                    if inverted > 0.0 && !ignore_inversion {
                        // The inversion part of the step filter, evaluated per trial (a device
                        // backend; the f64 one has it in its bound): halve until no element
                        // flips — and, as `StepProblem::step_limit` does, drop it when that
                        // would cut the step below 1% of the obstacle bound, unless strict.
                        if scale * 0.5 < 1e-2 && !problem.strict_inversion {
                            ignore_inversion = true;
                            scale = 1.0;
                        } else if halvings < self.params.max_halvings {
                            scale *= 0.5;
                            halvings += 1;
                        } else {
                            break;
                        }
                        continue;
                    }
                    let slack = self.backend.energy_slack(problem, elastic, change);
                    if energy.is_finite()
                        && energy <= change + self.params.armijo * alpha * slope + slack
                    {
                        outcome = Some(Accepted {
                            energy,
                            moved,
                            alpha,
                            residual: res,
                            rho,
                            ss,
                            tt,
                            history: with_new,
                        });
                        break;
                    }
                    let r = self.params.trials.reduction(slope, alpha, energy - change);
                    if halvings >= self.params.max_halvings || scale * r < floor {
                        break;
                    }
                    scale *= r;
                    halvings += 1;
                }
                match outcome {
                    Some(o) => break Some(o),
                    // Retry without the history, then with H₀'s safer variants.
                    None if !hist.is_empty() || self.h0.fallback() => {
                        it.reset = true;
                        self.history.clear();
                        self.first_loop(self.gc, &[])?;
                    }
                    None => break None,
                }
            };
            let Some(acc) = accepted else {
                // No decrease possible along H₀'s safest direction either: report, do not hide —
                // unless the start already met the rule and only round-off is left.
                gave_up = true;
                self.log.push(it);
                break;
            };
            self.backend.accept();
            carried = if m > 0 {
                self.params
                    .trials
                    .carried(it.slope, acc.alpha, acc.rho, self.params.armijo)
            } else {
                None
            };
            self.gc = 1 - self.gc;
            change = acc.energy;
            residual = acc.residual;
            last_move = acc.moved;
            if !residual.is_finite() {
                return Err(JelloError::Solver(format!(
                    "{} diverged on {} (non-finite gradient after iteration {iterations})",
                    self.h0.name(),
                    self.backend.name()
                )));
            }
            if m > 0 {
                let guard = pair_guard(self.backend.is_f64()) * (acc.ss * acc.tt).max(0.0).sqrt();
                it.pair_kept = acc.rho > guard && acc.rho.is_finite();
                if it.pair_kept {
                    self.history = acc.history;
                } else {
                    // The speculative first loop used the pair: record it again without.
                    let hist = self.history.clone();
                    self.first_loop(self.gc, &hist)?;
                }
            }
            if contact.after_accept(problem, &self.backend) {
                // κ doubled: the objective changed, and its value relative to x_start too.
                (residual, change) = self.reevaluate(problem, elastic)?;
                it.kappa_raised = true;
                carried = None;
            }
            it.alpha = acc.alpha;
            it.energy = change;
            it.residual = residual;
            self.log.push(it);
            if let Some(r) = records.as_mut() {
                r.push(IterationRecord {
                    residual,
                    energy: change,
                    alpha: acc.alpha,
                    ..IterationRecord::default()
                });
            }
        }
        self.phases.iterations += iterations;
        let converged = if gave_up {
            iterations == 1 && start_met
        } else {
            self.rule_met(residual, last_move)
        };
        let (energy, energy_change) = self.backend.finish_step(problem, elastic, change, x)?;
        if x.iter().any(|v| !v.is_finite()) {
            return Err(JelloError::Solver(format!(
                "{} diverged on {} (non-finite positions)",
                self.h0.name(),
                self.backend.name()
            )));
        }
        Ok(StepReport {
            iterations,
            converged,
            residual,
            energy,
            energy_change,
            wall_ms: ms(start),
            timings,
            work: StepWork {
                line_search_trials: self.log.iter().map(|i| i.trials).sum(),
                ..StepWork::default()
            },
            trace: records,
            ..StepReport::default()
        })
    }
}
