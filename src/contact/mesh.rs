//! The collision mesh: the boundary vertices, edges and faces of every body of a [`Model`], plus
//! (through [`CollisionMesh::add_obstacle`]) triangle-mesh obstacles, with the rest-shape data
//! the barrier needs and the adjacency tests that exclude pairs sharing a vertex.
//!
//! **Indexing.** Edges and faces hold *global* vertex ids: indices into the position array the
//! collision routines are given (`x: &[[f64; 3]]`, m). Ids `0..num_model_vertices` are the
//! model's vertices (a flat state `State::x` is such an array through
//! `bytemuck::cast_slice::<f64, [f64; 3]>`); ids from `num_model_vertices` on are obstacle
//! vertices appended by [`CollisionMesh::add_obstacle`], whose positions the mesh keeps
//! ([`CollisionMesh::positions`] builds the full array). Primitives are addressed by their index
//! in [`CollisionMesh::vertices`], [`CollisionMesh::edges`] and [`CollisionMesh::faces`]; a
//! point–triangle candidate is `(vertex index, face index)`, not a global id.
//!
//! **Order.** `vertices` is sorted by global id, `edges` sorted by `[low, high]`, faces in the
//! order of the model's boundary surface (then each obstacle's in file order): everything is a
//! pure function of the input, so runs are reproducible.
//!
//! **Rest data** (from the positions at construction, i.e. the model's rest mesh):
//! edge lengths (m) — IPC's edge–edge mollifier switches on below ε× = 10⁻³ ‖ea‖²‖eb‖² of the
//! *rest* edges; face areas (m²); and lumped vertex and edge areas (m²: each face gives a third
//! of its area to each of its corners and to each of its edges), the weights of an
//! area-weighted barrier (so its stiffness does not grow with mesh refinement).
//!
//! **Exclusions.** Pairs that share a vertex are never contact pairs (their distance is zero by
//! construction): [`CollisionMesh::point_in_face`], [`CollisionMesh::edges_share_vertex`].
//! Which *bodies* may touch is [`CollisionMesh::bodies_may_touch`]: never two obstacles (neither
//! has degrees of freedom, and static scenery may interpenetrate by design), and a body with
//! itself only when its `self_contact` flag is set (the default: IPC's self-contact).

use crate::error::{JelloError, Result};
use crate::problem::Model;
use std::borrow::Cow;
use std::ops::Range;

/// What a collision body is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    /// A deformable object of the model: its boundary surface.
    Deformable,
    /// A triangle-mesh obstacle: positions prescribed (static, or scripted:
    /// [`super::obstacles`]), no degrees of freedom. Obstacles are never tested against each
    /// other.
    Obstacle,
}

/// One body of the collision mesh.
#[derive(Clone, Debug, PartialEq)]
pub struct CollisionBody {
    /// Name (the scene object's, or the obstacle's).
    pub name: String,
    /// Deformable or obstacle.
    pub kind: BodyKind,
    /// Whether the body's own primitives are tested against each other (true by default).
    pub self_contact: bool,
    /// Its global vertex ids.
    pub vertices: Range<usize>,
}

/// The surface primitives of all bodies (see the module docs for indexing and order).
#[derive(Clone, Debug, PartialEq)]
pub struct CollisionMesh {
    /// Number of leading global ids that belong to the caller's position array (the model's
    /// vertices); obstacle vertices follow.
    pub num_model_vertices: usize,
    /// Bodies (deformable first, in model order; then obstacles in the order added).
    pub bodies: Vec<CollisionBody>,
    /// Global ids of the surface vertices, ascending.
    pub vertices: Vec<u32>,
    /// Owning body of each surface vertex (index into `bodies`).
    pub vertex_body: Vec<u32>,
    /// Surface edges `[low, high]` (global ids), ascending.
    pub edges: Vec<[u32; 2]>,
    /// Owning body of each edge.
    pub edge_body: Vec<u32>,
    /// Surface triangles (global ids), wound outward (`(b−a)×(c−a)` points out of the solid).
    pub faces: Vec<[u32; 3]>,
    /// Owning body of each face.
    pub face_body: Vec<u32>,
    /// The three edges of each face (indices into `edges`): `[ab, bc, ca]`.
    pub face_edges: Vec<[u32; 3]>,
    /// Rest length of each edge, m.
    pub edge_rest_length: Vec<f64>,
    /// Rest area of each face, m².
    pub face_rest_area: Vec<f64>,
    /// Lumped rest area of each surface vertex (a third of each incident face), m².
    pub vertex_area: Vec<f64>,
    /// Lumped rest area of each edge (a third of each incident face), m².
    pub edge_area: Vec<f64>,
    /// Positions of the obstacle vertices (global ids `num_model_vertices..`), m.
    pub obstacle_positions: Vec<[f64; 3]>,
}

/// The primitives of one set of triangles (global ids), before bodies are attached.
struct Primitives {
    vertices: Vec<u32>,
    edges: Vec<[u32; 2]>,
    face_edges: Vec<[u32; 3]>,
    edge_rest_length: Vec<f64>,
    face_rest_area: Vec<f64>,
    vertex_area: Vec<f64>,
    edge_area: Vec<f64>,
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn norm(a: [f64; 3]) -> f64 {
    (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt()
}

fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

/// Vertices, edges and rest measures of `faces` (already validated: ids in range, distinct
/// corners); `rest(v)` is the rest position of global id `v`.
fn primitives(faces: &[[u32; 3]], rest: impl Fn(u32) -> [f64; 3]) -> Primitives {
    let mut vertices: Vec<u32> = faces.iter().flatten().copied().collect();
    vertices.sort_unstable();
    vertices.dedup();
    let mut edges: Vec<[u32; 2]> = faces
        .iter()
        .flat_map(|f| [[f[0], f[1]], [f[1], f[2]], [f[2], f[0]]])
        .map(|[a, b]| [a.min(b), a.max(b)])
        .collect();
    edges.sort_unstable();
    edges.dedup();
    let edge_of = |a: u32, b: u32| {
        // Every face side is in `edges` by construction.
        edges.binary_search(&[a.min(b), a.max(b)]).unwrap_or(0) as u32
    };
    let face_edges: Vec<[u32; 3]> = faces
        .iter()
        .map(|f| {
            [
                edge_of(f[0], f[1]),
                edge_of(f[1], f[2]),
                edge_of(f[2], f[0]),
            ]
        })
        .collect();
    let edge_rest_length = edges
        .iter()
        .map(|&[a, b]| norm(sub(rest(b), rest(a))))
        .collect();
    let face_rest_area: Vec<f64> = faces
        .iter()
        .map(|f| {
            let [a, b, c] = f.map(&rest);
            0.5 * norm(cross(sub(b, a), sub(c, a)))
        })
        .collect();
    let mut vertex_area = vec![0.0; vertices.len()];
    let mut edge_area = vec![0.0; edges.len()];
    for ((f, fe), &area) in faces.iter().zip(&face_edges).zip(&face_rest_area) {
        for &v in f {
            // `vertices` holds every corner.
            let i = vertices.binary_search(&v).unwrap_or(0);
            vertex_area[i] += area / 3.0;
        }
        for &e in fe {
            edge_area[e as usize] += area / 3.0;
        }
    }
    Primitives {
        vertices,
        edges,
        face_edges,
        edge_rest_length,
        face_rest_area,
        vertex_area,
        edge_area,
    }
}

/// Checks that `faces` index `0..n` with three distinct corners; `what` names the source.
fn check_faces(what: &str, faces: &[[u32; 3]], n: usize) -> Result<()> {
    for (i, f) in faces.iter().enumerate() {
        if let Some(&v) = f.iter().find(|&&v| v as usize >= n) {
            return Err(JelloError::Invalid(format!(
                "{what}: triangle {i} has vertex {v} out of range ({n} vertices)"
            )));
        }
        if f[0] == f[1] || f[1] == f[2] || f[2] == f[0] {
            return Err(JelloError::Invalid(format!(
                "{what}: triangle {i} repeats a vertex ({} {} {})",
                f[0], f[1], f[2]
            )));
        }
    }
    Ok(())
}

fn check_finite(what: &str, positions: &[[f64; 3]]) -> Result<()> {
    if let Some(i) = positions
        .iter()
        .position(|p| !p.iter().all(|c| c.is_finite()))
    {
        return Err(JelloError::Invalid(format!(
            "{what}: vertex {i} has a non-finite coordinate {:?}",
            positions[i]
        )));
    }
    Ok(())
}

impl CollisionMesh {
    /// The collision mesh of a model: the boundary surface of every body (the model's
    /// [`Model::surface`]), each primitive owned by the body whose vertex range holds it,
    /// self-contact on for every body. Errors when a surface vertex lies in no body or a face
    /// spans two bodies (bodies must be the disjoint vertex ranges the scene builder makes).
    pub fn from_model(model: &Model) -> Result<Self> {
        let bodies = model
            .bodies
            .iter()
            .map(|b| CollisionBody {
                name: b.name.clone(),
                kind: BodyKind::Deformable,
                self_contact: true,
                vertices: b.vertices.clone(),
            })
            .collect();
        Self::from_triangles(&model.mesh.positions, bodies, &model.surface.triangles)
    }

    /// A collision mesh of arbitrary triangles over `rest` (m; the caller's position array,
    /// global ids `0..rest.len()`), each vertex owned by the body whose `vertices` range holds
    /// it. Bodies must not overlap, must lie inside `0..rest.len()`, and every face's corners
    /// must be distinct and belong to one body. The rest data come from `rest`.
    pub fn from_triangles(
        rest: &[[f64; 3]],
        bodies: Vec<CollisionBody>,
        faces: &[[u32; 3]],
    ) -> Result<Self> {
        let n = rest.len();
        if n > u32::MAX as usize / 2 {
            return Err(JelloError::Invalid(format!(
                "collision mesh: {n} vertices is more than ids can address"
            )));
        }
        check_finite("collision mesh", rest)?;
        check_faces("collision mesh", faces, n)?;
        const NONE: u32 = u32::MAX;
        let mut owner = vec![NONE; n];
        for (bi, b) in bodies.iter().enumerate() {
            if b.vertices.end > n {
                return Err(JelloError::Invalid(format!(
                    "collision mesh: body `{}` has vertices {:?} beyond the {n} positions",
                    b.name, b.vertices
                )));
            }
            for v in b.vertices.clone() {
                if owner[v] != NONE {
                    return Err(JelloError::Invalid(format!(
                        "collision mesh: bodies `{}` and `{}` share vertex {v}",
                        bodies[owner[v] as usize].name, b.name
                    )));
                }
                owner[v] = bi as u32;
            }
        }
        for (i, f) in faces.iter().enumerate() {
            let b = f.map(|v| owner[v as usize]);
            if b[0] == NONE || b[1] == NONE || b[2] == NONE {
                return Err(JelloError::Invalid(format!(
                    "collision mesh: triangle {i} has a vertex in no body"
                )));
            }
            if b[0] != b[1] || b[1] != b[2] {
                return Err(JelloError::Invalid(format!(
                    "collision mesh: triangle {i} spans bodies `{}` and `{}`",
                    bodies[b[0] as usize].name,
                    bodies[if b[0] != b[1] { b[1] } else { b[2] } as usize].name
                )));
            }
        }
        let p = primitives(faces, |v| rest[v as usize]);
        let owner = &owner;
        Ok(CollisionMesh {
            num_model_vertices: n,
            bodies,
            vertex_body: p.vertices.iter().map(|&v| owner[v as usize]).collect(),
            edge_body: p.edges.iter().map(|e| owner[e[0] as usize]).collect(),
            face_body: faces.iter().map(|f| owner[f[0] as usize]).collect(),
            vertices: p.vertices,
            edges: p.edges,
            faces: faces.to_vec(),
            face_edges: p.face_edges,
            edge_rest_length: p.edge_rest_length,
            face_rest_area: p.face_rest_area,
            vertex_area: p.vertex_area,
            edge_area: p.edge_area,
            obstacle_positions: Vec::new(),
        })
    }

    /// Appends a triangle-mesh obstacle of `positions` (m; its positions at t = 0) and
    /// `triangles` (indices into `positions`), as a new body of kind [`BodyKind::Obstacle`]
    /// without self-contact. Scenes read obstacles with [`crate::mesh::read_triangle_mesh`]
    /// (OBJ/PLY/STL) and add them through [`crate::problem::Model::with_obstacle_meshes`],
    /// which also gives each its script ([`super::obstacles`]).
    /// Its vertices get global ids from [`CollisionMesh::num_vertices`] on, and its positions
    /// are kept here ([`CollisionMesh::positions`] appends them to the model's); a step whose
    /// obstacles move passes their scripted positions instead
    /// ([`super::IpcContact::positions_with`]), and the rest data (edge lengths, areas) stay
    /// those of `positions`. Returns the new body's index.
    /// Errors (naming the obstacle) on no triangles, non-finite positions, out-of-range or
    /// repeated corners.
    pub fn add_obstacle(
        &mut self,
        name: &str,
        positions: &[[f64; 3]],
        triangles: &[[u32; 3]],
    ) -> Result<usize> {
        let what = format!("obstacle `{name}`");
        if triangles.is_empty() {
            return Err(JelloError::Invalid(format!("{what}: has no triangles")));
        }
        check_finite(&what, positions)?;
        check_faces(&what, triangles, positions.len())?;
        let base = self.num_vertices();
        if base + positions.len() > u32::MAX as usize / 2 {
            return Err(JelloError::Invalid(format!(
                "{what}: {} vertices in all is more than ids can address",
                base + positions.len()
            )));
        }
        let shift = base as u32;
        let faces: Vec<[u32; 3]> = triangles.iter().map(|t| t.map(|v| v + shift)).collect();
        let p = primitives(&faces, |v| positions[(v - shift) as usize]);
        let body = self.bodies.len() as u32;
        let edge_base = self.edges.len() as u32;
        // Obstacle ids exceed every existing id, so appending keeps `vertices` and `edges`
        // sorted.
        self.vertex_body
            .extend(std::iter::repeat_n(body, p.vertices.len()));
        self.edge_body
            .extend(std::iter::repeat_n(body, p.edges.len()));
        self.face_body
            .extend(std::iter::repeat_n(body, faces.len()));
        self.vertices.extend(p.vertices);
        self.edges.extend(p.edges);
        self.faces.extend(faces);
        self.face_edges
            .extend(p.face_edges.iter().map(|fe| fe.map(|e| e + edge_base)));
        self.edge_rest_length.extend(p.edge_rest_length);
        self.face_rest_area.extend(p.face_rest_area);
        self.vertex_area.extend(p.vertex_area);
        self.edge_area.extend(p.edge_area);
        self.obstacle_positions.extend_from_slice(positions);
        self.bodies.push(CollisionBody {
            name: name.to_string(),
            kind: BodyKind::Obstacle,
            self_contact: false,
            vertices: base..base + positions.len(),
        });
        Ok(body as usize)
    }

    /// Length of the position array the collision routines index: model vertices plus
    /// obstacle vertices.
    pub fn num_vertices(&self) -> usize {
        self.num_model_vertices + self.obstacle_positions.len()
    }

    /// The full position array (m) for model positions `x_model` (length
    /// `num_model_vertices`): borrowed when there are no obstacle vertices, else `x_model`
    /// followed by [`CollisionMesh::obstacle_positions`].
    pub fn positions<'a>(&self, x_model: &'a [[f64; 3]]) -> Cow<'a, [[f64; 3]]> {
        if self.obstacle_positions.is_empty() {
            Cow::Borrowed(x_model)
        } else {
            let mut all = Vec::with_capacity(self.num_vertices());
            all.extend_from_slice(x_model);
            all.extend_from_slice(&self.obstacle_positions);
            Cow::Owned(all)
        }
    }

    /// Whether surface vertex `v` (index into `vertices`) is a corner of face `f`: such a
    /// point–triangle pair is excluded.
    pub fn point_in_face(&self, v: usize, f: usize) -> bool {
        self.faces[f].contains(&self.vertices[v])
    }

    /// Whether edges `a` and `b` (indices into `edges`) share a vertex (or are the same edge):
    /// such an edge–edge pair is excluded.
    pub fn edges_share_vertex(&self, a: usize, b: usize) -> bool {
        let [a0, a1] = self.edges[a];
        let [b0, b1] = self.edges[b];
        a0 == b0 || a0 == b1 || a1 == b0 || a1 == b1
    }

    /// Number of global vertex ids faces `f` and `g` share (0 to 3).
    pub fn faces_shared_vertices(&self, f: usize, g: usize) -> usize {
        let a = self.faces[f];
        self.faces[g].iter().filter(|v| a.contains(v)).count()
    }

    /// Whether primitives of bodies `a` and `b` may be a contact pair: never two obstacles,
    /// and a body with itself only when its `self_contact` is set.
    pub fn bodies_may_touch(&self, a: u32, b: u32) -> bool {
        let (ba, bb) = (&self.bodies[a as usize], &self.bodies[b as usize]);
        if ba.kind == BodyKind::Obstacle && bb.kind == BodyKind::Obstacle {
            return false;
        }
        a != b || ba.self_contact
    }

    /// Mean rest edge length, m (0 without edges): the scale of a d̂ relative to the mesh.
    pub fn mean_edge_length(&self) -> f64 {
        if self.edges.is_empty() {
            return 0.0;
        }
        self.edge_rest_length.iter().sum::<f64>() / self.edges.len() as f64
    }
}
