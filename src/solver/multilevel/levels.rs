//! The subspace levels: the per-object affine basis `U_a` and the SMS basis `U_s`, as one
//! sparse prolongation type — per vertex a list of (handle, φ) and per handle its 3×12 block
//! `φ · I₃ ⊗ [x̄ − o_h; 1]` built on the fly — with the lift `U q`, the restriction `Uᵀ y` and
//! the covering lists the block-Jacobi blocks are summed over.
//!
//! Pinned vertices: both lifts are zeroed there (`P U`, `P` the projector onto the free
//! DOFs), so every subspace direction keeps the pins where their scripts put them. For the
//! SMS level this changes nothing (its weights already vanish at pins, Eq. 11); for the
//! affine level it is the paper's open point "DBCs also modify the affine weights": the
//! object's affine map moves only its free vertices, and a fully pinned object contributes a
//! zero block (identity-preconditioned, zero right-hand side).

use crate::gpu::GpuVec4;
use crate::{JelloError, Result};
use jello_precompute::sms::{AffineBasis, SmsBasis, HANDLE_DOFS};
use rayon::prelude::*;

/// A level's two CSR lists as the multilevel kernels read them (`ml_lift`, `ml_restrict`;
/// [`crate::gpu::twins::multilevel`]): offsets and indices as u32, and per entry the weighted
/// frame `φ_vh·[x̄_v − o_h; 1]` (m, m, m, dimensionless) computed in f64 and rounded once to
/// f32, so it keeps f32 relative precision wherever the scene sits.
#[derive(Clone, Debug, Default)]
pub struct LevelArrays {
    /// Per-vertex offsets into `vertex_handle` / `vertex_frame` (`n + 1`).
    pub vertex_ptr: Vec<u32>,
    /// Handles covering each vertex.
    pub vertex_handle: Vec<u32>,
    /// Weighted frames matching `vertex_handle`.
    pub vertex_frame: Vec<GpuVec4>,
    /// Per-handle offsets into `handle_vertex` / `handle_frame` (`m + 1`).
    pub handle_ptr: Vec<u32>,
    /// Vertices each handle covers.
    pub handle_vertex: Vec<u32>,
    /// Weighted frames matching `handle_vertex`.
    pub handle_frame: Vec<GpuVec4>,
}

/// A sparse skinning prolongation with 12 DOFs per handle (row-major `[A | t]`).
#[derive(Clone, Debug)]
pub struct Level {
    /// "affine" or "sms".
    pub name: &'static str,
    rest: Vec<[f64; 3]>,
    origin: Vec<[f64; 3]>,
    vertex_ptr: Vec<usize>,
    vertex_handle: Vec<u32>,
    vertex_weight: Vec<f64>,
    handle_ptr: Vec<usize>,
    handle_vertex: Vec<u32>,
    handle_weight: Vec<f64>,
    pinned: Vec<bool>,
    /// Per `vertex_handle` entry: the weighted frame `φ_vh·[x̄_v − o_h; 1]`, for the lift.
    vertex_wf: Vec<[f64; 4]>,
    /// Per handle, over its free vertices only: the vertex and its weighted frame, for the
    /// restriction (pinned vertices restrict to nothing, so they are left out once here).
    handle_free: Vec<(u32, [f64; 4])>,
    /// Per-handle offsets into `handle_free` (`m + 1`).
    handle_free_ptr: Vec<usize>,
}

fn frame(x: [f64; 3], o: [f64; 3]) -> [f64; 4] {
    [x[0] - o[0], x[1] - o[1], x[2] - o[2], 1.0]
}

impl Level {
    /// The SMS level of `basis` (its own CSR both ways), pins from `pinned`.
    pub fn sms(basis: &SmsBasis, pinned: &[bool]) -> Self {
        Level {
            name: "sms",
            rest: basis.rest.clone(),
            origin: basis.origin.clone(),
            vertex_ptr: basis.vertex_ptr.clone(),
            vertex_handle: basis.vertex_handle.clone(),
            vertex_weight: basis.vertex_weight.clone(),
            handle_ptr: basis.handle_ptr.clone(),
            handle_vertex: basis.handle_vertex.clone(),
            handle_weight: basis.handle_weight.clone(),
            pinned: pinned.to_vec(),
            vertex_wf: Vec::new(),
            handle_free: Vec::new(),
            handle_free_ptr: Vec::new(),
        }
        .with_frames()
    }

    /// The affine level of `basis`: one handle per object, φ ≡ 1.
    pub fn affine(basis: &AffineBasis, pinned: &[bool]) -> Self {
        let n = basis.rest.len();
        let m = basis.n_objects();
        let vertex_ptr = (0..=n).collect();
        let vertex_handle = basis.object.clone();
        let mut handle_ptr = vec![0usize; m + 1];
        for &o in &basis.object {
            handle_ptr[o as usize + 1] += 1;
        }
        for h in 0..m {
            handle_ptr[h + 1] += handle_ptr[h];
        }
        let mut fill = handle_ptr.clone();
        let mut handle_vertex = vec![0u32; n];
        for (v, &o) in basis.object.iter().enumerate() {
            handle_vertex[fill[o as usize]] = v as u32;
            fill[o as usize] += 1;
        }
        Level {
            name: "affine",
            rest: basis.rest.clone(),
            origin: basis.origin.clone(),
            vertex_ptr,
            vertex_handle,
            vertex_weight: vec![1.0; n],
            handle_ptr,
            handle_vertex,
            handle_weight: vec![1.0; n],
            pinned: pinned.to_vec(),
            vertex_wf: Vec::new(),
            handle_free: Vec::new(),
            handle_free_ptr: Vec::new(),
        }
        .with_frames()
    }

    /// Fills the weighted-frame lists the lift and the restriction read (computed once: they
    /// depend on rest positions, weights and pins only).
    fn with_frames(mut self) -> Self {
        let n = self.rest.len();
        let mut vertex_wf = Vec::with_capacity(self.vertex_handle.len());
        for v in 0..n {
            for k in self.vertex_ptr[v]..self.vertex_ptr[v + 1] {
                let (h, w) = (self.vertex_handle[k] as usize, self.vertex_weight[k]);
                vertex_wf.push(frame(self.rest[v], self.origin[h]).map(|c| w * c));
            }
        }
        let mut handle_free = Vec::with_capacity(self.handle_vertex.len());
        let mut handle_free_ptr = Vec::with_capacity(self.n_handles() + 1);
        handle_free_ptr.push(0);
        for h in 0..self.n_handles() {
            for k in self.handle_ptr[h]..self.handle_ptr[h + 1] {
                let v = self.handle_vertex[k];
                if !self.pinned[v as usize] {
                    let w = self.handle_weight[k];
                    handle_free.push((
                        v,
                        frame(self.rest[v as usize], self.origin[h]).map(|c| w * c),
                    ));
                }
            }
            handle_free_ptr.push(handle_free.len());
        }
        self.vertex_wf = vertex_wf;
        self.handle_free = handle_free;
        self.handle_free_ptr = handle_free_ptr;
        self
    }

    /// Handle count.
    pub fn n_handles(&self) -> usize {
        self.origin.len()
    }

    /// Subspace dimension `12 · handles`.
    pub fn dim(&self) -> usize {
        HANDLE_DOFS * self.n_handles()
    }

    /// Whether vertex `v` is pinned (its lift is zero).
    pub fn is_pinned(&self, v: usize) -> bool {
        self.pinned[v]
    }

    /// (handle, φ, frame) of every handle covering vertex `v`.
    pub fn covering(&self, v: usize) -> impl Iterator<Item = (usize, f64, [f64; 4])> + '_ {
        (self.vertex_ptr[v]..self.vertex_ptr[v + 1]).map(move |k| {
            let h = self.vertex_handle[k] as usize;
            (
                h,
                self.vertex_weight[k],
                frame(self.rest[v], self.origin[h]),
            )
        })
    }

    /// φ and frame of handle `h` at vertex `v`, if `h` covers `v` (lists are short and
    /// sorted by handle).
    pub fn weight_frame(&self, v: usize, h: usize) -> Option<(f64, [f64; 4])> {
        let r = self.vertex_ptr[v]..self.vertex_ptr[v + 1];
        let k = self.vertex_handle[r.clone()]
            .iter()
            .position(|&x| x as usize == h)?;
        Some((
            self.vertex_weight[r.start + k],
            frame(self.rest[v], self.origin[h]),
        ))
    }

    /// The CSR lists and weighted frames the device kernels read ([`LevelArrays`]). Errors when
    /// an offset does not fit in u32.
    pub fn device_arrays(&self) -> Result<LevelArrays> {
        let ptr32 = |p: &[usize]| -> Result<Vec<u32>> {
            p.iter()
                .map(|&k| {
                    u32::try_from(k).map_err(|_| {
                        JelloError::Invalid(format!(
                            "{} level: CSR offset {k} does not fit the device's u32",
                            self.name
                        ))
                    })
                })
                .collect()
        };
        let wf = |v: usize, h: usize, w: f64| -> GpuVec4 {
            frame(self.rest[v], self.origin[h]).map(|c| (w * c) as f32)
        };
        let vertex_frame = self.vertex_wf.iter().map(|f| f.map(|c| c as f32)).collect();
        let mut handle_frame = Vec::with_capacity(self.handle_vertex.len());
        for h in 0..self.n_handles() {
            for k in self.handle_ptr[h]..self.handle_ptr[h + 1] {
                handle_frame.push(wf(self.handle_vertex[k] as usize, h, self.handle_weight[k]));
            }
        }
        Ok(LevelArrays {
            vertex_ptr: ptr32(&self.vertex_ptr)?,
            vertex_handle: self.vertex_handle.clone(),
            vertex_frame,
            handle_ptr: ptr32(&self.handle_ptr)?,
            handle_vertex: self.handle_vertex.clone(),
            handle_frame,
        })
    }

    /// Lift `u = P U q` (m): `q` has [`Self::dim`] entries, `u` has `3n`; pinned vertices
    /// get 0. Gathers per vertex.
    pub fn lift(&self, q: &[f64], u: &mut [f64]) {
        // Vertices per task: enough to amortise it, few enough to balance.
        const VERTICES: usize = 512;
        u.par_chunks_mut(3 * VERTICES)
            .enumerate()
            .for_each(|(t, chunk)| {
                for (o, uv) in chunk.chunks_exact_mut(3).enumerate() {
                    let v = t * VERTICES + o;
                    let mut acc = [0.0f64; 3];
                    if !self.pinned[v] {
                        for k in self.vertex_ptr[v]..self.vertex_ptr[v + 1] {
                            let h = self.vertex_handle[k] as usize;
                            let qh = &q[HANDLE_DOFS * h..][..HANDLE_DOFS];
                            let f = &self.vertex_wf[k];
                            for (r, a) in acc.iter_mut().enumerate() {
                                *a += qh[4 * r] * f[0]
                                    + qh[4 * r + 1] * f[1]
                                    + qh[4 * r + 2] * f[2]
                                    + qh[4 * r + 3] * f[3];
                            }
                        }
                    }
                    uv.copy_from_slice(&acc);
                }
            });
    }

    /// Restrict `q = Uᵀ P y`, the adjoint of [`Self::lift`]. Gathers per handle.
    pub fn restrict(&self, y: &[f64], q: &mut [f64]) {
        q.par_chunks_mut(HANDLE_DOFS)
            .enumerate()
            .for_each(|(h, qh)| {
                // Accumulated in registers, written once.
                let mut acc = [0.0f64; HANDLE_DOFS];
                for (v, f) in
                    &self.handle_free[self.handle_free_ptr[h]..self.handle_free_ptr[h + 1]]
                {
                    let yv = &y[3 * *v as usize..][..3];
                    for r in 0..3 {
                        for c in 0..4 {
                            acc[4 * r + c] += yv[r] * f[c];
                        }
                    }
                }
                qh.copy_from_slice(&acc);
            });
    }
}
