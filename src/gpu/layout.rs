//! Plain-old-data types shared bit for bit between Rust and WGSL. Every type is `#[repr(C)]`,
//! `bytemuck::Pod`, has only 4-byte scalars and its size is asserted at compile time, so there
//! are no vec3/mat3 padding surprises: 3-vectors are stored as `[f32; 4]` (WGSL `vec4<f32>`,
//! w unused) and 3×3 matrices as [`GpuMat3`] (WGSL `mat3x3<f32>`, three 16-byte columns).

use bytemuck::{Pod, Zeroable};

/// A 3-vector padded to 16 bytes: WGSL `vec4<f32>`, `.xyz` used, `.w` unused (0).
///
/// This is the **position buffer layout**: `array<vec4<f32>>`, 16-byte stride, xyz in metres,
/// w unused. Hosts may bind the evaluator's position buffer as a vertex buffer with
/// `VertexFormat::Float32x4` (or `Float32x3` with stride 16).
pub type GpuVec4 = [f32; 4];

/// A tetrahedron's 4 vertex indices: WGSL `vec4<u32>`.
pub type GpuTet = [u32; 4];

/// Column-major 3×3 f32 matrix with 16-byte columns: exactly WGSL `mat3x3<f32>` in a storage
/// buffer (size 48, stride 48). `cols[c][r]` is row r, column c; `cols[c][3]` is padding.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuMat3 {
    /// Columns; the 4th lane of each is padding (kept 0).
    pub cols: [[f32; 4]; 3],
}

impl GpuMat3 {
    /// From a row-major `[[row0], [row1], [row2]]` array.
    pub fn from_rows(r: [[f32; 3]; 3]) -> Self {
        let mut cols = [[0.0; 4]; 3];
        for (c, col) in cols.iter_mut().enumerate() {
            for (i, row) in r.iter().enumerate() {
                col[i] = row[c];
            }
        }
        GpuMat3 { cols }
    }
    /// Entry at row `r`, column `c`.
    pub fn get(&self, r: usize, c: usize) -> f32 {
        self.cols[c][r]
    }
    /// To glam (column-major).
    pub fn to_glam(&self) -> glam::Mat3 {
        let c = |i: usize| glam::Vec3::new(self.cols[i][0], self.cols[i][1], self.cols[i][2]);
        glam::Mat3::from_cols(c(0), c(1), c(2))
    }
    /// From glam (column-major).
    pub fn from_glam(m: glam::Mat3) -> Self {
        let c = |v: glam::Vec3| [v.x, v.y, v.z, 0.0];
        GpuMat3 {
            cols: [c(m.x_axis), c(m.y_axis), c(m.z_axis)],
        }
    }
}

/// Per-element material record (WGSL `ElemParams`, 16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct ElemParams {
    /// Shear-like parameter μ of the model (Pa).
    pub mu: f32,
    /// λ of the model (Pa).
    pub lambda: f32,
    /// Rest volume (m³).
    pub volume: f32,
    /// Model id, see [`GpuModel`](super::GpuModel).
    pub model: u32,
}

/// Per-dispatch parameters (WGSL `Params`, 32 bytes, bound as a uniform with dynamic offset).
/// `n` and `row` are filled by the runtime; the rest is kernel-specific (see each shader header).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Params {
    /// Number of items the dispatch covers (set by `dispatch`).
    pub n: u32,
    /// Workgroups per row of a 2-D dispatch (set by the runtime).
    pub row: u32,
    /// Kernel-specific integer parameter 0 (flags, output offset…).
    pub u0: u32,
    /// Kernel-specific integer parameter 1.
    pub u1: u32,
    /// Kernel-specific float parameter 0 (axpy's a, inertia's 1/h²…).
    pub f0: f32,
    /// Kernel-specific float parameter 1.
    pub f1: f32,
    /// Kernel-specific float parameter 2.
    pub f2: f32,
    /// Kernel-specific float parameter 3.
    pub f3: f32,
}

impl Params {
    /// All zero.
    pub fn new() -> Self {
        Self::default()
    }
    /// With `u0` set.
    pub fn u0(mut self, v: u32) -> Self {
        self.u0 = v;
        self
    }
    /// With `f0` set.
    pub fn f0(mut self, v: f32) -> Self {
        self.f0 = v;
        self
    }
}

/// One vertex's state relative to one static obstacle (WGSL `Contact`, 32 bytes), the JGS2/VBD
/// kernels' obstacle representation. It holds only quantities relative to the obstacle —
/// computed in f64 on the host at the step's start and advanced by each position update on the
/// device — so a vertex 1e-7 m above the ground keeps its distance to f32 *relative* precision
/// (positions relative to the body's centroid resolve only ~1e-8 m there). The kind is
/// `b[3]`'s bits:
/// * [`GpuContact::HALF_SPACE`]: `a.xyz` unit normal, `a.w` signed distance d;
/// * [`GpuContact::SPHERE`]: `a.xyz` = x − centre, `a.w` = d, `b.x` radius;
/// * [`GpuContact::BOX`]: `a.xyz` = x − min, `b.xyz` = max − x;
/// * [`GpuContact::NONE`]: ignored (the placeholder of a scene without obstacles).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuContact {
    /// First vector (see the type docs).
    pub a: [f32; 4],
    /// Second vector; `b[3]` holds the kind's bits.
    pub b: [f32; 4],
}

impl GpuContact {
    /// `normal·x < offset` is inside.
    pub const HALF_SPACE: u32 = 0;
    /// Solid axis-aligned box.
    pub const BOX: u32 = 1;
    /// Solid sphere.
    pub const SPHERE: u32 = 2;
    /// No obstacle (skipped by the kernels).
    pub const NONE: u32 = 0xffff_ffff;

    /// The kind (`b[3]`'s bits).
    pub fn kind(&self) -> u32 {
        self.b[3].to_bits()
    }

    /// The placeholder record.
    pub fn none() -> Self {
        GpuContact {
            a: [0.0; 4],
            b: [0.0, 0.0, 0.0, f32::from_bits(Self::NONE)],
        }
    }

    /// The record of a vertex at `x` (m) and obstacle `o`, computed in f64.
    pub fn at(o: &crate::problem::Obstacle, x: [f64; 3]) -> Self {
        use crate::problem::Obstacle;
        let f = |v: [f64; 3], w: f64| [v[0] as f32, v[1] as f32, v[2] as f32, w as f32];
        let sub = |a: [f64; 3], b: [f64; 3]| [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
        match o {
            Obstacle::HalfSpace { normal, offset } => {
                let d = normal[0] * x[0] + normal[1] * x[1] + normal[2] * x[2] - offset;
                GpuContact {
                    a: f(*normal, d),
                    b: [0.0, 0.0, 0.0, f32::from_bits(Self::HALF_SPACE)],
                }
            }
            Obstacle::Sphere { center, radius } => {
                let p = sub(x, *center);
                let len = (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt();
                GpuContact {
                    a: f(p, len - radius),
                    b: [*radius as f32, 0.0, 0.0, f32::from_bits(Self::SPHERE)],
                }
            }
            Obstacle::Box { min, max } => {
                let mut b = f(sub(*max, x), 0.0);
                b[3] = f32::from_bits(Self::BOX);
                GpuContact {
                    a: f(sub(x, *min), 0.0),
                    b,
                }
            }
        }
    }
}

/// Per-vertex static data of the JGS2/VBD kernels (WGSL `VertexInfo`, 8 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuVertexInfo {
    /// Lumped mass, kg.
    pub mass: f32,
    /// 1 for a free vertex, 0 for a pinned one.
    pub free: u32,
}

/// One vertex's local 3×3 systems (WGSL `LocalSystem`, 128 bytes): the primary system
/// `a·δ = −r` (JGS2, or VBD in VBD mode) and the fallback `a_fallback·δ = −r_fallback` (VBD),
/// both without the obstacle barrier's curvature (the solve adds it).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuLocalSystem {
    /// Primary matrix (N/m).
    pub a: GpuMat3,
    /// Primary right-hand side (N), w = 0.
    pub r: [f32; 4],
    /// Fallback (VBD) matrix (N/m).
    pub a_fallback: GpuMat3,
    /// Fallback right-hand side (N), w = 0.
    pub r_fallback: [f32; 4],
}

/// One contact pair of the `ipc_pairs` kernel (WGSL `Pair`, 32 bytes): a point–triangle pair
/// `v` = (point, t₀, t₁, t₂) or an edge–edge pair `v` = (a₀, a₁, b₀, b₁), indices into the
/// kernel's position buffer (model vertices, then any obstacle vertices the host appends).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuPair {
    /// The four vertex indices.
    pub v: [u32; 4],
    /// [`GpuPair::POINT_TRIANGLE`] or [`GpuPair::EDGE_EDGE`].
    pub kind: u32,
    /// Edge–edge only: the mollifier threshold ε× (m⁴) from the edges' rest lengths,
    /// [`crate::contact::mollifier::mollifier_threshold`]; ignored for point–triangle pairs.
    pub eps_x: f32,
    /// Padding to 32 bytes (kept 0).
    pub pad: [u32; 2],
}

impl GpuPair {
    /// `kind` of a point–triangle pair.
    pub const POINT_TRIANGLE: u32 = 0;
    /// `kind` of an edge–edge pair.
    pub const EDGE_EDGE: u32 = 1;

    /// A point–triangle pair: point `p`, triangle `t`.
    pub fn point_triangle(p: u32, t: [u32; 3]) -> Self {
        GpuPair {
            v: [p, t[0], t[1], t[2]],
            kind: Self::POINT_TRIANGLE,
            ..Self::default()
        }
    }

    /// An edge–edge pair of edges `a` and `b` with mollifier threshold `eps_x` (m⁴).
    pub fn edge_edge(a: [u32; 2], b: [u32; 2], eps_x: f64) -> Self {
        GpuPair {
            v: [a[0], a[1], b[0], b[1]],
            kind: Self::EDGE_EDGE,
            eps_x: eps_x as f32,
            pad: [0; 2],
        }
    }

    /// The record of a host contact pair (collision ids as the pair has them).
    pub fn of(p: &crate::contact::ContactPair) -> Self {
        use crate::contact::ccd::PairKind;
        match p.kind {
            PairKind::PointTriangle => {
                Self::point_triangle(p.ids[0], [p.ids[1], p.ids[2], p.ids[3]])
            }
            PairKind::EdgeEdge => {
                Self::edge_edge([p.ids[0], p.ids[1]], [p.ids[2], p.ids[3]], p.eps_x)
            }
        }
    }

    /// The host pair of this record (ε× widened from f32: [`Self::of`] gives the record back
    /// exactly).
    pub fn host_pair(&self) -> crate::contact::ContactPair {
        use crate::contact::ccd::PairKind;
        let point = self.kind == Self::POINT_TRIANGLE;
        crate::contact::ContactPair {
            kind: if point {
                PairKind::PointTriangle
            } else {
                PairKind::EdgeEdge
            },
            ids: self.v,
            eps_x: if point { 0.0 } else { self.eps_x as f64 },
        }
    }
}

/// One lagged IPC friction pair for `ipc_friction` (WGSL `FrictionPair`, 160 bytes): the
/// stencil, μλ and the lagged tangent map T = PᵀΓ (2×12, [`crate::contact::friction::FrictionPair`])
/// stored per stencil vertex k as `t[2k]` = row 0 of T's 3-column block k and `t[2k + 1]` =
/// row 1 (w lanes 0), so that u = Σₖ (`t[2k]`·Δxₖ, `t[2k+1]`·Δxₖ).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct GpuFrictionPair {
    /// The four vertex indices into the position arrays the kernel reads.
    pub v: [u32; 4],
    /// μλ (N): the friction coefficient times the lagged normal force.
    pub s: f32,
    /// Padding to the 16-byte alignment of `t` (kept 0).
    pub pad: [u32; 3],
    /// T per stencil vertex, rows interleaved (dimensionless).
    pub t: [[f32; 4]; 8],
}

impl GpuFrictionPair {
    /// The f32 copy of a lagged pair `p` whose stencil is at device vertices `v`.
    pub fn new(v: [u32; 4], p: &crate::contact::friction::FrictionPair) -> Self {
        let t = std::array::from_fn(|i| {
            let (k, r) = (i / 2, i % 2);
            [0, 1, 2, 3].map(|c| {
                if c < 3 {
                    p.tangent[(r, 3 * k + c)] as f32
                } else {
                    0.0
                }
            })
        });
        GpuFrictionPair {
            v,
            s: (p.mu * p.lambda) as f32,
            pad: [0; 3],
            t,
        }
    }
}

/// A cluster-tree node of the JGS2 far field: `(start, end, left, right)` — members
/// `perm[start..end]`, children ids or `u32::MAX` for a leaf (WGSL `vec4<u32>`).
pub type GpuTreeNode = [u32; 4];

const _: () = assert!(std::mem::size_of::<GpuVec4>() == 16);
const _: () = assert!(std::mem::size_of::<GpuTet>() == 16);
const _: () = assert!(std::mem::size_of::<GpuMat3>() == 48);
const _: () = assert!(std::mem::size_of::<ElemParams>() == 16);
const _: () = assert!(std::mem::size_of::<Params>() == 32);
const _: () = assert!(std::mem::size_of::<GpuContact>() == 32);
const _: () = assert!(std::mem::size_of::<GpuVertexInfo>() == 8);
const _: () = assert!(std::mem::size_of::<GpuLocalSystem>() == 128);
const _: () = assert!(std::mem::size_of::<GpuPair>() == 32);
const _: () = assert!(std::mem::size_of::<GpuFrictionPair>() == 160);
