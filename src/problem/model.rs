//! The simulated model and its state.

use super::{
    BarrierParams, CharacteristicNorm, ExternalForce, History, Integrator, InversionPolicy,
    Obstacle, Pin,
};
use crate::contact::{check_intersection_free, CollisionMesh, IpcContact};
use crate::error::{JelloError, Result};
use crate::material::{ElementRest, Material, MaterialModel};
use crate::mesh::{surface, BoundarySurface, TetMesh, VertexTets};
use std::ops::Range;

/// A static solve stops when the out-of-balance force is below this fraction of the load
/// (both in the characteristic norm): see [`Model::static_tolerance`].
pub const STATIC_LOAD_FRACTION: f64 = 1e-6;

/// One object of a scene: a contiguous range of the model's vertices and tets.
#[derive(Clone, Debug, PartialEq)]
pub struct Body {
    /// Name from the scene (or "body{i}").
    pub name: String,
    /// Its vertices in the combined mesh.
    pub vertices: Range<usize>,
    /// Its tets in the combined mesh.
    pub tets: Range<usize>,
}

/// Everything that does not change during a run.
#[derive(Clone, Debug)]
pub struct Model {
    /// All bodies' meshes concatenated (rest = initial positions), m.
    pub mesh: TetMesh,
    /// Body ranges.
    pub bodies: Vec<Body>,
    /// Per-element rest data (Dm⁻¹, volume).
    pub rest: Vec<ElementRest<f64>>,
    /// Per-element material.
    pub materials: Vec<Material>,
    /// Per-element density, kg/m³.
    pub density: Vec<f64>,
    /// Lumped vertex masses, kg (each tet gives ρV/4 to each of its vertices).
    pub mass: Vec<f64>,
    /// Gravitational acceleration, m/s².
    pub gravity: [f64; 3],
    /// Dirichlet sets.
    pub pins: Vec<Pin>,
    /// Per-vertex flag: driven by a pin.
    pub pinned: Vec<bool>,
    /// Static obstacles.
    pub obstacles: Vec<Obstacle>,
    /// Barrier parameters.
    pub barrier: BarrierParams,
    /// Scale of the characteristic-norm stopping criterion.
    pub char_norm: CharacteristicNorm,
    /// Time-windowed external forces (see [`Model::with_forces`]).
    pub forces: Vec<ExternalForce>,
    /// Whether a step may end with inverted elements (see [`InversionPolicy`]; default
    /// [`InversionPolicy::Forbid`], set with [`Model::with_inversion`]).
    pub inversion: InversionPolicy,
    /// How dynamic steps discretise time (default [`Integrator::ImplicitEuler`], set with
    /// [`Model::with_integrator`]).
    pub integrator: Integrator,
    /// The boundary surface of all bodies (outward triangles), tested against obstacles.
    pub surface: BoundarySurface,
    /// Per vertex, the surface triangles it is a corner of: `surface_faces[surface_offsets[v]..
    /// surface_offsets[v + 1]]` (indices into `surface.triangles`).
    pub surface_offsets: Vec<u32>,
    /// See `surface_offsets`.
    pub surface_faces: Vec<u32>,
    /// Per surface triangle, its share of its corners' masses (Σ m_v / faces at v), kg: the
    /// barrier weight of its pairs with spheres and box corners.
    pub surface_mass: Vec<f64>,
    /// The surface's edges (each once, `[low, high]` vertex index).
    pub surface_edges: Vec<[u32; 2]>,
    /// Per surface edge, its share of its ends' masses (Σ m_v / surface edges at v), kg: the
    /// barrier weight of its pairs with box edges.
    pub edge_mass: Vec<f64>,
    /// Σ_e V_e (|μ_e| + |λ_e|), J: the energy of a unit strain, the scale of the elastic
    /// energy's round-off (see [`super::StepProblem::energy_slack`]).
    pub energy_scale: f64,
    /// Per vertex, its surface edges: `edge_list[edge_offsets[v]..edge_offsets[v + 1]]`.
    pub edge_offsets: Vec<u32>,
    /// See `edge_offsets`.
    pub edge_list: Vec<u32>,
    /// Per element, hard limits `[lo, hi]` on the singular values of F (dimensionless
    /// principal stretches), or `None`; empty when no element has one (see
    /// [`Model::with_strain_limits`]).
    pub strain_limits: Vec<Option<StrainLimit>>,
    /// IPC contact between the bodies' surfaces and with themselves (see
    /// [`Model::with_contact`]); `None`: bodies pass through each other and only the
    /// obstacles' barrier acts.
    pub contact: Option<std::sync::Arc<IpcContact>>,
    /// The vertex → tet incidence of `mesh`, built on first use by the gradient's parallel
    /// per-vertex gather ([`Model::vertex_tets`]).
    vertex_tets: std::sync::OnceLock<VertexTets>,
}

/// Hard strain limits of one element: every signed singular value σᵢ of its deformation
/// gradient in `[lo, hi]` (dimensionless; 0 < lo ≤ 1 ≤ hi, so the rest shape is feasible and
/// σ ≥ lo > 0 also rules out inversion). Enforced only by ADMM-PD (`--solver admm`), whose
/// z-step holds them exactly (see [`crate::solver::admm::prox`]); every other solver refuses a
/// model that has them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StrainLimit {
    /// Smallest principal stretch allowed (> 0, ≤ 1).
    pub lo: f64,
    /// Largest principal stretch allowed (≥ 1).
    pub hi: f64,
}

impl StrainLimit {
    /// A validated limit; the error says what is wrong with `[lo, hi]` in one phrase.
    pub fn new(lo: f64, hi: f64) -> std::result::Result<Self, String> {
        if !(lo.is_finite() && hi.is_finite()) {
            return Err(format!("must be finite, got [{lo}, {hi}]"));
        }
        if lo > hi {
            return Err(format!("is empty: lo = {lo} > hi = {hi}"));
        }
        if !(lo > 0.0 && lo <= 1.0) {
            return Err(format!(
                "lo must lie in (0, 1] (the rest shape must satisfy the limit, and σ > 0 keeps \
                 elements uninverted), got {lo}"
            ));
        }
        if hi < 1.0 {
            return Err(format!(
                "hi must be ≥ 1 (the rest shape must satisfy the limit), got {hi}"
            ));
        }
        Ok(StrainLimit { lo, hi })
    }

    /// σ clamped into `[lo, hi]`.
    pub fn clamp(&self, s: f64) -> f64 {
        s.clamp(self.lo, self.hi)
    }
}

/// The dynamic state: positions and velocities, flattened `[x0 y0 z0 x1 …]`.
#[derive(Clone, Debug, PartialEq)]
pub struct State {
    /// Positions, m.
    pub x: Vec<f64>,
    /// Velocities, m/s.
    pub v: Vec<f64>,
    /// Time, s.
    pub t: f64,
    /// The previous step's start (xⁿ⁻¹, vⁿ⁻¹) where the integrator needs it (BDF2 after its
    /// first step, see [`super::integrator`]); `None` at t = 0 and under implicit Euler.
    pub history: Option<History>,
}

impl State {
    /// A state without history (the start of a run, or any implicit-Euler state).
    pub fn new(x: Vec<f64>, v: Vec<f64>, t: f64) -> Self {
        State {
            x,
            v,
            t,
            history: None,
        }
    }
}

impl Model {
    /// Builds a model; validates sizes and element shapes.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        mesh: TetMesh,
        bodies: Vec<Body>,
        materials: Vec<Material>,
        density: Vec<f64>,
        gravity: [f64; 3],
        pins: Vec<Pin>,
        obstacles: Vec<Obstacle>,
        barrier: BarrierParams,
    ) -> Result<Self> {
        let nt = mesh.num_tets();
        let nv = mesh.num_vertices();
        if materials.len() != nt || density.len() != nt {
            return Err(JelloError::Invalid(format!(
                "model: {} tets but {} materials and {} densities",
                nt,
                materials.len(),
                density.len()
            )));
        }
        let mut rest = Vec::with_capacity(nt);
        let mut mass = vec![0.0; nv];
        for (t, tet) in mesh.tets.iter().enumerate() {
            let x = tet.map(|i| mesh.positions[i as usize]);
            let r = ElementRest::new(&x).ok_or_else(|| {
                JelloError::Invalid(format!("model: tet {t} is degenerate or inverted at rest"))
            })?;
            if !(density[t].is_finite() && density[t] > 0.0) {
                return Err(JelloError::Material(format!(
                    "density must be > 0 kg/m³, got {}",
                    density[t]
                )));
            }
            for &i in tet {
                mass[i as usize] += density[t] * r.volume / 4.0;
            }
            rest.push(r);
        }
        let mut pinned = vec![false; nv];
        for p in &pins {
            for &v in &p.vertices {
                let v = v as usize;
                if v >= nv {
                    return Err(JelloError::Invalid(format!("pin vertex {v} out of range")));
                }
                pinned[v] = true;
            }
        }
        let char_norm = CharacteristicNorm::new(&mesh, &rest, &materials, &pinned);
        let surface = surface(&mesh);
        let (surface_offsets, surface_faces) =
            csr(nv, surface.triangles.iter().map(|t| t.as_slice()));
        let surface_mass = mass_shares(&mass, &surface_offsets, &surface.triangles);
        let mut surface_edges: Vec<[u32; 2]> = surface
            .triangles
            .iter()
            .flat_map(|t| [[t[0], t[1]], [t[1], t[2]], [t[2], t[0]]])
            .map(|[a, b]| [a.min(b), a.max(b)])
            .collect();
        surface_edges.sort_unstable();
        surface_edges.dedup();
        let (edge_offsets, edge_list) = csr(nv, surface_edges.iter().map(|e| e.as_slice()));
        let edge_mass = mass_shares(&mass, &edge_offsets, &surface_edges);
        let energy_scale = rest
            .iter()
            .zip(&materials)
            .map(|(r, m)| r.volume * (m.mu.abs() + m.lambda.abs()))
            .sum();
        Ok(Model {
            mesh,
            bodies,
            rest,
            materials,
            density,
            mass,
            gravity,
            pins,
            pinned,
            obstacles,
            barrier,
            char_norm,
            forces: Vec::new(),
            inversion: InversionPolicy::default(),
            integrator: Integrator::default(),
            surface,
            surface_offsets,
            surface_faces,
            surface_mass,
            surface_edges,
            edge_mass,
            energy_scale,
            edge_offsets,
            edge_list,
            strain_limits: Vec::new(),
            contact: None,
            vertex_tets: std::sync::OnceLock::new(),
        })
    }

    /// The vertex → tet incidence of the mesh (incident tets ascending), built once; `None`
    /// when the mesh was edited after it was built (it no longer matches), so callers fall
    /// back to a sequential pass.
    pub fn vertex_tets(&self) -> Option<&VertexTets> {
        let vt = self.vertex_tets.get_or_init(|| VertexTets::new(&self.mesh));
        let matches = vt.offsets.len() == self.mesh.positions.len() + 1
            && vt.tets.len() == 4 * self.mesh.tets.len();
        matches.then_some(vt)
    }

    /// Turns on IPC contact (Li et al. 2020) between the bodies' boundary surfaces, with
    /// activation distance `dhat` (m), each body colliding with itself where `self_contact[b]`
    /// (one flag per body), and an optional fixed stiffness `kappa` (J/m⁴; default IPC's
    /// adaptive κ). Refuses, with one line naming the objects, a model whose bodies intersect
    /// each other or themselves at rest (an exact triangle–triangle test) or touch (a pair at
    /// zero distance): the barrier is infinite there and no step could start.
    ///
    /// Pinned vertices jump to their scripted positions at the start of each step, outside the
    /// CCD filter (which moves only free vertices): a script that carries a pinned surface
    /// through another surface within one step is not caught. Keep scripted motion per step
    /// well below the gap it must keep. (A scripted triangle-mesh obstacle's jump is checked:
    /// [`Self::with_obstacle_meshes`], [`crate::contact::obstacles`].)
    pub fn with_contact(
        mut self,
        dhat: f64,
        self_contact: &[bool],
        kappa: Option<f64>,
    ) -> Result<Self> {
        if self_contact.len() != self.bodies.len() {
            return Err(JelloError::Invalid(format!(
                "{} self-contact flags for {} bodies",
                self_contact.len(),
                self.bodies.len()
            )));
        }
        let mut mesh = CollisionMesh::from_model(&self)?;
        for (b, &on) in mesh.bodies.iter_mut().zip(self_contact) {
            b.self_contact = on;
        }
        let x: Vec<f64> = self.mesh.positions.iter().flatten().copied().collect();
        let ipc = IpcContact::new(mesh, &x, dhat, kappa)?;
        check_contact_start(&ipc, &x)?;
        self.contact = Some(std::sync::Arc::new(ipc));
        Ok(self)
    }

    /// Adds triangle-mesh obstacles ([`crate::contact::obstacles`]) to the model's IPC contact
    /// ([`Self::with_contact`] first, [`Self::with_friction`] after: friction coefficients are
    /// per collision body, obstacles included). Each becomes a body of the collision mesh
    /// ([`CollisionMesh::add_obstacle`]) that follows its script; the rest data (κ's length
    /// scale, the bounding-box diagonal) are recomputed with them. Refuses, with one line naming
    /// the obstacle and the object, an obstacle that intersects or touches an object at t = 0,
    /// and names that repeat an object's or another obstacle's (friction pairs name them).
    pub fn with_obstacle_meshes(
        mut self,
        obstacles: Vec<crate::contact::ObstacleMesh>,
    ) -> Result<Self> {
        if obstacles.is_empty() {
            return Ok(self);
        }
        let Some(ipc) = self.contact.as_ref() else {
            return Err(JelloError::Invalid(
                "triangle-mesh obstacles act through IPC contact; set contact.ipc = true".into(),
            ));
        };
        if ipc.friction.is_some() {
            return Err(JelloError::Invalid(
                "add triangle-mesh obstacles before friction (its coefficients are per body)"
                    .into(),
            ));
        }
        let mut mesh = ipc.mesh.clone();
        let mut scripts = ipc.obstacle_scripts.clone();
        for o in obstacles {
            if mesh.bodies.iter().any(|b| b.name == o.name) {
                return Err(JelloError::Invalid(format!(
                    "obstacle `{}`: the name is taken (object and obstacle names must differ)",
                    o.name
                )));
            }
            mesh.add_obstacle(&o.name, &o.positions, &o.triangles)?;
            scripts.push(o.script);
        }
        let x: Vec<f64> = self.mesh.positions.iter().flatten().copied().collect();
        let mut new = IpcContact::new(mesh, &x, ipc.dhat, ipc.kappa)?;
        new.obstacle_scripts = scripts;
        check_contact_start(&new, &x)?;
        self.contact = Some(std::sync::Arc::new(new));
        Ok(self)
    }

    /// Adds lagged friction to the model's IPC contact ([`Self::with_contact`] first); a
    /// `params` with every μ = 0 removes it. Errors name the scene key of a bad value.
    pub fn with_friction(
        mut self,
        params: crate::contact::friction::FrictionParams,
    ) -> Result<Self> {
        params.validate()?;
        let Some(ipc) = self.contact.as_mut() else {
            return Err(JelloError::Invalid(
                "contact.friction: friction acts between IPC contact pairs; set contact.ipc = true"
                    .into(),
            ));
        };
        if params.bodies != ipc.mesh.bodies.len() {
            return Err(JelloError::Invalid(format!(
                "contact.friction: coefficients for {} bodies, the collision mesh has {}",
                params.bodies,
                ipc.mesh.bodies.len()
            )));
        }
        std::sync::Arc::make_mut(ipc).friction = params.any().then_some(params);
        Ok(self)
    }

    /// Sets hard strain limits per element (`None`: unlimited); errors when the length is not
    /// the element count or an element without an isotropic energy (linear elasticity is not a
    /// function of the singular values) has one. An all-`None` list clears them.
    pub fn with_strain_limits(mut self, limits: Vec<Option<StrainLimit>>) -> Result<Self> {
        if limits.len() != self.mesh.num_tets() {
            return Err(JelloError::Invalid(format!(
                "strain limits: {} tets but {} entries",
                self.mesh.num_tets(),
                limits.len()
            )));
        }
        if let Some(e) = (0..limits.len())
            .find(|&e| limits[e].is_some() && self.materials[e].model == MaterialModel::Linear)
        {
            return Err(JelloError::Invalid(format!(
                "strain limits need an isotropic material (a function of the singular values \
                 of F), element {e} is linear"
            )));
        }
        self.strain_limits = if limits.iter().any(Option::is_some) {
            limits
        } else {
            Vec::new()
        };
        Ok(self)
    }

    /// The strain limit of element `e`, if any.
    pub fn strain_limit(&self, e: usize) -> Option<StrainLimit> {
        self.strain_limits.get(e).copied().flatten()
    }

    /// Adds external forces; errors on out-of-range vertices or non-finite values.
    pub fn with_forces(mut self, forces: Vec<ExternalForce>) -> Result<Self> {
        for f in &forces {
            if f.vertices
                .iter()
                .any(|&v| v as usize >= self.num_vertices())
            {
                return Err(JelloError::Invalid(
                    "external force on a vertex out of range".into(),
                ));
            }
            if !(f.force.iter().all(|c| c.is_finite()) && f.start.is_finite() && !f.end.is_nan()) {
                return Err(JelloError::Invalid("external force must be finite".into()));
            }
        }
        self.forces = forces;
        Ok(self)
    }

    /// Sets the inversion policy. [`InversionPolicy::Allow`] is refused for a model whose energy
    /// is infinite at J ≤ 0 (it could never be honoured).
    pub fn with_inversion(mut self, policy: InversionPolicy) -> Result<Self> {
        if policy == InversionPolicy::Allow {
            if let Some(m) = self
                .materials
                .iter()
                .find(|m| m.model.infinite_when_inverted())
            {
                return Err(JelloError::Invalid(format!(
                    "inversion cannot be allowed: {}'s energy is infinite at J ≤ 0",
                    m.model.name()
                )));
            }
        }
        self.inversion = policy;
        Ok(self)
    }

    /// Sets the time integrator of dynamic steps ([`Integrator`]).
    pub fn with_integrator(mut self, integrator: Integrator) -> Self {
        self.integrator = integrator;
        self
    }

    /// The characteristic-norm tolerance of a static solve: min(ε, [`STATIC_LOAD_FRACTION`] ×
    /// the norm of the full load). The CN residual measures out-of-balance forces against the
    /// material's stiffness times the mesh's face areas, so a fixed ε = 1e-5 can exceed the
    /// whole weight of a stiff body (a 1 m steel-stiff beam under gravity "converges" at
    /// rest); tying it to the load makes the solve resolve the load to a millionth.
    pub fn static_tolerance(&self, eps: f64) -> f64 {
        let n = self.num_vertices();
        let mut load = vec![0.0; 3 * n];
        for v in 0..n {
            for k in 0..3 {
                load[3 * v + k] = self.mass[v] * self.gravity[k];
            }
        }
        for f in &self.forces {
            let m_total: f64 = f.vertices.iter().map(|&v| self.mass[v as usize]).sum();
            if m_total > 0.0 {
                for &v in &f.vertices {
                    for k in 0..3 {
                        load[3 * v as usize + k] += f.force[k] * self.mass[v as usize] / m_total;
                    }
                }
            }
        }
        for v in 0..n {
            if self.pinned[v] {
                load[3 * v..3 * v + 3].fill(0.0);
            }
        }
        let r = self.char_norm.residual(&load);
        if r > 0.0 && r.is_finite() {
            eps.min(STATIC_LOAD_FRACTION * r)
        } else {
            eps
        }
    }

    /// The surface edges vertex `v` ends (indices into `surface_edges`).
    pub fn edges_of(&self, v: usize) -> &[u32] {
        &self.edge_list[self.edge_offsets[v] as usize..self.edge_offsets[v + 1] as usize]
    }

    /// The surface triangles vertex `v` is a corner of (indices into `surface.triangles`).
    pub fn faces_of(&self, v: usize) -> &[u32] {
        &self.surface_faces[self.surface_offsets[v] as usize..self.surface_offsets[v + 1] as usize]
    }

    /// Largest side of the rest bounding box, m (1 for an empty mesh): the unit of the `dx`
    /// stop rule.
    pub fn largest_extent(&self) -> f64 {
        self.mesh
            .bounding_box()
            .map(|(lo, hi)| (0..3).map(|k| hi[k] - lo[k]).fold(0.0, f64::max))
            .unwrap_or(1.0)
    }

    /// Number of vertices.
    pub fn num_vertices(&self) -> usize {
        self.mesh.num_vertices()
    }

    /// The state at t = 0 with the given per-vertex initial velocities (m/s).
    pub fn initial_state(&self, velocity: &[[f64; 3]]) -> State {
        State::new(
            self.mesh.positions.iter().flatten().copied().collect(),
            velocity.iter().flatten().copied().collect(),
            0.0,
        )
    }

    /// Total linear momentum Σ m v, kg·m/s.
    pub fn linear_momentum(&self, v: &[f64]) -> [f64; 3] {
        let mut p = [0.0; 3];
        for (i, m) in self.mass.iter().enumerate() {
            for k in 0..3 {
                p[k] += m * v[3 * i + k];
            }
        }
        p
    }

    /// Total angular momentum Σ x × m v about the origin, kg·m²/s.
    pub fn angular_momentum(&self, x: &[f64], v: &[f64]) -> [f64; 3] {
        let mut l = [0.0; 3];
        for (i, m) in self.mass.iter().enumerate() {
            let (p, q) = (&x[3 * i..3 * i + 3], &v[3 * i..3 * i + 3]);
            l[0] += m * (p[1] * q[2] - p[2] * q[1]);
            l[1] += m * (p[2] * q[0] - p[0] * q[2]);
            l[2] += m * (p[0] * q[1] - p[1] * q[0]);
        }
        l
    }

    /// Smallest ratio of current to rest volume over all tets (≤ 0 means an element inverted).
    pub fn min_volume_ratio(&self, x: &[f64]) -> f64 {
        self.mesh
            .tets
            .iter()
            .zip(&self.rest)
            .map(|(tet, r)| {
                let p = tet.map(|i| {
                    nalgebra::Vector3::from_column_slice(&x[3 * i as usize..3 * i as usize + 3])
                });
                let ds = nalgebra::Matrix3::from_columns(&[p[1] - p[0], p[2] - p[0], p[3] - p[0]]);
                ds.determinant() / 6.0 / r.volume
            })
            .fold(f64::INFINITY, f64::min)
    }
}

/// Refuses a contact start (model positions `x`, m; obstacles at t = 0) whose bodies intersect
/// (an exact triangle–triangle test) or touch (a pair at zero distance), naming the bodies: the
/// barrier is infinite there and no step could start.
fn check_contact_start(ipc: &IpcContact, x: &[f64]) -> Result<()> {
    let xs = ipc.positions(x);
    check_intersection_free(&ipc.mesh, &xs)?;
    let pairs = ipc.active_pairs(&xs)?;
    if let Some(p) = pairs
        .iter()
        .find(|p| crate::contact::potential::distance_sq(p, &xs) <= 0.0)
    {
        let body = |v: u32| ipc.mesh.bodies[ipc.body_of(v)].name.clone();
        let (a, b) = (body(p.ids[0]), body(p.ids[3]));
        let what = if a == b {
            format!("body `{a}` touches itself")
        } else {
            format!("bodies `{a}` and `{b}` touch")
        };
        return Err(JelloError::Invalid(format!(
            "{what} at rest (vertices {:?} at zero distance): the barrier is infinite there; \
             move them apart",
            p.ids
        )));
    }
    Ok(())
}

/// Vertex → item adjacency in CSR form: item i lists its vertices in `items[i]`.
fn csr<'a>(n: usize, items: impl Iterator<Item = &'a [u32]> + Clone) -> (Vec<u32>, Vec<u32>) {
    let mut offsets = vec![0u32; n + 1];
    for it in items.clone() {
        for &v in it {
            offsets[v as usize + 1] += 1;
        }
    }
    for v in 0..n {
        offsets[v + 1] += offsets[v];
    }
    let mut fill = offsets.clone();
    let mut list = vec![0u32; offsets[n] as usize];
    for (i, it) in items.enumerate() {
        for &v in it {
            list[fill[v as usize] as usize] = i as u32;
            fill[v as usize] += 1;
        }
    }
    (offsets, list)
}

/// Per primitive (surface triangle or edge), the sum over its vertices of the vertex's mass
/// divided by the number of primitives of that kind at the vertex (`offsets`: its CSR), kg.
fn mass_shares<const K: usize>(mass: &[f64], offsets: &[u32], prims: &[[u32; K]]) -> Vec<f64> {
    prims
        .iter()
        .map(|p| {
            p.iter()
                .map(|&v| {
                    let n = offsets[v as usize + 1] - offsets[v as usize];
                    mass[v as usize] / n.max(1) as f64
                })
                .sum()
        })
        .collect()
}
