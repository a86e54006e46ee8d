//! Validating a scene and building the model from it.

use super::spec::*;
use super::Scene;
use crate::error::{JelloError, Result};
use crate::material::{Material, MaterialModel};
use crate::mesh::{ball, box_grid, read_mesh, TetMesh};
use crate::problem::{
    BarrierParams, Body, ExternalForce, InversionPolicy, Model, Obstacle, Pin, Script,
};
use crate::solver::jgs2::SubspaceOptions;
use crate::solver::StopRule;
use nalgebra::Vector3;

/// The solvers a scene may name.
pub const SOLVERS: [&str; 3] = ["newton", "jgs2", "vbd"];

/// Run settings taken from the scene (the CLI may override them).
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Time step, s.
    pub h: f64,
    /// Number of steps.
    pub steps: usize,
    /// Solver name (one of [`SOLVERS`]).
    pub solver: String,
    /// Stop rule.
    pub stop: StopRule,
    /// Iteration cap per step, if set.
    pub max_iterations: Option<usize>,
    /// Solver variant (`jacobi` / `gs`), if set.
    pub variant: Option<String>,
    /// JGS2 subspace options (far-field tolerance and fit order from `[solver]`).
    pub subspace: SubspaceOptions,
    /// Output options.
    pub output: OutputSpec,
    /// A static solve in `steps` load increments (`[simulation] static = true`).
    pub static_solve: bool,
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
}

impl Ctx<'_> {
    fn err(&self, key: impl Into<String>, msg: impl Into<String>) -> JelloError {
        JelloError::scene(&self.scene.path, key, msg)
    }
    fn finite(&self, key: &str, v: &[f64]) -> Result<()> {
        if v.iter().all(|x| x.is_finite()) {
            Ok(())
        } else {
            Err(self.err(key, "must be finite"))
        }
    }
}

impl Scene {
    /// Validates every value and builds the model. Errors name the file and the dotted key.
    pub fn build(&self) -> Result<BuiltScene> {
        let cx = Ctx { scene: self };
        let s = &self.spec;
        if !(s.simulation.h.is_finite() && s.simulation.h > 0.0) {
            return Err(cx.err(
                "simulation.h",
                format!("time step must be > 0 s, got {}", s.simulation.h),
            ));
        }
        if s.simulation.steps == 0 {
            return Err(cx.err("simulation.steps", "must be ≥ 1"));
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
            self.transform(&cx, &key, &obj.transform, &mut m)?;
            let base = material(&cx, &format!("{key}.material"), &obj.material)?;
            let mut elem_mat = vec![base; m.num_tets()];
            let mut elem_density = vec![obj.material.density; m.num_tets()];
            for (r, reg) in obj.regions.iter().enumerate() {
                let rkey = format!("{key}.regions[{r}]");
                let mat = material(&cx, &format!("{rkey}.material"), &reg.material)?;
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
            let centroid = centroid(&m);
            for p in &m.positions {
                let mut v = Vector3::from(obj.velocity);
                if let Some(av) = &obj.angular_velocity {
                    let axis = Vector3::from(av.axis);
                    if !(axis.norm() > 0.0 && av.omega.is_finite()) {
                        return Err(cx.err(
                            format!("{key}.angular_velocity"),
                            "needs a non-zero axis and a finite omega",
                        ));
                    }
                    v += (axis.normalize() * av.omega).cross(&(Vector3::from(*p) - centroid));
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
        }
        let pins = self.pins(&cx, &mesh, &bodies)?;
        let obstacles = self.obstacles(&cx, &mesh)?;
        let diag = mesh
            .bounding_box()
            .map(|(lo, hi)| (Vector3::from(hi) - Vector3::from(lo)).norm())
            .unwrap_or(1.0);
        let dhat = s.contact.dhat.unwrap_or(1e-3 * diag);
        if !(dhat.is_finite() && dhat > 0.0) {
            return Err(cx.err("contact.dhat", format!("must be > 0 m, got {dhat}")));
        }
        if !(s.contact.kappa.is_finite() && s.contact.kappa > 0.0) {
            return Err(cx.err(
                "contact.kappa",
                format!("must be > 0, got {}", s.contact.kappa),
            ));
        }
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
        // The start must be feasible for every part of every body, not only its vertices: a
        // sphere or box can sit between a surface's vertices, or inside a body whole.
        let x0: Vec<f64> = model.mesh.positions.iter().flatten().copied().collect();
        if let Some((o, what)) = model.first_overlap(&x0) {
            return Err(cx.err(format!("obstacles[{o}]"), what));
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
        let solver = s.solver.name.to_ascii_lowercase();
        if !SOLVERS.contains(&solver.as_str()) {
            return Err(cx.err(
                "solver.name",
                format!(
                    "unknown solver `{}` (expected one of: {})",
                    s.solver.name,
                    SOLVERS.join(", ")
                ),
            ));
        }
        let stop = match s.solver.stop.as_str() {
            "cn" => {
                if !(s.solver.tolerance.is_finite() && s.solver.tolerance > 0.0) {
                    return Err(cx.err("solver.tolerance", "must be > 0"));
                }
                StopRule::Cn {
                    eps: s.solver.tolerance,
                }
            }
            "dx" => {
                if !(s.solver.dx_tolerance.is_finite() && s.solver.dx_tolerance > 0.0) {
                    return Err(cx.err("solver.dx_tolerance", "must be > 0"));
                }
                StopRule::Dx {
                    tol: s.solver.dx_tolerance,
                }
            }
            other => {
                return Err(cx.err(
                    "solver.stop",
                    format!("unknown stop rule `{other}` (expected cn or dx)"),
                ))
            }
        };
        if let Some(v) = &s.solver.variant {
            if v != "jacobi" && v != "gs" {
                return Err(cx.err(
                    "solver.variant",
                    format!("unknown variant `{v}` (expected jacobi or gs)"),
                ));
            }
        }
        if s.solver.max_iterations == Some(0) {
            return Err(cx.err("solver.max_iterations", "must be ≥ 1"));
        }
        let mut subspace = SubspaceOptions::default();
        if let Some(t) = s.solver.far_tolerance {
            if !(t.is_finite() && t >= 0.0) {
                return Err(cx.err(
                    "solver.far_tolerance",
                    format!("must be finite and ≥ 0, got {t}"),
                ));
            }
            subspace.precompute.far_tolerance = t;
        }
        if let Some(o) = s.solver.far_order {
            if o > 1 {
                return Err(cx.err(
                    "solver.far_order",
                    format!("must be 0 (node means) or 1 (linear fits), got {o}"),
                ));
            }
            subspace.precompute.far_order = o;
        }
        if s.output.every == 0 {
            return Err(cx.err("output.every", "must be ≥ 1"));
        }
        if s.output.png_size[0] == 0
            || s.output.png_size[1] == 0
            || s.output.png_size.iter().any(|&v| v > 8192)
        {
            return Err(cx.err("output.png_size", "each side must be in 1..=8192 pixels"));
        }
        Ok(RunConfig {
            h: s.simulation.h,
            steps: s.simulation.steps,
            solver,
            stop,
            max_iterations: s.solver.max_iterations,
            variant: s.solver.variant.clone(),
            subspace,
            output: s.output.clone(),
            static_solve: s.simulation.static_solve,
        })
    }

    fn object_mesh(
        &self,
        cx: &Ctx,
        key: &str,
        spec: &MeshSpec,
        warnings: &mut Vec<String>,
    ) -> Result<TetMesh> {
        let key = format!("{key}.mesh");
        match (&spec.file, &spec.generator) {
            (Some(file), None) => {
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
                let (Some(min), Some(max), Some(cells)) = (spec.min, spec.max, spec.cells) else {
                    return Err(cx.err(&key, "the box generator needs min, max and cells"));
                };
                cx.finite(&format!("{key}.min"), &min)?;
                cx.finite(&format!("{key}.max"), &max)?;
                if (0..3).any(|k| max[k] <= min[k]) {
                    return Err(cx.err(format!("{key}.max"), "must exceed min on every axis"));
                }
                if cells.contains(&0) || cells.iter().product::<usize>() > 2_000_000 {
                    return Err(cx.err(
                        format!("{key}.cells"),
                        "each count must be ≥ 1 and the total ≤ 2e6",
                    ));
                }
                Ok(box_grid(min, max, cells))
            }
            (None, Some(g)) if g == "ball" => {
                let (Some(center), Some(radius)) = (spec.center, spec.radius) else {
                    return Err(cx.err(&key, "the ball generator needs center and radius"));
                };
                cx.finite(&format!("{key}.center"), &center)?;
                if !(radius.is_finite() && radius > 0.0) {
                    return Err(cx.err(format!("{key}.radius"), "must be > 0 m"));
                }
                let res = spec.resolution.unwrap_or(8);
                if !(2..=200).contains(&res) {
                    return Err(cx.err(format!("{key}.resolution"), "must be in 2..=200"));
                }
                Ok(ball(center, radius, res))
            }
            (None, Some(g)) => Err(cx.err(
                format!("{key}.generator"),
                format!("unknown generator `{g}` (expected box or ball)"),
            )),
            _ => Err(cx.err(&key, "give exactly one of `file` or `generator`")),
        }
    }

    fn transform(&self, cx: &Ctx, key: &str, t: &TransformSpec, m: &mut TetMesh) -> Result<()> {
        let key = format!("{key}.transform");
        if let Some(fit) = t.fit {
            if !(fit.is_finite() && fit > 0.0) {
                return Err(cx.err(format!("{key}.fit"), "must be > 0 m"));
            }
            m.fit_largest_extent(fit)
                .map_err(|e| cx.err(format!("{key}.fit"), e.to_string()))?;
        }
        if let Some(s) = t.scale {
            if !(s.is_finite() && s > 0.0) {
                return Err(cx.err(format!("{key}.scale"), "must be > 0"));
            }
            m.scale(s)
                .map_err(|e| cx.err(format!("{key}.scale"), e.to_string()))?;
        }
        if let Some(r) = &t.rotate {
            cx.finite(&format!("{key}.rotate.axis"), &r.axis)?;
            m.rotate(r.axis, r.degrees)
                .map_err(|e| cx.err(format!("{key}.rotate"), e.to_string()))?;
        }
        if let Some(d) = t.translate {
            cx.finite(&format!("{key}.translate"), &d)?;
            m.translate(d);
        }
        Ok(())
    }

    fn pins(&self, cx: &Ctx, mesh: &TetMesh, bodies: &[Body]) -> Result<Vec<Pin>> {
        let mut out = Vec::new();
        for (i, p) in self.spec.pins.iter().enumerate() {
            let key = format!("pins[{i}]");
            let range = match &p.object {
                Some(name) => bodies
                    .iter()
                    .find(|b| &b.name == name)
                    .map(|b| b.vertices.clone())
                    .ok_or_else(|| {
                        cx.err(format!("{key}.object"), format!("no object named `{name}`"))
                    })?,
                None => 0..mesh.num_vertices(),
            };
            let region = region(cx, &format!("{key}.region"), &p.region)?;
            let vertices: Vec<u32> = range
                .filter(|&v| region.contains(&mesh.positions[v]))
                .map(|v| v as u32)
                .collect();
            if vertices.is_empty() {
                return Err(cx.err(format!("{key}.region"), "selects no vertex"));
            }
            let script = match &p.script {
                ScriptSpec::Fixed => Script::Fixed,
                ScriptSpec::Translate { velocity } => {
                    cx.finite(&format!("{key}.script.velocity"), velocity)?;
                    Script::Translate {
                        velocity: *velocity,
                    }
                }
                ScriptSpec::Rotate {
                    center,
                    axis,
                    omega,
                } => {
                    cx.finite(&format!("{key}.script.center"), center)?;
                    cx.finite(&format!("{key}.script.axis"), axis)?;
                    if Vector3::from(*axis).norm() == 0.0 || !omega.is_finite() {
                        return Err(cx.err(
                            format!("{key}.script"),
                            "rotate needs a non-zero axis and a finite omega",
                        ));
                    }
                    Script::Rotate {
                        center: *center,
                        axis: *axis,
                        omega: *omega,
                    }
                }
            };
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
            if !f.start.is_finite() || f.end.is_nan() || f.end <= f.start {
                return Err(cx.err(format!("{key}.end"), "needs finite start < end (s)"));
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

    fn obstacles(&self, cx: &Ctx, mesh: &TetMesh) -> Result<Vec<Obstacle>> {
        let g = Vector3::from(self.spec.simulation.gravity);
        let mut out = Vec::new();
        for (i, o) in self.spec.obstacles.iter().enumerate() {
            let key = format!("obstacles[{i}]");
            let obs = match o {
                ObstacleSpec::Ground { height } => {
                    // "Up" is against gravity; +y when there is no gravity.
                    let up = if g.norm() > 0.0 {
                        -g.normalize()
                    } else {
                        Vector3::y()
                    };
                    Obstacle::half_space(up.into(), *height)
                }
                ObstacleSpec::HalfSpace { normal, offset } => {
                    cx.finite(&format!("{key}.normal"), normal)?;
                    if Vector3::from(*normal).norm() == 0.0 || !offset.is_finite() {
                        return Err(cx.err(
                            &key,
                            "half_space needs a non-zero normal and a finite offset",
                        ));
                    }
                    Obstacle::half_space(*normal, *offset)
                }
                ObstacleSpec::Box { min, max } => {
                    cx.finite(&format!("{key}.min"), min)?;
                    cx.finite(&format!("{key}.max"), max)?;
                    if (0..3).any(|k| max[k] <= min[k]) {
                        return Err(cx.err(format!("{key}.max"), "must exceed min on every axis"));
                    }
                    Obstacle::Box {
                        min: *min,
                        max: *max,
                    }
                }
                ObstacleSpec::Sphere { center, radius } => {
                    cx.finite(&format!("{key}.center"), center)?;
                    if !(radius.is_finite() && *radius > 0.0) {
                        return Err(cx.err(format!("{key}.radius"), "must be > 0 m"));
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
            out.push(obs);
        }
        Ok(out)
    }
}

/// The vertices of `object` (or all) inside `region`; an error when none is selected.
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
    if !(m.density.is_finite() && m.density > 0.0) {
        return Err(cx.err(
            format!("{key}.density"),
            format!("must be > 0 kg/m³, got {}", m.density),
        ));
    }
    match (m.youngs_modulus, m.poisson_ratio, m.mu, m.lambda) {
        (Some(e), Some(nu), None, None) => {
            if !(e.is_finite() && e > 0.0) {
                return Err(cx.err(
                    format!("{key}.youngs_modulus"),
                    format!("must be > 0 Pa, got {e}"),
                ));
            }
            if !(nu.is_finite() && nu > -1.0 && nu < 0.5) {
                return Err(cx.err(
                    format!("{key}.poisson_ratio"),
                    format!("must lie in (-1, 0.5), got {nu}"),
                ));
            }
            Material::from_young_poisson(model, e, nu).map_err(|e| cx.err(key, e.to_string()))
        }
        (None, None, Some(mu), lambda) => {
            Material::new(model, mu, lambda.unwrap_or(0.0)).map_err(|e| cx.err(key, e.to_string()))
        }
        _ => Err(cx.err(
            key,
            "give either youngs_modulus + poisson_ratio, or mu (+ lambda)",
        )),
    }
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
}

impl Region {
    pub(crate) fn contains(&self, p: &[f64; 3]) -> bool {
        match self {
            Region::Box { min, max } => (0..3).all(|k| p[k] >= min[k] && p[k] <= max[k]),
            Region::Slab { n, offset, half } => (n.dot(&Vector3::from(*p)) - offset).abs() <= *half,
        }
    }
}

fn region(cx: &Ctx, key: &str, r: &RegionSpec) -> Result<Region> {
    match r {
        RegionSpec::Box { min, max } => {
            cx.finite(&format!("{key}.box.min"), min)?;
            cx.finite(&format!("{key}.box.max"), max)?;
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
            cx.finite(&format!("{key}.slab.normal"), normal)?;
            let n = Vector3::from(*normal);
            if n.norm() == 0.0 {
                return Err(cx.err(format!("{key}.slab.normal"), "must be non-zero"));
            }
            if !(thickness.is_finite() && *thickness > 0.0 && offset.is_finite()) {
                return Err(cx.err(
                    format!("{key}.slab.thickness"),
                    "must be > 0 m (and offset finite)",
                ));
            }
            Ok(Region::Slab {
                n: n.normalize(),
                offset: *offset / n.norm(),
                half: thickness / 2.0,
            })
        }
    }
}
