//! The [`SoftBody`] component: what a Bevy user spawns to get a jello body.

use bevy::prelude::*;
use jello::material::MaterialModel;
use jello::scene::SolverKind;
use std::path::PathBuf;

/// A deformable body simulated by jello. Spawn it with a [`Transform`] (its translation places
/// the body; rotation and scale are not applied yet) and a `MeshMaterial3d` for its look; the
/// plugin adds the `Mesh3d` of its surface and a [`crate::SoftBodyStats`].
///
/// Positions are simulated in world space: once the body is built the plugin resets the
/// entity's `Transform` to identity and moves the surface vertices instead.
#[derive(Component, Clone, Debug)]
pub struct SoftBody {
    /// The rest shape, in the entity's local frame (m).
    pub shape: BodyShape,
    /// The material.
    pub material: SoftMaterial,
    /// Initial velocity of every vertex, m/s.
    pub velocity: Vec3,
    /// The time-step solver (jello's scene names: newton, jgs2, vbd, qn, admm, …). Newton is
    /// the default: with its element work on Bevy's GPU and the line search in f64 it matches
    /// `jello run` most closely.
    pub solver: SolverKind,
}

impl SoftBody {
    /// A body of the given shape, a soft rubber ([`SoftMaterial::default`]), at rest, solved
    /// with Newton.
    pub fn new(shape: BodyShape) -> Self {
        SoftBody {
            shape,
            material: SoftMaterial::default(),
            velocity: Vec3::ZERO,
            solver: SolverKind::Newton,
        }
    }

    /// A ball of `radius` m centred on the entity, `resolution` cells across (2..; jello's
    /// `mesh::ball`).
    pub fn ball(radius: f32, resolution: usize) -> Self {
        Self::new(BodyShape::Ball { radius, resolution })
    }

    /// A box of `size` m centred on the entity, `cells` hexahedra per axis, each split into
    /// tetrahedra (jello's `mesh::box_grid`).
    pub fn cuboid(size: Vec3, cells: [usize; 3]) -> Self {
        Self::new(BodyShape::Cuboid { size, cells })
    }

    /// With this material.
    pub fn with_material(mut self, material: SoftMaterial) -> Self {
        self.material = material;
        self
    }

    /// With this initial velocity, m/s.
    pub fn with_velocity(mut self, velocity: Vec3) -> Self {
        self.velocity = velocity;
        self
    }

    /// With this solver.
    pub fn with_solver(mut self, solver: SolverKind) -> Self {
        self.solver = solver;
        self
    }
}

/// The rest shape of a [`SoftBody`], in the entity's local frame.
#[derive(Clone, Debug)]
pub enum BodyShape {
    /// A tetrahedralised ball (jello's `ball` generator).
    Ball {
        /// Radius, m.
        radius: f32,
        /// Cells across the diameter (2..=jello::scene::ball_max_resolution()).
        resolution: usize,
    },
    /// A tetrahedralised box (jello's `box` generator).
    Cuboid {
        /// Edge lengths, m.
        size: Vec3,
        /// Cells per axis (each ≥ 1).
        cells: [usize; 3],
    },
    /// A tet-mesh file in a format jello reads (`.msh`, `.node`/`.ele`, `.mesh`, `.vtk`), its
    /// coordinates in metres; a relative path is relative to the working directory.
    File(PathBuf),
}

/// A hyperelastic material: model, Young's modulus, Poisson's ratio and density.
#[derive(Clone, Copy, Debug)]
pub struct SoftMaterial {
    /// The energy density (jello's `MaterialModel`).
    pub model: MaterialModel,
    /// Young's modulus E, Pa.
    pub youngs_modulus: f64,
    /// Poisson's ratio ν (dimensionless, −1 < ν < 0.5).
    pub poisson_ratio: f64,
    /// Density ρ, kg/m³.
    pub density: f64,
}

impl Default for SoftMaterial {
    /// Neo-Hookean (log J: an inverted element is impossible by construction), E = 50 kPa,
    /// ν = 0.4, ρ = 1000 kg/m³: the soft ball of jello's `drop` scene.
    fn default() -> Self {
        SoftMaterial {
            model: MaterialModel::NeoHookean,
            youngs_modulus: 5e4,
            poisson_ratio: 0.4,
            density: 1000.0,
        }
    }
}
