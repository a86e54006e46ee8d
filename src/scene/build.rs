//! Validating a scene and building the model from it.

use super::solver::*;
use super::spec::*;
use super::Scene;
use crate::contact::ObstacleMesh;
use crate::error::{JelloError, Result};
use crate::limits::{
    MAX_COORDINATE, MAX_GENERATOR_CELLS, MAX_SCENE_VALUE, MAX_STEPS, TIME_STEP_RANGE,
};
use crate::material::{Material, MaterialModel};
use crate::mesh::{
    ball, box_grid, read_mesh, read_triangle_mesh, ring, ring_net, ring_net_clearance, RingNet,
    TetMesh,
};
use crate::problem::{
    BarrierParams, Body, ExternalForce, Integrator, InversionPolicy, Model, Obstacle, Phase, Pin,
    Script, StrainLimit, INTEGRATORS,
};
use crate::solver::admm::{AdmmParams, ContactParams, ContactVariant, ProxKind};
use crate::solver::jgs2::{ContactCoupling, Safeguard, SubspaceOptions, Variant};
use crate::solver::multilevel::{
    LagRefresh, MultilevelParams, MultilevelStop, Preconditioner, Rescue,
};
use crate::solver::qn::{QnMode, MAX_HISTORY, PAPER_ITERATIONS};
use crate::solver::{HessianFilter, StopRule};
use nalgebra::Vector3;

/// Run settings taken from the scene (the CLI may override them).
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Time step, s.
    pub h: f64,
    /// Number of steps.
    pub steps: usize,
    /// The solver (`--solver` may override the scene's). With [`RunConfig::auto_solver`] a
    /// placeholder (newton) until the runner replaces it by the rule's pick.
    pub solver: SolverKind,
    /// `[solver] name = "auto"` or `--solver auto`: the runner picks `solver` for the scene
    /// and the backend it runs on ([`crate::runner::auto`]) before building it.
    pub auto_solver: bool,
    /// Stop rule.
    pub stop: StopRule,
    /// Iteration cap per step, if set.
    pub max_iterations: Option<usize>,
    /// JGS2/VBD sweep (`[solver] variant`, `--variant`), if set; else Jacobi for JGS2,
    /// Gauss–Seidel for VBD.
    pub variant: Option<Variant>,
    /// JGS2/VBD safeguard (`[solver] safeguard`), if set; else `Cut` for JGS2, `Off` for VBD.
    pub safeguard: Option<Safeguard>,
    /// JGS2's contact coupling on the f64 CPU backend (`[solver] contact_coupling`; default
    /// held; the device keeps the partners held).
    pub contact_coupling: ContactCoupling,
    /// JGS2 subspace options (far-field tolerance and fit order from `[solver]`).
    pub subspace: SubspaceOptions,
    /// QN and DOT L-BFGS history m (`[solver] history`, default 5).
    pub qn_history: usize,
    /// DOT subdomains (`[solver] subdomains`; default the thread count, 1 for lbfgs-h).
    pub subdomains: Option<usize>,
    /// Multilevel options (`[solver]` keys `handles`, `n_cg`, `jump_factor`, `lag_refresh`,
    /// `subspace_stop`, `smoother`, `rescue_after`, `subspace_solve`, `line_search`; the stop rule and iteration cap are filled in by the runner).
    pub multilevel: MultilevelParams,
    /// Newton's eigenvalue filter (`[solver] eigen_filter`; `None`: not given, clamp).
    pub eigen_filter: Option<HessianFilter>,
    /// QN and ADMM stopping mode (`[solver] mode` and `iterations`, default the stop rule).
    pub qn_mode: QnMode,
    /// ADMM z-step (`[solver] prox`, default hyperelastic).
    pub admm_prox: ProxKind,
    /// ADMM multiplier on w² (`[solver] weight_scale`, default 1).
    pub admm_weight_scale: f64,
    /// ADMM Anderson depth (`[solver] anderson`, default 5; 0 off).
    pub admm_anderson: usize,
    /// ADMM residual-balancing penalty (`[solver] penalty`, default `balance`).
    pub admm_penalty: bool,
    /// ADMM obstacle contact and friction (`[solver]` keys `contact`, `contact_iterations`,
    /// `contact_tolerance`, `sor`, `friction`).
    pub admm_contact: ContactParams,
    /// Output options.
    pub output: OutputSpec,
    /// A static solve in `steps` load increments (`[simulation] static = true`).
    pub static_solve: bool,
}

impl RunConfig {
    /// Runs `choice` (`--solver` over the scene's): a named solver, or `auto`.
    pub fn set_solver(&mut self, choice: SolverChoice) {
        match choice {
            SolverChoice::Named(k) => {
                self.solver = k;
                self.auto_solver = false;
            }
            SolverChoice::Auto => self.auto_solver = true,
        }
    }
}

/// A scene turned into a model, an initial velocity field and run settings.
#[derive(Clone, Debug)]
pub struct BuiltScene {
    /// The model.
    pub model: Model,
    /// Initial velocity per vertex, m/s.
    pub velocity: Vec<[f64; 3]>,
    /// Run settings.
    pub config: RunConfig,
    /// Warnings (e.g. reoriented tets) to show the user.
    pub warnings: Vec<String>,
}

struct Ctx<'a> {
    scene: &'a Scene,
    /// Meshes given in memory by the name a `mesh.file` gives them ([`Scene::build_with_meshes`]).
    meshes: &'a MeshFiles,
}

/// Meshes held in memory, by the name a scene's `mesh.file` gives them: an embedder without a
/// file system (the browser) hands its mesh data to [`Scene::build_with_meshes`] under the name
/// its scene uses ([`crate::mesh::mesh_from_arrays`] checks them as the file readers do).
pub type MeshFiles = std::collections::BTreeMap<String, crate::mesh::LoadedMesh>;

impl Ctx<'_> {
    fn err(&self, key: impl Into<String>, msg: impl Into<String>) -> JelloError {
        JelloError::scene(&self.scene.path, key, msg)
    }
    /// Every component finite and of magnitude at most [`MAX_SCENE_VALUE`].
    fn finite(&self, key: &str, v: &[f64]) -> Result<()> {
        if let Some(x) = v.iter().find(|x| !x.is_finite()) {
            return Err(self.err(key, format!("must be finite, got {x}")));
        }
        if let Some(x) = v.iter().find(|x| x.abs() > MAX_SCENE_VALUE) {
            return Err(self.err(
                key,
                format!("magnitude {x:e} is above {MAX_SCENE_VALUE:e}, outside any physical use"),
            ));
        }
        Ok(())
    }

    /// A finite value `> 0` (`unit` names it in the message).
    fn positive(&self, key: &str, v: f64, unit: &str) -> Result<()> {
        self.finite(key, &[v])?;
        if v > 0.0 {
            Ok(())
        } else {
            Err(self.err(key, format!("must be > 0{unit}, got {v}")))
        }
    }

    /// A point (m): finite and within [`MAX_COORDINATE`] of the origin on every axis.
    fn point(&self, key: &str, p: &[f64; 3]) -> Result<()> {
        self.finite(key, p)?;
        if let Some(x) = p.iter().find(|x| x.abs() > MAX_COORDINATE) {
            return Err(self.err(
                key,
                format!(
                    "coordinate {x:e} m is farther than {MAX_COORDINATE:e} m from the origin \
                     (jello::limits::MAX_COORDINATE)"
                ),
            ));
        }
        Ok(())
    }

    /// A direction (an axis or a normal): finite and of non-zero, finite length, so it can be
    /// normalised. Returns the unit vector.
    fn direction(&self, key: &str, v: &[f64; 3]) -> Result<Vector3<f64>> {
        self.finite(key, v)?;
        let n = Vector3::from(*v).norm();
        if !(n.is_finite() && n >= f64::MIN_POSITIVE) {
            return Err(self.err(
                key,
                format!("must be a non-zero direction, got {v:?} (length {n:e})"),
            ));
        }
        Ok(Vector3::from(*v) / n)
    }
}

impl Scene {
    /// Validates every value and builds the model. Errors name the file and the dotted key.
    pub fn build(&self) -> Result<BuiltScene> {
        self.build_with_meshes(&MeshFiles::new())
    }

    /// [`Scene::build`], where a `mesh.file` that names an entry of `meshes` takes that mesh
    /// instead of reading the file (its warnings join the scene's).
    pub fn build_with_meshes(&self, meshes: &MeshFiles) -> Result<BuiltScene> {
        let cx = Ctx {
            scene: self,
            meshes,
        };
        let s = &self.spec;
        let h = s.simulation.h;
        let (h_min, h_max) = TIME_STEP_RANGE;
        if !(h.is_finite() && h > 0.0) {
            return Err(cx.err("simulation.h", format!("time step must be > 0 s, got {h}")));
        }
        if !(h_min..=h_max).contains(&h) {
            return Err(cx.err(
                "simulation.h",
                format!(
                    "time step {h:e} s is outside {h_min:e}..={h_max:e} s \
                     (jello::limits::TIME_STEP_RANGE)"
                ),
            ));
        }
        if s.simulation.steps == 0 {
            return Err(cx.err("simulation.steps", "must be ≥ 1"));
        }
        if s.simulation.steps > MAX_STEPS {
            return Err(cx.err(
                "simulation.steps",
                format!(
                    "{} steps is more than the cap of {MAX_STEPS} (jello::limits::MAX_STEPS)",
                    s.simulation.steps
                ),
            ));
        }
        cx.finite("simulation.gravity", &s.simulation.gravity)?;
        let config = self.run_config(&cx)?;
        if s.objects.is_empty() {
            return Err(cx.err("objects", "the scene has no objects"));
        }
        let mut mesh = TetMesh::default();
        let mut bodies = Vec::new();
        let mut materials = Vec::new();
        let mut density = Vec::new();
        let mut limits = Vec::new();
        let mut velocity = Vec::new();
        let mut warnings = Vec::new();
        for (i, obj) in s.objects.iter().enumerate() {
            let key = format!("objects[{i}]");
            let name = obj.name.clone().unwrap_or_else(|| format!("object{i}"));
            if bodies.iter().any(|b: &Body| b.name == name) {
                return Err(cx.err(
                    format!("{key}.name"),
                    format!("duplicate object name `{name}`"),
                ));
            }
            let mut m = self.object_mesh(&cx, &key, &obj.mesh, &mut warnings)?;
            let mesh_key = match &obj.mesh.file {
                Some(_) => format!("{key}.mesh.file"),
                None => format!("{key}.mesh"),
            };
            check_placed(&cx, &mesh_key, &m)?;
            self.transform(&cx, &key, &obj.transform, &mut m)?;
            let base = material(&cx, &format!("{key}.material"), &obj.material)?;
            check_masses(
                &cx,
                &format!("{key}.material.density"),
                &m,
                obj.material.density,
            )?;
            let mut elem_mat = vec![base; m.num_tets()];
            let base_limit = strain_limit(&cx, &format!("{key}.material"), &obj.material)?;
            let mut elem_limit = vec![base_limit; m.num_tets()];
            let mut elem_density = vec![obj.material.density; m.num_tets()];
            for (r, reg) in obj.regions.iter().enumerate() {
                let rkey = format!("{key}.regions[{r}]");
                let mat = material(&cx, &format!("{rkey}.material"), &reg.material)?;
                let limit = strain_limit(&cx, &format!("{rkey}.material"), &reg.material)?;
                check_masses(
                    &cx,
                    &format!("{rkey}.material.density"),
                    &m,
                    reg.material.density,
                )?;
                let region = region(&cx, &format!("{rkey}.region"), &reg.region)?;
                let mut hit = 0;
                for (t, tet) in m.tets.iter().enumerate() {
                    let c = tet.iter().fold([0.0; 3], |acc, &v| {
                        let p = m.positions[v as usize];
                        [
                            acc[0] + p[0] / 4.0,
                            acc[1] + p[1] / 4.0,
                            acc[2] + p[2] / 4.0,
                        ]
                    });
                    if region.contains(&c) {
                        elem_mat[t] = mat;
                        elem_limit[t] = limit;
                        elem_density[t] = reg.material.density;
                        hit += 1;
                    }
                }
                if hit == 0 {
                    return Err(
                        cx.err(format!("{rkey}.region"), "selects no element of the object")
                    );
                }
            }
            cx.finite(&format!("{key}.velocity"), &obj.velocity)?;
            let spin = match &obj.angular_velocity {
                Some(av) => {
                    let axis = cx.direction(&format!("{key}.angular_velocity.axis"), &av.axis)?;
                    cx.finite(&format!("{key}.angular_velocity.omega"), &[av.omega])?;
                    axis * av.omega
                }
                None => Vector3::zeros(),
            };
            let centroid = centroid(&m);
            for p in &m.positions {
                let v = Vector3::from(obj.velocity) + spin.cross(&(Vector3::from(*p) - centroid));
                if !v.iter().all(|x| x.is_finite()) {
                    return Err(cx.err(
                        format!("{key}.angular_velocity.omega"),
                        "gives a non-finite vertex velocity",
                    ));
                }
                velocity.push(v.into());
            }
            let v0 = mesh.positions.len();
            let t0 = mesh.tets.len();
            mesh.positions.extend_from_slice(&m.positions);
            mesh.tets
                .extend(m.tets.iter().map(|t| t.map(|v| v + v0 as u32)));
            bodies.push(Body {
                name,
                vertices: v0..mesh.positions.len(),
                tets: t0..mesh.tets.len(),
            });
            density.extend(elem_density);
            materials.extend(elem_mat);
            limits.extend(elem_limit);
        }
        let pins = self.pins(&cx, &mesh, &bodies)?;
        let (obstacle_keys, obstacles): (Vec<usize>, Vec<Obstacle>) =
            self.obstacles(&cx, &mesh)?.into_iter().unzip();
        let obstacle_meshes = self.mesh_obstacles(&cx, &bodies, &mut warnings)?;
        let diag = mesh
            .bounding_box()
            .map(|(lo, hi)| (Vector3::from(hi) - Vector3::from(lo)).norm())
            .unwrap_or(1.0);
        let dhat = match (s.contact.dhat, s.contact.dhat_relative) {
            (Some(_), Some(_)) => {
                return Err(cx.err(
                    "contact.dhat_relative",
                    "give d̂ either in metres (dhat) or relative to the bounding-box diagonal \
                     (dhat_relative), not both",
                ))
            }
            (Some(d), None) => d,
            (None, Some(r)) => {
                cx.positive("contact.dhat_relative", r, "")?;
                r * diag
            }
            (None, None) => 1e-3 * diag,
        };
        cx.positive("contact.dhat", dhat, " m")?;
        cx.positive("contact.kappa", s.contact.kappa, "")?;
        let model = Model::new(
            mesh,
            bodies,
            materials,
            density,
            s.simulation.gravity,
            pins,
            obstacles,
            BarrierParams {
                dhat,
                kappa: s.contact.kappa,
            },
        )
        .map_err(|e| cx.err("objects", e.to_string()))?;
        let forces = self.forces(&cx, &model.mesh, &model.bodies)?;
        let model = model
            .with_forces(forces)
            .map_err(|e| cx.err("forces", e.to_string()))?;
        let policy = match s.simulation.inversion.as_deref() {
            None | Some("forbid") => InversionPolicy::Forbid,
            Some("allow") => InversionPolicy::Allow,
            Some(other) => {
                return Err(cx.err(
                    "simulation.inversion",
                    format!("unknown policy `{other}` (expected forbid or allow)"),
                ))
            }
        };
        let model = model
            .with_inversion(policy)
            .map_err(|e| cx.err("simulation.inversion", e.to_string()))?;
        let integrator = match s.simulation.integrator.as_deref() {
            None => Integrator::default(),
            Some(name) => Integrator::parse(name).ok_or_else(|| {
                cx.err(
                    "simulation.integrator",
                    format!(
                        "unknown integrator `{name}` (expected {})",
                        INTEGRATORS.join(" or ")
                    ),
                )
            })?,
        };
        if integrator != Integrator::ImplicitEuler && s.simulation.static_solve {
            return Err(cx.err(
                "simulation.integrator",
                format!(
                    "`{}` integrates dynamics; a static solve (`static = true`) has no time \
                     integrator",
                    integrator.name()
                ),
            ));
        }
        let model = model.with_integrator(integrator);
        let limited = limits.iter().any(Option::is_some);
        let model = model
            .with_strain_limits(limits)
            .map_err(|e| cx.err("objects", e.to_string()))?;
        let model = if s.contact.ipc {
            if let Some(k) = s.contact.ipc_kappa {
                cx.positive("contact.ipc_kappa", k, " J/m⁴")?;
            }
            let flags = vec![s.contact.self_contact; model.bodies.len()];
            let model = model
                .with_contact(dhat, &flags, s.contact.ipc_kappa)
                .map_err(|e| cx.err("contact.ipc", e.to_string()))?
                .with_obstacle_meshes(obstacle_meshes)
                .map_err(|e| cx.err("obstacles", e.to_string()))?;
            friction(&cx, &s.contact, model)?
        } else {
            let c = &s.contact;
            for (key, set) in [
                ("contact.ipc_kappa", c.ipc_kappa.is_some()),
                ("contact.friction", c.friction.is_some()),
                ("contact.friction_pairs", !c.friction_pairs.is_empty()),
                ("contact.friction_velocity", c.friction_velocity.is_some()),
                (
                    "contact.friction_iterations",
                    c.friction_iterations.is_some(),
                ),
            ] {
                if set {
                    return Err(cx.err(key, "applies only with contact.ipc = true"));
                }
            }
            model
        };
        if let Some(sd) = config.subdomains {
            let ne = model.mesh.num_tets();
            if sd == 0 || sd > ne {
                return Err(cx.err(
                    "solver.subdomains",
                    format!("must be an integer in 1..={ne} (the element count), got {sd}"),
                ));
            }
        }
        if let Some(k) = config.multilevel.handles {
            let nv = model.num_vertices();
            if k > nv {
                return Err(cx.err(
                    "solver.handles",
                    format!("must be an integer in 1..={nv} (the vertex count), got {k}"),
                ));
            }
        }
        if limited && config.solver != SolverKind::Admm && !config.auto_solver {
            let key = s
                .objects
                .iter()
                .enumerate()
                .find_map(|(i, o)| {
                    if o.material.strain_limit.is_some() {
                        return Some(format!("objects[{i}].material.strain_limit"));
                    }
                    let r = o
                        .regions
                        .iter()
                        .position(|r| r.material.strain_limit.is_some())?;
                    Some(format!("objects[{i}].regions[{r}].material.strain_limit"))
                })
                .unwrap_or_else(|| "material.strain_limit".into());
            return Err(cx.err(
                key,
                format!(
                    "hard strain limits are enforced only by solver admm (this scene's solver is {})",
                    config.solver
                ),
            ));
        }
        // The start must be feasible for every part of every body, not only its vertices: a
        // sphere or box can sit between a surface's vertices, or inside a body whole.
        let x0: Vec<f64> = model.mesh.positions.iter().flatten().copied().collect();
        if let Some((o, what)) = model.first_overlap(&x0) {
            return Err(cx.err(format!("obstacles[{}]", obstacle_keys[o]), what));
        }
        Ok(BuiltScene {
            model,
            velocity,
            config,
            warnings,
        })
    }

    fn run_config(&self, cx: &Ctx) -> Result<RunConfig> {
        let s = &self.spec;
        let spec = &s.solver;
        let common = &spec.common;
        let (solver, auto_solver) = match spec.choice() {
            SolverChoice::Named(k) => (k, false),
            SolverChoice::Auto => (SolverKind::Newton, true),
        };
        // Both tolerances are checked whichever rule is chosen: a bad value is a mistake even
        // where it would go unused (the CLI's --stop may pick the other rule).
        let tolerance = common
            .tolerance
            .unwrap_or(SolverSpec::default_tolerance(s.contact.ipc));
        cx.positive("solver.tolerance", tolerance, "")?;
        cx.positive("solver.dx_tolerance", common.dx_tolerance, "")?;
        let stop = match common.stop {
            StopKind::Cn => StopRule::Cn { eps: tolerance },
            StopKind::Dx => StopRule::Dx {
                tol: common.dx_tolerance,
            },
        };
        if common.max_iterations == Some(0) {
            return Err(cx.err("solver.max_iterations", "must be ≥ 1"));
        }
        let mut config = RunConfig {
            h: s.simulation.h,
            steps: s.simulation.steps,
            solver,
            auto_solver,
            stop,
            max_iterations: common.max_iterations,
            variant: None,
            safeguard: None,
            contact_coupling: ContactCoupling::default(),
            subspace: subspace_options(cx, &spec.options.far_field())?,
            qn_history: 5,
            subdomains: None,
            multilevel: MultilevelParams::default(),
            eigen_filter: None,
            qn_mode: QnMode::Rule,
            admm_prox: ProxKind::Hyperelastic,
            admm_weight_scale: 1.0,
            admm_anderson: AdmmParams::default().anderson,
            admm_penalty: AdmmParams::default().penalty.adapt,
            admm_contact: ContactParams::default(),
            output: s.output.clone(),
            static_solve: s.simulation.static_solve,
        };
        let c = &mut config;
        match &spec.options {
            SolverOptions::Newton(o) => c.eigen_filter = o.eigen_filter.map(Into::into),
            SolverOptions::Jgs2(o) => {
                c.variant = o.variant.map(Into::into);
                c.safeguard = o.safeguard.map(Into::into);
                c.contact_coupling = o.contact_coupling.map(Into::into).unwrap_or_default();
            }
            SolverOptions::Vbd(o) => {
                c.variant = o.variant.map(Into::into);
                c.safeguard = o.safeguard.map(Into::into);
            }
            SolverOptions::Qn(o) => {
                c.qn_history = history(cx, o.history)?;
                c.qn_mode = mode(cx, o.mode, o.iterations)?;
            }
            SolverOptions::Dot(o) => {
                c.qn_history = history(cx, o.history)?;
                c.qn_mode = mode(cx, o.mode, o.iterations)?;
                c.eigen_filter = o.eigen_filter.map(Into::into);
                c.subdomains = o.subdomains;
            }
            SolverOptions::LbfgsH(o) => {
                c.qn_history = history(cx, o.history)?;
                c.qn_mode = mode(cx, o.mode, o.iterations)?;
                c.eigen_filter = o.eigen_filter.map(Into::into);
            }
            SolverOptions::Admm(o) => {
                c.qn_mode = mode(cx, o.mode, o.iterations)?;
                c.admm_prox = match o.prox {
                    Some(ProxChoice::Pd) => ProxKind::Pd,
                    _ => ProxKind::Hyperelastic,
                };
                c.admm_weight_scale = o.weight_scale.unwrap_or(1.0);
                if let Some(n) = o.anderson {
                    c.admm_anderson = n;
                }
                if let Some(p) = o.penalty {
                    c.admm_penalty = p == PenaltyChoice::Balance;
                }
                if !(c.admm_weight_scale.is_finite() && c.admm_weight_scale > 0.0) {
                    return Err(cx.err(
                        "solver.weight_scale",
                        format!("must be finite and > 0, got {}", c.admm_weight_scale),
                    ));
                }
                let contact = &mut c.admm_contact;
                if let Some(v) = o.contact {
                    contact.variant = match v {
                        ContactSolve::Uzawa => ContactVariant::Uzawa,
                        ContactSolve::Pgs => ContactVariant::Pgs,
                    };
                }
                if let Some(n) = o.contact_iterations {
                    contact.iterations = n;
                }
                if let Some(t) = o.contact_tolerance {
                    contact.tolerance = t;
                }
                if let Some(w) = o.sor {
                    contact.sor = w;
                }
                if let Some(mu) = o.friction {
                    contact.friction = mu;
                }
                if let Some(why) = contact.check() {
                    // `check` names the key first: "solver.<key> must …".
                    let (key, msg) = why.split_once(' ').unwrap_or((&why, ""));
                    return Err(cx.err(key, msg));
                }
            }
            SolverOptions::Multilevel(o) => c.multilevel = multilevel_params(cx, o)?,
            SolverOptions::Auto => {}
        }
        if c.eigen_filter == Some(HessianFilter::Adaptive) && solver != SolverKind::Newton {
            return Err(cx.err(
                "solver.eigen_filter",
                format!(
                    "adaptive applies only to solver newton ({solver} builds its Hessian once \
                     per step, so it takes clamp or abs)"
                ),
            ));
        }
        if s.output.every == 0 {
            return Err(cx.err("output.every", "must be ≥ 1"));
        }
        if s.output.vtu_per_object && !s.output.vtu {
            return Err(cx.err("output.vtu_per_object", "needs `output.vtu = true`"));
        }
        if s.output.png_size[0] == 0
            || s.output.png_size[1] == 0
            || s.output.png_size.iter().any(|&v| v > 8192)
        {
            return Err(cx.err("output.png_size", "each side must be in 1..=8192 pixels"));
        }
        Ok(config)
    }

    fn object_mesh(
        &self,
        cx: &Ctx,
        key: &str,
        spec: &MeshSpec,
        warnings: &mut Vec<String>,
    ) -> Result<TetMesh> {
        let key = format!("{key}.mesh");
        // Keys that belong to another source are mistakes, not silently ignored.
        let given = |names: &[&str]| -> Option<&'static str> {
            let present: [(&'static str, bool); 9] = [
                ("min", spec.min.is_some()),
                ("max", spec.max.is_some()),
                ("cells", spec.cells.is_some()),
                ("center", spec.center.is_some()),
                ("radius", spec.radius.is_some()),
                ("resolution", spec.resolution.is_some()),
                ("inner_radius", spec.inner_radius.is_some()),
                ("height", spec.height.is_some()),
                ("count", spec.count.is_some()),
            ];
            present
                .iter()
                .find(|(n, set)| *set && !names.contains(n))
                .map(|(n, _)| *n)
        };
        let stray = |used_by: &str, allowed: &[&str]| -> Result<()> {
            match given(allowed) {
                Some(k) => {
                    Err(cx.err(format!("{key}.{k}"), format!("does not apply to {used_by}")))
                }
                None => Ok(()),
            }
        };
        match (&spec.file, &spec.generator) {
            (Some(file), None) => {
                stray("a mesh file", &[])?;
                if let Some(given) = cx.meshes.get(file) {
                    warnings.extend(given.warnings.iter().cloned());
                    return Ok(given.mesh.clone());
                }
                let dir = self.path.parent().unwrap_or(std::path::Path::new("."));
                let path = dir.join(file);
                if !path.exists() {
                    return Err(cx.err(
                        format!("{key}.file"),
                        format!("mesh file {} does not exist", path.display()),
                    ));
                }
                let loaded = read_mesh(&path)?;
                warnings.extend(loaded.warnings);
                Ok(loaded.mesh)
            }
            (None, Some(g)) if g == "box" => {
                stray("the box generator", &["min", "max", "cells"])?;
                let (Some(min), Some(max), Some(cells)) = (spec.min, spec.max, spec.cells) else {
                    return Err(cx.err(&key, "the box generator needs min, max and cells"));
                };
                cx.point(&format!("{key}.min"), &min)?;
                cx.point(&format!("{key}.max"), &max)?;
                if (0..3).any(|k| max[k] <= min[k]) {
                    return Err(cx.err(format!("{key}.max"), "must exceed min on every axis"));
                }
                if cells.contains(&0) {
                    return Err(cx.err(format!("{key}.cells"), "each count must be ≥ 1"));
                }
                cell_total(cx, &key, cells)?;
                Ok(box_grid(min, max, cells))
            }
            (None, Some(g)) if g == "ball" => {
                stray("the ball generator", &["center", "radius", "resolution"])?;
                let (Some(center), Some(radius)) = (spec.center, spec.radius) else {
                    return Err(cx.err(&key, "the ball generator needs center and radius"));
                };
                cx.point(&format!("{key}.center"), &center)?;
                cx.positive(&format!("{key}.radius"), radius, " m")?;
                if radius > MAX_COORDINATE {
                    return Err(cx.err(
                        format!("{key}.radius"),
                        format!("{radius:e} m is above {MAX_COORDINATE:e} m"),
                    ));
                }
                let res = spec.resolution.unwrap_or(8);
                let max_res = ball_max_resolution();
                if !(2..=max_res).contains(&res) {
                    return Err(cx.err(
                        format!("{key}.resolution"),
                        format!(
                            "must be in 2..={max_res} (at most {MAX_GENERATOR_CELLS} cells, \
                             jello::limits::MAX_GENERATOR_CELLS), got {res}"
                        ),
                    ));
                }
                Ok(ball(center, radius, res))
            }
            (None, Some(g)) if g == "ring" => {
                let keys = ["center", "radius", "inner_radius", "height", "cells"];
                stray("the ring generator", &keys)?;
                let (center, net) = ring_keys(cx, &key, spec, "ring")?;
                Ok(ring(
                    center,
                    net.inner_radius,
                    net.radius,
                    net.height,
                    net.cells,
                ))
            }
            (None, Some(g)) if g == "ring_net" => {
                let keys = [
                    "center",
                    "radius",
                    "inner_radius",
                    "height",
                    "cells",
                    "count",
                ];
                stray("the ring_net generator", &keys)?;
                let (center, net) = ring_keys(cx, &key, spec, "ring_net")?;
                let Some(count) = spec.count else {
                    return Err(cx.err(&key, "the ring_net generator needs count"));
                };
                if count.contains(&0) {
                    return Err(cx.err(format!("{key}.count"), "each count must be ≥ 1"));
                }
                let gap = ring_net_clearance(&net);
                if gap <= 0.0 {
                    return Err(cx.err(
                        format!("{key}.height"),
                        format!(
                            "the rings would intersect (clearance {gap:.3e} m): make height or \
                             the wall (radius − inner_radius) thinner, or the hole wider"
                        ),
                    ));
                }
                // Rings in all: nx·nz flat ones, (nx − 1)·nz + nx·(nz − 1) links.
                let [nx, nz] = count;
                let rings = nx
                    .checked_mul(nz)
                    .and_then(|f| f.checked_mul(3))
                    .map(|r| r - nx - nz)
                    .unwrap_or(usize::MAX);
                let [a, b, c] = net.cells;
                cell_total(cx, &key, [a.saturating_mul(rings), b, c])?;
                Ok(ring_net(center, count, &net))
            }
            (None, Some(g)) => Err(cx.err(
                format!("{key}.generator"),
                format!("unknown generator `{g}` (expected box, ball, ring or ring_net)"),
            )),
            _ => Err(cx.err(&key, "give exactly one of `file` or `generator`")),
        }
    }

    /// Applies the transform in the order fit → scale → rotate → translate. After each step the
    /// mesh must still be placeable (finite, within [`MAX_COORDINATE`], no tet flattened by
    /// round-off or under/overflow), else the step's key is named: `scale = 1e-300` flattens
    /// every tet to zero volume, a huge `translate` rounds vertices together.
    fn transform(&self, cx: &Ctx, key: &str, t: &TransformSpec, m: &mut TetMesh) -> Result<()> {
        let key = format!("{key}.transform");
        if let Some(fit) = t.fit {
            let k = match fit {
                FitSpec::Extent(_) => format!("{key}.fit"),
                FitSpec::Anchored(_) => format!("{key}.fit.extent"),
            };
            cx.positive(&k, fit.extent(), " m")?;
            m.fit_largest_extent(fit.extent())
                .map_err(|e| cx.err(&k, e.to_string()))?;
            if fit.anchor() == FitAnchor::Min {
                if let Some((lo, _)) = m.bounding_box() {
                    m.translate(lo.map(|v| -v));
                }
            }
            check_placed(cx, &k, m)?;
        }
        if let Some(s) = t.scale {
            let k = format!("{key}.scale");
            cx.positive(&k, s, "")?;
            m.scale(s).map_err(|e| cx.err(&k, e.to_string()))?;
            check_placed(cx, &k, m)?;
        }
        if let Some(r) = &t.rotate {
            cx.direction(&format!("{key}.rotate.axis"), &r.axis)?;
            let k = format!("{key}.rotate.degrees");
            cx.finite(&k, &[r.degrees])?;
            m.rotate(r.axis, r.degrees)
                .map_err(|e| cx.err(format!("{key}.rotate"), e.to_string()))?;
            check_placed(cx, &format!("{key}.rotate"), m)?;
        }
        if let Some(d) = t.translate {
            let k = format!("{key}.translate");
            cx.finite(&k, &d)?;
            m.translate(d);
            check_placed(cx, &k, m)?;
        }
        Ok(())
    }

    /// The pins. Two pins selecting the same vertex are an error naming both: each vertex
    /// follows one script, and letting the later pin win silently would drop the other's.
    fn pins(&self, cx: &Ctx, mesh: &TetMesh, bodies: &[Body]) -> Result<Vec<Pin>> {
        let mut out: Vec<Pin> = Vec::new();
        // Which pin holds each vertex so far (u32::MAX: none).
        let mut owner = vec![u32::MAX; mesh.num_vertices()];
        for (i, p) in self.spec.pins.iter().enumerate() {
            let key = format!("pins[{i}]");
            let script = script(cx, &format!("{key}.script"), &p.script)?;
            let vertices = select(cx, &key, mesh, bodies, p.object.as_deref(), &p.region)?;
            let clash: Vec<u32> = vertices
                .iter()
                .copied()
                .filter(|&v| owner[v as usize] != u32::MAX)
                .collect();
            if let Some(&v) = clash.first() {
                let other = owner[v as usize];
                let shared = clash
                    .iter()
                    .filter(|&&w| owner[w as usize] == other)
                    .count();
                let x = mesh.positions[v as usize];
                return Err(cx.err(
                    format!("{key}.region"),
                    format!(
                        "`pins[{other}]` and `{key}` select the same {shared} vertices (e.g. \
                         vertex {v} at ({}, {}, {})): each vertex can follow one script; narrow \
                         one region or restrict it with `object`",
                        x[0], x[1], x[2]
                    ),
                ));
            }
            for &v in &vertices {
                owner[v as usize] = i as u32;
            }
            let start = vertices
                .iter()
                .map(|&v| mesh.positions[v as usize])
                .collect();
            out.push(Pin {
                vertices,
                start,
                script,
            });
        }
        Ok(out)
    }

    fn forces(&self, cx: &Ctx, mesh: &TetMesh, bodies: &[Body]) -> Result<Vec<ExternalForce>> {
        let mut out = Vec::new();
        for (i, f) in self.spec.forces.iter().enumerate() {
            let key = format!("forces[{i}]");
            let vertices = select(cx, &key, mesh, bodies, f.object.as_deref(), &f.region)?;
            cx.finite(&format!("{key}.force"), &f.force)?;
            cx.finite(&format!("{key}.start"), &[f.start])?;
            // `end` may be +∞ (the default: never ends).
            if f.end.is_nan() || f.end <= f.start {
                return Err(cx.err(
                    format!("{key}.end"),
                    format!(
                        "must be after start = {} s (or left out: the force never ends), got {}",
                        f.start, f.end
                    ),
                ));
            }
            out.push(ExternalForce {
                vertices,
                force: f.force,
                start: f.start,
                end: f.end,
            });
        }
        Ok(out)
    }

    /// The analytic obstacles, each with its index in `[[obstacles]]` (mesh obstacles are
    /// [`Self::mesh_obstacles`]).
    fn obstacles(&self, cx: &Ctx, mesh: &TetMesh) -> Result<Vec<(usize, Obstacle)>> {
        let g = Vector3::from(self.spec.simulation.gravity);
        let mut out = Vec::new();
        for (i, o) in self.spec.obstacles.iter().enumerate() {
            let key = format!("obstacles[{i}]");
            let obs = match o {
                ObstacleSpec::Mesh { .. } => continue,
                ObstacleSpec::Ground { height } => {
                    cx.point(&format!("{key}.height"), &[*height, 0.0, 0.0])?;
                    // "Up" is against gravity; +y when there is no gravity.
                    let up = if g.norm() > 0.0 {
                        -g.normalize()
                    } else {
                        Vector3::y()
                    };
                    Obstacle::half_space(up.into(), *height)
                }
                ObstacleSpec::HalfSpace { normal, offset } => {
                    let n = cx.direction(&format!("{key}.normal"), normal)?;
                    cx.finite(&format!("{key}.offset"), &[*offset])?;
                    // The plane sits at offset/|normal| along the unit normal.
                    let at = offset / Vector3::from(*normal).norm();
                    cx.point(&format!("{key}.offset"), &[at, 0.0, 0.0])?;
                    Obstacle::half_space(n.into(), at)
                }
                ObstacleSpec::Box { min, max } => {
                    cx.point(&format!("{key}.min"), min)?;
                    cx.point(&format!("{key}.max"), max)?;
                    if (0..3).any(|k| max[k] <= min[k]) {
                        return Err(cx.err(format!("{key}.max"), "must exceed min on every axis"));
                    }
                    Obstacle::Box {
                        min: *min,
                        max: *max,
                    }
                }
                ObstacleSpec::Sphere { center, radius } => {
                    cx.point(&format!("{key}.center"), center)?;
                    cx.positive(&format!("{key}.radius"), *radius, " m")?;
                    if *radius > MAX_COORDINATE {
                        return Err(cx.err(
                            format!("{key}.radius"),
                            format!("{radius:e} m is above {MAX_COORDINATE:e} m"),
                        ));
                    }
                    Obstacle::Sphere {
                        center: *center,
                        radius: *radius,
                    }
                }
            };
            // The initial state must be feasible: no vertex on or inside an obstacle.
            if let Some(v) = (0..mesh.num_vertices())
                .find(|&v| obs.distance(&Vector3::from(mesh.positions[v])).d <= 0.0)
            {
                return Err(cx.err(
                    &key,
                    format!("vertex {v} starts inside or on this obstacle"),
                ));
            }
            out.push((i, obs));
        }
        Ok(out)
    }

    /// The triangle-mesh obstacles, read and placed (`objects`: the objects' names, which
    /// obstacle names must not repeat). Each needs `[contact] ipc = true`.
    fn mesh_obstacles(
        &self,
        cx: &Ctx,
        objects: &[Body],
        warnings: &mut Vec<String>,
    ) -> Result<Vec<ObstacleMesh>> {
        let mut out: Vec<ObstacleMesh> = Vec::new();
        for (i, o) in self.spec.obstacles.iter().enumerate() {
            let ObstacleSpec::Mesh {
                path,
                name,
                transform,
                script: script_spec,
            } = o
            else {
                continue;
            };
            let key = format!("obstacles[{i}]");
            if !self.spec.contact.ipc {
                return Err(cx.err(
                    format!("{key}.type"),
                    "a mesh obstacle acts through IPC contact: set contact.ipc = true",
                ));
            }
            let name = name.clone().unwrap_or_else(|| format!("obstacle{i}"));
            if objects.iter().any(|b| b.name == name) || out.iter().any(|m| m.name == name) {
                return Err(cx.err(
                    format!("{key}.name"),
                    format!("`{name}` is already the name of an object or obstacle"),
                ));
            }
            let dir = self.path.parent().unwrap_or(std::path::Path::new("."));
            let file = dir.join(path);
            if !file.exists() {
                return Err(cx.err(
                    format!("{key}.path"),
                    format!("mesh file {} does not exist", file.display()),
                ));
            }
            // The reader's error names the file (and the line or byte where it has one).
            let read = read_triangle_mesh(&file)
                .map_err(|e| cx.err(format!("{key}.path"), e.to_string()))?;
            warnings.extend(
                read.warnings
                    .iter()
                    .map(|w| format!("{key}: {}: {w}", file.display())),
            );
            let mut placed = TetMesh {
                positions: read.positions,
                tets: Vec::new(),
            };
            self.transform(cx, &key, transform, &mut placed)?;
            // A triangle flattened to a segment or a point has no normal: its distances and
            // their derivatives are undefined.
            let p = &placed.positions;
            if let Some(t) = read.triangles.iter().position(|t| {
                let [a, b, c] = t.map(|v| Vector3::from(p[v as usize]));
                let area = (b - a).cross(&(c - a)).norm();
                !(area.is_finite() && area > 0.0)
            }) {
                let tri = read.triangles[t];
                return Err(cx.err(
                    format!("{key}.path"),
                    format!(
                        "{}: triangle {t} (vertices {} {} {}) has zero area after placement",
                        file.display(),
                        tri[0],
                        tri[1],
                        tri[2]
                    ),
                ));
            }
            let script = script(cx, &format!("{key}.script"), script_spec)?;
            out.push(ObstacleMesh {
                name,
                positions: placed.positions,
                triangles: read.triangles,
                script,
            });
        }
        Ok(out)
    }
}

/// A validated script (`key` names the `script` table).
fn script(cx: &Ctx, key: &str, spec: &ScriptSpec) -> Result<Script> {
    Ok(match spec {
        ScriptSpec::Fixed => Script::Fixed,
        ScriptSpec::Translate { velocity } => {
            cx.finite(&format!("{key}.velocity"), velocity)?;
            Script::Translate {
                velocity: *velocity,
            }
        }
        ScriptSpec::Rotate {
            center,
            axis,
            omega,
        } => {
            cx.point(&format!("{key}.center"), center)?;
            cx.direction(&format!("{key}.axis"), axis)?;
            cx.finite(&format!("{key}.omega"), &[*omega])?;
            Script::Rotate {
                center: *center,
                axis: *axis,
                omega: *omega,
            }
        }
        ScriptSpec::Keyframes { phases } => Script::Keyframes {
            phases: keyframes(cx, &format!("{key}.phases"), phases)?,
        },
    })
}

/// The validated phases of a keyframed script (`key` names the `phases` array).
fn keyframes(cx: &Ctx, key: &str, phases: &[PhaseSpec]) -> Result<Vec<Phase>> {
    if phases.is_empty() {
        return Err(cx.err(key, "a keyframed script needs at least one phase"));
    }
    let mut out = Vec::with_capacity(phases.len());
    for (j, p) in phases.iter().enumerate() {
        let key = format!("{key}[{j}]");
        cx.finite(&format!("{key}.start"), &[p.start])?;
        cx.finite(&format!("{key}.end"), &[p.end])?;
        if p.end <= p.start {
            return Err(cx.err(
                format!("{key}.end"),
                format!("must be after start = {} s, got {} s", p.start, p.end),
            ));
        }
        if p.rotate.is_none() && p.translate.is_none() {
            return Err(cx.err(
                &key,
                "a phase needs `rotate` and/or `translate` (a script holds still between \
                 phases by itself)",
            ));
        }
        let (center, axis, angle) = match &p.rotate {
            Some(r) => {
                cx.point(&format!("{key}.rotate.center"), &r.center)?;
                cx.finite(&format!("{key}.rotate.degrees"), &[r.degrees])?;
                // A zero axis is harmless only when nothing turns.
                if r.degrees == 0.0 {
                    cx.finite(&format!("{key}.rotate.axis"), &r.axis)?;
                } else {
                    cx.direction(&format!("{key}.rotate.axis"), &r.axis)?;
                }
                (r.center, r.axis, r.degrees.to_radians())
            }
            None => ([0.0; 3], [1.0, 0.0, 0.0], 0.0),
        };
        let translation = p.translate.unwrap_or([0.0; 3]);
        cx.finite(&format!("{key}.translate"), &translation)?;
        out.push(Phase {
            start: p.start,
            end: p.end,
            center,
            axis,
            angle,
            translation,
        });
    }
    Ok(out)
}

/// The vertices of `object` (or all) inside `region`; an error when none is selected.
/// `[contact]`'s friction keys onto a model with IPC contact.
fn friction(cx: &Ctx, c: &crate::scene::spec::ContactSpec, model: Model) -> Result<Model> {
    use crate::contact::friction::FrictionParams;
    let mu = c.friction.unwrap_or(0.0);
    cx.finite("contact.friction", &[mu])?;
    if mu < 0.0 {
        return Err(cx.err("contact.friction", format!("must be ≥ 0, got {mu}")));
    }
    let eps_v = c.friction_velocity.unwrap_or(FrictionParams::DEFAULT_EPS_V);
    cx.positive("contact.friction_velocity", eps_v, " m/s")?;
    let passes = c.friction_iterations.unwrap_or(1);
    if passes == 0 {
        return Err(cx.err(
            "contact.friction_iterations",
            "must be ≥ 1 (lagging passes per step)",
        ));
    }
    let nb = model
        .contact
        .as_ref()
        .map_or(0, |ipc| ipc.mesh.bodies.len());
    let mut params = FrictionParams::uniform(nb, mu, eps_v, passes);
    for (i, p) in c.friction_pairs.iter().enumerate() {
        let key = format!("contact.friction_pairs[{i}]");
        // Collision bodies: the objects, then the mesh obstacles.
        let bodies: Vec<&str> = model
            .contact
            .as_ref()
            .map(|ipc| ipc.mesh.bodies.iter().map(|b| b.name.as_str()).collect())
            .unwrap_or_default();
        let index = |name: &str| {
            bodies.iter().position(|b| *b == name).ok_or_else(|| {
                cx.err(
                    format!("{key}.objects"),
                    format!(
                        "no object or mesh obstacle `{name}` (there are: {})",
                        bodies.join(", ")
                    ),
                )
            })
        };
        let (a, b) = (index(&p.objects[0])?, index(&p.objects[1])?);
        cx.finite(&format!("{key}.mu"), &[p.mu])?;
        if p.mu < 0.0 {
            return Err(cx.err(format!("{key}.mu"), format!("must be ≥ 0, got {}", p.mu)));
        }
        params.set(a, b, p.mu);
    }
    model
        .with_friction(params)
        .map_err(|e| cx.err("contact.friction", e.to_string()))
}

/// The keys a ring and a ring net share — `center`, `radius`, `inner_radius`, `height` and
/// `cells` of `{key}` — checked (each named on error): the centre (m) and the rings' geometry.
fn ring_keys(cx: &Ctx, key: &str, spec: &MeshSpec, what: &str) -> Result<([f64; 3], RingNet)> {
    let (Some(center), Some(outer), Some(inner), Some(height), Some(cells)) = (
        spec.center,
        spec.radius,
        spec.inner_radius,
        spec.height,
        spec.cells,
    ) else {
        return Err(cx.err(
            key,
            format!("the {what} generator needs center, radius, inner_radius, height and cells"),
        ));
    };
    cx.point(&format!("{key}.center"), &center)?;
    for (k, v) in [
        ("radius", outer),
        ("inner_radius", inner),
        ("height", height),
    ] {
        cx.positive(&format!("{key}.{k}"), v, " m")?;
        if v > MAX_COORDINATE {
            return Err(cx.err(
                format!("{key}.{k}"),
                format!("{v:e} m is above {MAX_COORDINATE:e} m"),
            ));
        }
    }
    if inner >= outer {
        return Err(cx.err(
            format!("{key}.inner_radius"),
            format!("must be below radius ({outer} m), got {inner} m"),
        ));
    }
    if cells[0] < 3 || cells[1] == 0 || cells[2] == 0 {
        return Err(cx.err(
            format!("{key}.cells"),
            format!("[around ≥ 3, across ≥ 1, along ≥ 1], got {cells:?}"),
        ));
    }
    cell_total(cx, key, cells)?;
    Ok((
        center,
        RingNet {
            radius: outer,
            inner_radius: inner,
            height,
            cells,
        },
    ))
}

/// Errors (naming `{key}.cells`) when a generator's `cells` hold more than
/// [`MAX_GENERATOR_CELLS`] cells in all; the product is checked, so `[2^40, 2^40, 2^40]` does
/// not wrap around to a small total.
fn cell_total(cx: &Ctx, key: &str, cells: [usize; 3]) -> Result<()> {
    let total = cells
        .iter()
        .try_fold(1usize, |a, &c| a.checked_mul(c))
        .filter(|&t| t <= MAX_GENERATOR_CELLS);
    if total.is_none() {
        return Err(cx.err(
            format!("{key}.cells"),
            format!(
                "{cells:?} is more than {MAX_GENERATOR_CELLS} cells in all \
                 (jello::limits::MAX_GENERATOR_CELLS)"
            ),
        ));
    }
    Ok(())
}

fn select(
    cx: &Ctx,
    key: &str,
    mesh: &TetMesh,
    bodies: &[Body],
    object: Option<&str>,
    r: &RegionSpec,
) -> Result<Vec<u32>> {
    let range = match object {
        Some(name) => bodies
            .iter()
            .find(|b| b.name == name)
            .map(|b| b.vertices.clone())
            .ok_or_else(|| cx.err(format!("{key}.object"), format!("no object named `{name}`")))?,
        None => 0..mesh.num_vertices(),
    };
    let region = region(cx, &format!("{key}.region"), r)?;
    let vertices: Vec<u32> = range
        .filter(|&v| region.contains(&mesh.positions[v]))
        .map(|v| v as u32)
        .collect();
    if vertices.is_empty() {
        return Err(cx.err(format!("{key}.region"), "selects no vertex"));
    }
    Ok(vertices)
}

/// The largest ball `resolution` within [`MAX_GENERATOR_CELLS`]: the generator rounds it up to
/// an even `n` and makes `n³` cells.
pub fn ball_max_resolution() -> usize {
    let mut n = 2usize;
    while (n + 2).pow(3) <= MAX_GENERATOR_CELLS {
        n += 2;
    }
    n
}

/// A mesh placed in the scene must be simulable: every vertex finite and within
/// [`MAX_COORDINATE`], every tet positively oriented with a volume that is a normal f64 above the
/// readers' degeneracy threshold ([`crate::mesh::DEGENERATE_REL_VOLUME`] × mean edge³). `key`
/// names what made it so (the mesh source or a transform step).
fn check_placed(cx: &Ctx, key: &str, m: &TetMesh) -> Result<()> {
    if let Some((v, p)) = m
        .positions
        .iter()
        .enumerate()
        .find(|(_, p)| p.iter().any(|x| x.is_nan() || x.abs() > MAX_COORDINATE))
    {
        return Err(cx.err(
            key,
            format!(
                "puts vertex {v} at {p:?}, beyond {MAX_COORDINATE:e} m from the origin \
                 (jello::limits::MAX_COORDINATE) or not finite"
            ),
        ));
    }
    let h = m.mean_edge_length();
    let tol = crate::mesh::DEGENERATE_REL_VOLUME * h * h * h;
    for t in 0..m.num_tets() {
        let v = m.signed_volume(t);
        if !(v.is_finite() && v > tol && v >= f64::MIN_POSITIVE) {
            return Err(cx.err(
                key,
                format!(
                    "leaves tet {t} degenerate or inverted (volume {v:.3e} m³, mean edge \
                     {h:.3e} m): the mesh is too small, too large or too far out for f64"
                ),
            ));
        }
    }
    Ok(())
}

/// Every vertex mass share `density · volume / 4` of `m` must be a normal f32 (the GPU keeps
/// masses in f32): `key` names the density responsible.
fn check_masses(cx: &Ctx, key: &str, m: &TetMesh, density: f64) -> Result<()> {
    let (lo, hi) = (0..m.num_tets())
        .map(|t| density * m.signed_volume(t) / 4.0)
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), x| {
            (lo.min(x), hi.max(x))
        });
    let (min, max) = (f32::MIN_POSITIVE as f64, f32::MAX as f64);
    if !(lo >= min && hi <= max) {
        return Err(cx.err(
            key,
            format!(
                "gives vertex mass shares from {lo:.3e} to {hi:.3e} kg, outside the f32 range \
                 {min:.1e}..{max:.1e} kg the GPU needs"
            ),
        ));
    }
    Ok(())
}

fn centroid(m: &TetMesh) -> Vector3<f64> {
    let n = m.num_vertices().max(1) as f64;
    m.positions
        .iter()
        .fold(Vector3::zeros(), |a, p| a + Vector3::from(*p))
        / n
}

fn material(cx: &Ctx, key: &str, m: &MaterialSpec) -> Result<Material> {
    let model = MaterialModel::from_name(&m.model).ok_or_else(|| {
        let names: Vec<_> = MaterialModel::ALL.iter().map(|m| m.name()).collect();
        cx.err(
            format!("{key}.model"),
            format!(
                "unknown model `{}` (expected one of: {})",
                m.model,
                names.join(", ")
            ),
        )
    })?;
    cx.positive(&format!("{key}.density"), m.density, " kg/m³")?;
    match (m.youngs_modulus, m.poisson_ratio, m.mu, m.lambda) {
        (Some(e), Some(nu), None, None) => {
            cx.positive(&format!("{key}.youngs_modulus"), e, " Pa")?;
            if !(nu.is_finite() && nu > -1.0 && nu < 0.5) {
                return Err(cx.err(
                    format!("{key}.poisson_ratio"),
                    format!("must lie in (-1, 0.5), got {nu}"),
                ));
            }
            Material::from_young_poisson(model, e, nu).map_err(|e| cx.err(key, e.to_string()))
        }
        (None, None, Some(mu), lambda) => {
            cx.finite(&format!("{key}.mu"), &[mu])?;
            if let Some(l) = lambda {
                cx.finite(&format!("{key}.lambda"), &[l])?;
            }
            Material::new(model, mu, lambda.unwrap_or(0.0)).map_err(|e| cx.err(key, e.to_string()))
        }
        _ => Err(cx.err(
            key,
            "give either youngs_modulus + poisson_ratio, or mu (+ lambda)",
        )),
    }
}

/// The validated `strain_limit` of a material (`key` names the material table).
fn strain_limit(cx: &Ctx, key: &str, m: &MaterialSpec) -> Result<Option<StrainLimit>> {
    let Some([lo, hi]) = m.strain_limit else {
        return Ok(None);
    };
    let key = format!("{key}.strain_limit");
    if m.model == "linear" {
        return Err(cx.err(
            key,
            "needs an isotropic material (linear elasticity is not a function of the singular \
             values of F)",
        ));
    }
    StrainLimit::new(lo, hi)
        .map(Some)
        .map_err(|why| cx.err(key, why))
}

/// A validated region.
pub(crate) enum Region {
    Box {
        min: [f64; 3],
        max: [f64; 3],
    },
    Slab {
        n: Vector3<f64>,
        offset: f64,
        half: f64,
    },
    Sphere {
        c: Vector3<f64>,
        r_in: f64,
        r_out: f64,
    },
}

impl Region {
    pub(crate) fn contains(&self, p: &[f64; 3]) -> bool {
        match self {
            Region::Box { min, max } => (0..3).all(|k| p[k] >= min[k] && p[k] <= max[k]),
            Region::Slab { n, offset, half } => (n.dot(&Vector3::from(*p)) - offset).abs() <= *half,
            Region::Sphere { c, r_in, r_out } => {
                let d = (Vector3::from(*p) - c).norm();
                d >= *r_in && d <= *r_out
            }
        }
    }
}

fn region(cx: &Ctx, key: &str, r: &RegionSpec) -> Result<Region> {
    match r {
        RegionSpec::Box { min, max } => {
            cx.point(&format!("{key}.box.min"), min)?;
            cx.point(&format!("{key}.box.max"), max)?;
            if (0..3).any(|k| max[k] < min[k]) {
                return Err(cx.err(format!("{key}.box.max"), "must be ≥ min on every axis"));
            }
            Ok(Region::Box {
                min: *min,
                max: *max,
            })
        }
        RegionSpec::Slab {
            normal,
            offset,
            thickness,
        } => {
            let n = cx.direction(&format!("{key}.slab.normal"), normal)?;
            cx.finite(&format!("{key}.slab.offset"), &[*offset])?;
            // The plane sits at offset/|normal| along the unit normal.
            let at = *offset / Vector3::from(*normal).norm();
            cx.point(&format!("{key}.slab.offset"), &[at, 0.0, 0.0])?;
            cx.positive(&format!("{key}.slab.thickness"), *thickness, " m")?;
            Ok(Region::Slab {
                n,
                offset: at,
                half: thickness / 2.0,
            })
        }
        RegionSpec::Sphere {
            center,
            radius,
            inner_radius,
        } => {
            cx.point(&format!("{key}.sphere.center"), center)?;
            cx.positive(&format!("{key}.sphere.radius"), *radius, " m")?;
            cx.finite(&format!("{key}.sphere.inner_radius"), &[*inner_radius])?;
            if *inner_radius < 0.0 || inner_radius >= radius {
                return Err(cx.err(
                    format!("{key}.sphere.inner_radius"),
                    format!("must be in [0, radius = {radius}) m, got {inner_radius}"),
                ));
            }
            Ok(Region::Sphere {
                c: Vector3::from(*center),
                r_in: *inner_radius,
                r_out: *radius,
            })
        }
    }
}

/// The JGS2 subspace options of the far-field keys (node fits when `far_tolerance` or
/// `far_order` is given, else the H-matrix, with `far_hmatrix_eps` when given).
fn subspace_options(cx: &Ctx, f: &FarFieldSpec) -> Result<SubspaceOptions> {
    let mut subspace = SubspaceOptions::default();
    if let Some(t) = f.far_tolerance {
        if !(t.is_finite() && t >= 0.0) {
            return Err(cx.err(
                "solver.far_tolerance",
                format!("must be finite and ≥ 0, got {t}"),
            ));
        }
        subspace.precompute.far_tolerance = t;
    }
    if let Some(o) = f.far_order {
        if o > 1 {
            return Err(cx.err(
                "solver.far_order",
                format!("must be 0 (node means) or 1 (linear fits), got {o}"),
            ));
        }
        subspace.precompute.far_order = o;
    }
    // Node-fit keys choose node fits (the default far field is the H-matrix).
    if f.far_tolerance.is_some() || f.far_order.is_some() {
        if f.far_hmatrix_eps.is_some() {
            return Err(cx.err(
                "solver.far_hmatrix_eps",
                "the H-matrix far field has no far_tolerance or far_order (those are \
                 node-fit keys): give one kind",
            ));
        }
        subspace.precompute.far_hmatrix = None;
    }
    if let Some(eps) = f.far_hmatrix_eps {
        if !(eps.is_finite() && eps > 0.0) {
            return Err(cx.err(
                "solver.far_hmatrix_eps",
                format!("must be finite and > 0, got {eps}"),
            ));
        }
        subspace.precompute.far_hmatrix = Some(jello_precompute::hmatrix::HMatrixOptions {
            eps,
            ..Default::default()
        });
    }
    Ok(subspace)
}

/// The L-BFGS history m (default 5), an integer in 0..=[`MAX_HISTORY`].
fn history(cx: &Ctx, m: Option<usize>) -> Result<usize> {
    let m = m.unwrap_or(5);
    if m > MAX_HISTORY {
        return Err(cx.err(
            "solver.history",
            format!("must be an integer in 0..={MAX_HISTORY}, got {m}"),
        ));
    }
    Ok(m)
}

/// The stopping mode of `mode` and `iterations` (default the stop rule; `fixed` defaults to
/// [`PAPER_ITERATIONS`]).
fn mode(cx: &Ctx, mode: Option<ModeKind>, iterations: Option<usize>) -> Result<QnMode> {
    match mode.unwrap_or(ModeKind::Rule) {
        ModeKind::Rule => match iterations {
            Some(_) => Err(cx.err(
                "solver.iterations",
                "applies only to mode = \"fixed\" (the stop rule decides otherwise)",
            )),
            None => Ok(QnMode::Rule),
        },
        ModeKind::Fixed => match iterations.unwrap_or(PAPER_ITERATIONS) {
            0 => Err(cx.err("solver.iterations", "must be ≥ 1")),
            n => Ok(QnMode::Fixed(n)),
        },
    }
}

/// The multilevel solver's keys, range-checked (the handle count against the mesh where the
/// model is built).
fn multilevel_params(cx: &Ctx, s: &MultilevelSpec) -> Result<MultilevelParams> {
    let mut p = MultilevelParams::default();
    if let Some(k) = s.handles {
        if k == 0 {
            return Err(cx.err("solver.handles", "must be ≥ 1"));
        }
        p.handles = Some(k);
    }
    if let Some(n) = s.n_cg {
        if n == 0 {
            return Err(cx.err("solver.n_cg", "must be ≥ 1"));
        }
        p.n_cg = Some(n);
    }
    if let Some(c) = s.jump_factor {
        cx.positive("solver.jump_factor", c, "")?;
        p.jump_factor = c;
    }
    if let Some(lag) = s.lag_refresh {
        p.lag = match lag {
            LagRefreshKind::Adaptive => LagRefresh::default(),
            LagRefreshKind::Iteration => LagRefresh::Iteration,
            LagRefreshKind::Step => LagRefresh::Step,
        };
    }
    if let Some(t) = s.subspace_stop {
        cx.positive("solver.subspace_stop", t, " 1/s")?;
        p.stop = MultilevelStop::Subspace { tol: t };
    }
    if let Some(sm) = s.smoother {
        p.smoother = match sm {
            SmootherKind::Jacobi => Preconditioner::Jacobi,
            SmootherKind::Jgs2 => Preconditioner::Jgs2,
        };
    }
    if let Some(solve) = s.subspace_solve {
        p.subspace_direct = solve == SubspaceSolve::Direct;
    }
    if let Some(place) = s.line_search {
        p.device_line_search = place == LineSearchPlace::Device;
    }
    if let Some(k) = s.rescue_after {
        p.rescue = (k > 0).then(|| Rescue {
            after: k,
            ..Rescue::default()
        });
    }
    Ok(p)
}
