//! The serde types of the scene file. Units: metres, seconds, kilograms, pascals, radians
//! (rotations given in degrees say so in the key name).

use super::solver::SolverSpec;
use serde::{Deserialize, Serialize};

fn default_gravity() -> [f64; 3] {
    [0.0, -9.81, 0.0]
}
fn default_one() -> f64 {
    1.0
}
fn default_every() -> usize {
    1
}
fn default_true() -> bool {
    true
}

/// The whole scene file.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SceneSpec {
    /// Time stepping.
    pub simulation: SimulationSpec,
    /// Solver choice and parameters.
    #[serde(default)]
    pub solver: SolverSpec,
    /// What to write.
    #[serde(default)]
    pub output: OutputSpec,
    /// The deformable bodies.
    pub objects: Vec<ObjectSpec>,
    /// Dirichlet regions and their scripts.
    #[serde(default)]
    pub pins: Vec<PinSpec>,
    /// Obstacles: analytic (static) and triangle meshes (static or scripted).
    #[serde(default)]
    pub obstacles: Vec<ObstacleSpec>,
    /// External forces on regions during time windows.
    #[serde(default)]
    pub forces: Vec<ForceSpec>,
    /// Barrier parameters.
    #[serde(default)]
    pub contact: ContactSpec,
}

/// `[simulation]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SimulationSpec {
    /// Time step h, s (> 0).
    pub h: f64,
    /// Number of steps (≥ 1).
    pub steps: usize,
    /// Gravitational acceleration, m/s² (default [0, −9.81, 0]: +y is up).
    #[serde(default = "default_gravity")]
    pub gravity: [f64; 3],
    /// `forbid` (default): every accepted step keeps every element's J > 0; `allow`: inverted
    /// elements are reported, not prevented (only for models finite through inversion). See
    /// [`crate::problem::InversionPolicy`].
    #[serde(default)]
    pub inversion: Option<String>,
    /// A static solve: no inertia; `steps` load increments, step k applying k/steps of gravity
    /// and the forces, pins at their script positions at k·h (default false).
    #[serde(default, rename = "static")]
    pub static_solve: bool,
    /// Time integrator of a dynamic run: `implicit_euler` (default; first order) or `bdf2`
    /// (second order, less numerical damping; its first step is implicit Euler). See
    /// [`crate::problem::integrator`]. Not for static solves.
    #[serde(default)]
    pub integrator: Option<String>,
}

/// `[output]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    /// Write a frame every N steps (default 1); frame 0 is the initial state.
    #[serde(default = "default_every")]
    pub every: usize,
    /// Write .vtu frames and a .pvd series (default true).
    #[serde(default = "default_true")]
    pub vtu: bool,
    /// Also write one .vtu per object per frame (`frames/frame_NNNNN.objectI.vtu`, I the
    /// object's index in `[[objects]]`) and a series per object (`frames/objectI.pvd`);
    /// needs `vtu = true` (default false).
    #[serde(default)]
    pub vtu_per_object: bool,
    /// Write an .obj of the boundary surface per frame (default false).
    #[serde(default)]
    pub obj: bool,
    /// Render a PNG per frame (default false).
    #[serde(default)]
    pub png: bool,
    /// PNG size in pixels (default [800, 600]).
    #[serde(default = "OutputSpec::default_size")]
    pub png_size: [u32; 2],
}

impl OutputSpec {
    fn default_size() -> [u32; 2] {
        [800, 600]
    }
}

impl Default for OutputSpec {
    fn default() -> Self {
        OutputSpec {
            every: 1,
            vtu: true,
            vtu_per_object: false,
            obj: false,
            png: false,
            png_size: Self::default_size(),
        }
    }
}

/// One `[[objects]]` entry.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectSpec {
    /// Name used by pins and in outputs (default `object{i}`).
    #[serde(default)]
    pub name: Option<String>,
    /// Where the mesh comes from.
    pub mesh: MeshSpec,
    /// Transform applied to the mesh, in the order fit → scale → rotate → translate.
    #[serde(default)]
    pub transform: TransformSpec,
    /// The body's material.
    pub material: MaterialSpec,
    /// Per-region material overrides (an element belongs to a region when its centroid does);
    /// later entries win.
    #[serde(default)]
    pub regions: Vec<RegionMaterialSpec>,
    /// Initial linear velocity, m/s.
    #[serde(default)]
    pub velocity: [f64; 3],
    /// Initial rigid spin about the body's centroid.
    #[serde(default)]
    pub angular_velocity: Option<AngularVelocitySpec>,
}

/// A mesh file or a generator. Exactly one of `file` / `generator`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MeshSpec {
    /// Path to a mesh file (.msh, .node/.ele, .mesh, .vtk), relative to the scene file.
    #[serde(default)]
    pub file: Option<String>,
    /// `box`, `ball`, `ring` (a hoop about the vertical axis) or `ring_net` (chain mail: flat
    /// rings on a grid linked by upright rings; [`crate::mesh::ring_net`]).
    #[serde(default)]
    pub generator: Option<String>,
    /// Box: lower corner, m.
    #[serde(default)]
    pub min: Option<[f64; 3]>,
    /// Box: upper corner, m.
    #[serde(default)]
    pub max: Option<[f64; 3]>,
    /// Box: cells along x, y, z; ring, ring_net (each ring): cells around (≥ 3), across the
    /// wall and along the axis (6 tets per cell).
    #[serde(default)]
    pub cells: Option<[usize; 3]>,
    /// Ball, ring, ring_net: centre, m.
    #[serde(default)]
    pub center: Option<[f64; 3]>,
    /// Ball: radius; ring: outer radius; ring_net: the flat rings' outer radius, m.
    #[serde(default)]
    pub radius: Option<f64>,
    /// Ring, ring_net (flat rings): inner radius (the hole's), m (0 < inner_radius < radius).
    #[serde(default)]
    pub inner_radius: Option<f64>,
    /// Ring: height along the vertical (y) axis; ring_net: every ring's thickness along its
    /// axis, m.
    #[serde(default)]
    pub height: Option<f64>,
    /// Ball: cells across the diameter.
    #[serde(default)]
    pub resolution: Option<usize>,
    /// Ring_net: flat rings along x and z (each ≥ 1; the links between neighbours follow).
    #[serde(default)]
    pub count: Option<[usize; 2]>,
}

/// Mesh transform.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TransformSpec {
    /// Scale uniformly so the bounding box's largest extent equals this, m: `fit = 1.0` scales
    /// about the box centre (which stays put); `fit = { extent = 1.0, anchor = "min" }` then
    /// moves the box's minimum corner to the origin (the normalisation peers use: largest extent
    /// 1, box in [0, 1]³); `anchor = "center"` is the plain number's behaviour.
    #[serde(default)]
    pub fit: Option<FitSpec>,
    /// Uniform scale factor.
    #[serde(default)]
    pub scale: Option<f64>,
    /// Rotation about the origin.
    #[serde(default)]
    pub rotate: Option<RotateSpec>,
    /// Translation, m.
    #[serde(default)]
    pub translate: Option<[f64; 3]>,
}

/// `transform.fit`: a number (the extent, m; centre anchor) or a table `{ extent, anchor }`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FitSpec {
    /// `fit = 1.0`: the largest extent, m, scaled about the box centre.
    Extent(f64),
    /// `fit = { extent = 1.0, anchor = "min" }`.
    Anchored(FitTable),
}

/// The table form of [`FitSpec`].
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FitTable {
    /// The largest extent after the fit, m (> 0).
    pub extent: f64,
    /// Where the fitted box goes (default `center`).
    #[serde(default)]
    pub anchor: FitAnchor,
}

/// Where [`FitSpec`] puts the fitted bounding box.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FitAnchor {
    /// The box centre stays where it was (the scale is about it).
    #[default]
    Center,
    /// The box's minimum corner goes to the origin.
    Min,
}

impl FitSpec {
    /// The target extent, m.
    pub fn extent(&self) -> f64 {
        match self {
            FitSpec::Extent(e) => *e,
            FitSpec::Anchored(t) => t.extent,
        }
    }

    /// Where the box goes.
    pub fn anchor(&self) -> FitAnchor {
        match self {
            FitSpec::Extent(_) => FitAnchor::Center,
            FitSpec::Anchored(t) => t.anchor,
        }
    }
}

// By hand rather than `#[serde(untagged)]`: an untagged enum reports every mistake as "did not
// match any variant", where this keeps the table's own messages (an unknown key, an unknown
// anchor) and says what a number or table was expected to be.
impl<'de> Deserialize<'de> for FitSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = FitSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an extent in m or a table { extent, anchor = \"center\" | \"min\" }")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<FitSpec, E> {
                Ok(FitSpec::Extent(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<FitSpec, E> {
                Ok(FitSpec::Extent(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<FitSpec, E> {
                Ok(FitSpec::Extent(v as f64))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<FitSpec, A::Error> {
                FitTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(FitSpec::Anchored)
            }
        }
        d.deserialize_any(V)
    }
}

/// An axis-angle rotation.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RotateSpec {
    /// Axis (normalised internally).
    pub axis: [f64; 3],
    /// Angle, degrees.
    pub degrees: f64,
}

/// A material.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MaterialSpec {
    /// `stable_neo_hookean`, `stable_neo_hookean_vbd`, `fixed_corotated`, `neo_hookean`, `st_vk`,
    /// `arap`, `linear`.
    pub model: String,
    /// Young's modulus E, Pa (with `poisson_ratio`).
    #[serde(default)]
    pub youngs_modulus: Option<f64>,
    /// Poisson's ratio ν ∈ (−1, 0.5).
    #[serde(default)]
    pub poisson_ratio: Option<f64>,
    /// The model's own μ, Pa (instead of E, ν).
    #[serde(default)]
    pub mu: Option<f64>,
    /// The model's own λ, Pa (instead of E, ν).
    #[serde(default)]
    pub lambda: Option<f64>,
    /// Density ρ, kg/m³ (> 0).
    pub density: f64,
    /// Hard limits `[lo, hi]` on the principal stretches (singular values of F,
    /// dimensionless; 0 < lo ≤ 1 ≤ hi), e.g. `[0.95, 1.05]`. Enforced exactly by
    /// `solver = "admm"` (its z-step clamps them); other solvers refuse a scene with limits.
    #[serde(default)]
    pub strain_limit: Option<[f64; 2]>,
}

/// A material override for elements whose centroid lies in `region`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RegionMaterialSpec {
    /// The region.
    pub region: RegionSpec,
    /// The material there.
    pub material: MaterialSpec,
}

/// A region of space: `{ box = { min, max } }`, `{ slab = { normal, offset, thickness } }`
/// (points with |normal·x − offset| ≤ thickness/2) or `{ sphere = { center, radius,
/// inner_radius } }` (points with inner_radius ≤ |x − center| ≤ radius: a ball, or with
/// `inner_radius` > 0 a spherical shell).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum RegionSpec {
    /// Axis-aligned box, m.
    Box {
        /// Lower corner.
        min: [f64; 3],
        /// Upper corner.
        max: [f64; 3],
    },
    /// Slab around a plane.
    Slab {
        /// Plane normal (normalised internally).
        normal: [f64; 3],
        /// Plane offset along the normal, m.
        offset: f64,
        /// Slab thickness, m.
        thickness: f64,
    },
    /// Ball or spherical shell.
    Sphere {
        /// Centre, m.
        center: [f64; 3],
        /// Outer radius, m.
        radius: f64,
        /// Inner radius, m (default 0: the whole ball).
        #[serde(default)]
        inner_radius: f64,
    },
}

/// Initial rigid spin.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AngularVelocitySpec {
    /// Axis (normalised internally).
    pub axis: [f64; 3],
    /// Angular speed, rad/s.
    pub omega: f64,
}

/// One `[[pins]]` entry.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PinSpec {
    /// Restrict to this object (default: all objects).
    #[serde(default)]
    pub object: Option<String>,
    /// Which vertices (their positions at t = 0).
    pub region: RegionSpec,
    /// How they move (default fixed).
    #[serde(default)]
    pub script: ScriptSpec,
}

/// A kinematic script.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ScriptSpec {
    /// Stay put.
    #[default]
    Fixed,
    /// Constant velocity, m/s.
    Translate {
        /// Velocity, m/s.
        velocity: [f64; 3],
    },
    /// Rigid rotation about an axis through `center` at `omega` rad/s.
    Rotate {
        /// Point on the axis, m.
        center: [f64; 3],
        /// Axis direction.
        axis: [f64; 3],
        /// Angular velocity, rad/s.
        omega: f64,
    },
    /// A sequence of phases, each a rotation and/or a translation spread evenly over its time
    /// window; see [`PhaseSpec`] and [`crate::problem::Script::Keyframes`].
    Keyframes {
        /// The phases, composed in this order (at least one).
        phases: Vec<PhaseSpec>,
    },
}

/// One phase of a keyframed pin script: between `start` and `end` the pinned vertices turn by
/// `rotate.degrees` about the axis through `rotate.center` and move by `translate`, both at a
/// constant rate; before `start` the phase contributes nothing, after `end` all of its motion.
/// With both keys the rotation comes first.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    /// When the phase starts, s.
    pub start: f64,
    /// When it ends, s (> start).
    pub end: f64,
    /// Rotation over the phase (the total angle, in degrees).
    #[serde(default)]
    pub rotate: Option<PhaseRotateSpec>,
    /// Total displacement over the phase, m.
    #[serde(default)]
    pub translate: Option<[f64; 3]>,
}

/// The rotation of a [`PhaseSpec`].
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseRotateSpec {
    /// A point on the axis, m (in world coordinates: earlier phases do not move it).
    pub center: [f64; 3],
    /// Axis direction (normalised internally; right-handed).
    pub axis: [f64; 3],
    /// Total angle over the phase, degrees.
    pub degrees: f64,
}

/// One `[[obstacles]]` entry.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ObstacleSpec {
    /// Horizontal ground: the half-space below `height` along −gravity's axis (default +y up).
    Ground {
        /// Height of the ground plane, m.
        #[serde(default)]
        height: f64,
    },
    /// Half-space `normal·x < offset` is solid.
    HalfSpace {
        /// Outward normal.
        normal: [f64; 3],
        /// Offset, m.
        offset: f64,
    },
    /// Solid axis-aligned box.
    Box {
        /// Lower corner, m.
        min: [f64; 3],
        /// Upper corner, m.
        max: [f64; 3],
    },
    /// Solid sphere.
    Sphere {
        /// Centre, m.
        center: [f64; 3],
        /// Radius, m.
        radius: f64,
    },
    /// A triangle-mesh obstacle read from an OBJ, PLY or STL file: a surface without degrees
    /// of freedom in IPC contact (needs `[contact] ipc = true`), static or moved by a script.
    /// See [`crate::contact::obstacles`].
    Mesh {
        /// The file (.obj, .ply, .stl), relative to the scene file.
        path: String,
        /// Name in errors and `[[contact.friction_pairs]]` (default `obstacle{i}`; must differ
        /// from every object's and obstacle's).
        #[serde(default)]
        name: Option<String>,
        /// Placement, as for objects: fit → scale → rotate → translate (m, degrees).
        #[serde(default)]
        transform: TransformSpec,
        /// How it moves from its placed position at t = 0 (default fixed), as for pins. It
        /// jumps to each step's end position at the step's start; a step whose jump would make
        /// it touch or cross a surface fails (take a smaller h or a slower script).
        #[serde(default)]
        script: ScriptSpec,
    },
}

/// `[contact]`: the IPC barrier against obstacles, and IPC contact between and within objects.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ContactSpec {
    /// Activation distance d̂, m (default 1e-3 × the scene's bounding-box diagonal; at most one
    /// of `dhat` and `dhat_relative`).
    #[serde(default)]
    pub dhat: Option<f64>,
    /// Activation distance d̂ as a fraction of the scene's bounding-box diagonal (> 0).
    #[serde(default)]
    pub dhat_relative: Option<f64>,
    /// Dimensionless obstacle barrier stiffness κ, scaled per vertex by m/h² (default 1).
    #[serde(default = "default_one")]
    pub kappa: f64,
    /// IPC contact between the objects' surfaces and within each (default false: objects pass
    /// through each other). Solvers newton, multilevel, jgs2, vbd, and qn, dot, lbfgs-h on the
    /// CPU backend.
    #[serde(default)]
    pub ipc: bool,
    /// With `ipc`: each object also collides with itself (default true).
    #[serde(default = "default_true")]
    pub self_contact: bool,
    /// With `ipc`: a fixed contact stiffness κ, J/m⁴ (default: IPC's adaptive κ).
    #[serde(default)]
    pub ipc_kappa: Option<f64>,
    /// With `ipc`: the friction coefficient μ (dimensionless, ≥ 0) between every pair of
    /// objects and within each (default 0: frictionless); `friction_pairs` overrides pairs.
    #[serde(default)]
    pub friction: Option<f64>,
    /// With `ipc`: μ for particular pairs of objects (or mesh obstacles, by name).
    #[serde(default)]
    pub friction_pairs: Vec<FrictionPairSpec>,
    /// With friction: ε_v, m/s — relative tangential speeds below it are mollified static
    /// friction (default 1e-3 m/s).
    #[serde(default)]
    pub friction_velocity: Option<f64>,
    /// With friction: lagging passes per step (≥ 1, default 1): each further pass re-lags the
    /// normal forces and tangent frames at the last solution and solves again.
    #[serde(default)]
    pub friction_iterations: Option<usize>,
}

/// One `[[contact.friction_pairs]]` entry: μ between two objects or mesh obstacles (the same
/// object's name twice: the object against itself).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FrictionPairSpec {
    /// The two objects' (or mesh obstacles') names.
    pub objects: [String; 2],
    /// Friction coefficient μ (dimensionless, ≥ 0).
    pub mu: f64,
}

impl Default for ContactSpec {
    fn default() -> Self {
        ContactSpec {
            dhat: None,
            dhat_relative: None,
            kappa: 1.0,
            ipc: false,
            self_contact: true,
            ipc_kappa: None,
            friction: None,
            friction_pairs: Vec::new(),
            friction_velocity: None,
            friction_iterations: None,
        }
    }
}

/// One `[[forces]]` entry: a total force (N) on the vertices of a region, split by mass, acting
/// from `start` to `end` (s).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ForceSpec {
    /// Restrict to this object (default: all objects).
    #[serde(default)]
    pub object: Option<String>,
    /// Which vertices (their positions at t = 0).
    pub region: RegionSpec,
    /// Total force, N.
    pub force: [f64; 3],
    /// Start time, s (default 0).
    #[serde(default)]
    pub start: f64,
    /// End time, s (default: never ends).
    #[serde(default = "ForceSpec::forever")]
    pub end: f64,
}

impl ForceSpec {
    fn forever() -> f64 {
        f64::INFINITY
    }
}
