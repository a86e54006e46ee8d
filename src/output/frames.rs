//! Per-frame outputs of a run: `.vtu` + `.pvd` series (ParaView; optionally one series per
//! object), optional `.obj` surfaces.

use super::fields::cell_fields;
use crate::error::Result;
use crate::mesh::{surface, write_obj, write_vtu, BoundarySurface, Field, PvdCollection};
use crate::problem::{Body, Model};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// The file name of frame `index` with extension `ext` (`frame_00012.vtu`): five digits at least,
/// more past step 99999.
pub fn frame_name(index: usize, ext: &str) -> String {
    format!("frame_{index:05}.{ext}")
}

/// Point-data name of the displacement from the initial configuration, m.
pub const DISPLACEMENT: &str = "displacement [m]";
/// Point-data name of the velocity, m/s.
pub const VELOCITY: &str = "velocity [m/s]";
/// Point-data name of the per-vertex residual ‖∇E‖ of the step's incremental potential at the
/// step's end (its last iterate), N; 0 on pinned vertices and in frame 0 (no step yet), NaN
/// after a step that fell back to substeps.
pub const RESIDUAL: &str = "residual |grad E| [N]";
/// Cell-data name of J = det F (dimensionless).
pub const JACOBIAN: &str = "J [-]";
/// Cell-data name of the von Mises stress of the Cauchy stress, Pa.
pub const VON_MISES: &str = "von Mises stress [Pa]";
/// Cell-data name of the material id (see [`super::material_ids`]).
pub const MATERIAL_ID: &str = "material id";
/// Cell-data name of the object id (index in `[[objects]]`).
pub const OBJECT_ID: &str = "object id";

/// The file name of object `object`'s part of frame `index` (`frame_00012.object1.vtu`).
pub fn object_frame_name(index: usize, object: usize) -> String {
    format!("frame_{index:05}.object{object}.vtu")
}

/// The `.pvd` series of object `object`'s parts (`object1.pvd`), in `frames/`.
pub fn object_pvd_name(object: usize) -> String {
    format!("object{object}.pvd")
}

/// Which frame files to write.
#[derive(Clone, Debug)]
pub struct FrameOptions {
    /// `.vtu` per frame plus `sim.pvd`.
    pub vtu: bool,
    /// Also one `.vtu` per object per frame ([`object_frame_name`]) and a `.pvd` per object
    /// ([`object_pvd_name`]).
    pub vtu_per_object: bool,
    /// `.obj` of the boundary surface per frame.
    pub obj: bool,
}

/// What a frame shows besides positions and velocities.
#[derive(Clone, Copy, Debug)]
pub struct FrameData<'a> {
    /// Time, s.
    pub t: f64,
    /// Flattened positions, m (3n).
    pub x: &'a [f64],
    /// Flattened velocities, m/s (3n).
    pub v: &'a [f64],
    /// Per-vertex ‖∇E‖ of the step that ended here, N (n); `None` writes zeros (frame 0).
    pub residual: Option<&'a [f64]>,
}

/// Writes frames into `DIR/frames/`.
pub struct FrameWriter {
    dir: PathBuf,
    opts: FrameOptions,
    pvd: PvdCollection,
    /// One series per object when `opts.vtu_per_object`.
    object_pvds: Vec<PvdCollection>,
    bodies: Vec<Body>,
    surface: Option<BoundarySurface>,
    rest: Vec<[f64; 3]>,
    frames: usize,
}

impl FrameWriter {
    /// A writer for `model` (its mesh positions are the rest/initial configuration).
    pub fn new(out_dir: &Path, model: &Model, opts: FrameOptions) -> Self {
        let dir = out_dir.join("frames");
        let object_pvds = if opts.vtu_per_object {
            (0..model.bodies.len())
                .map(|b| PvdCollection::new(dir.join(object_pvd_name(b))))
                .collect()
        } else {
            Vec::new()
        };
        FrameWriter {
            pvd: PvdCollection::new(dir.join("sim.pvd")),
            object_pvds,
            bodies: model.bodies.clone(),
            surface: opts.obj.then(|| surface(&model.mesh)),
            rest: model.mesh.positions.clone(),
            dir,
            opts,
            frames: 0,
        }
    }

    /// Frames written so far.
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// The series files besides frames, relative to the output directory: `frames/sim.pvd`
    /// and the per-object `.pvd`s, as configured.
    pub fn series_files(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.opts.vtu {
            out.push("frames/sim.pvd".to_string());
        }
        for b in 0..self.object_pvds.len() {
            out.push(format!("frames/{}", object_pvd_name(b)));
        }
        out
    }

    /// Continues a series: `frames` (time in s, step) are the frames already on disk, listed
    /// again in the `.pvd`s (which are not rewritten until the next frame).
    pub fn resume(&mut self, frames: &[(f64, usize)]) {
        for &(t, step) in frames {
            if self.opts.vtu {
                self.pvd.push(t, self.dir.join(frame_name(step, "vtu")));
            }
            for (b, pvd) in self.object_pvds.iter_mut().enumerate() {
                // A run resumed with `vtu_per_object` newly on has no parts for its earlier
                // frames: list only the parts on disk.
                let file = self.dir.join(object_frame_name(step, b));
                if file.exists() {
                    pvd.push(t, file);
                }
            }
        }
        self.frames = frames.len();
    }

    /// Rewrites the `.pvd`s with the frames listed so far (after [`FrameWriter::resume`]).
    pub fn write_series(&self) -> Result<()> {
        if self.opts.vtu {
            self.pvd.write()?;
        }
        for pvd in &self.object_pvds {
            pvd.write()?;
        }
        Ok(())
    }

    /// The files frame `index` consists of, relative to the output directory (`frames/...`):
    /// `.vtu` (and per-object `.vtu`s), `.obj` as configured, and `.png` when `png`.
    pub fn files(&self, index: usize, png: bool) -> Vec<String> {
        let mut out = Vec::new();
        if self.opts.vtu {
            out.push(format!("frames/{}", frame_name(index, "vtu")));
        }
        for b in 0..self.object_pvds.len() {
            out.push(format!("frames/{}", object_frame_name(index, b)));
        }
        for (on, ext) in [(self.opts.obj, "obj"), (png, "png")] {
            if on {
                out.push(format!("frames/{}", frame_name(index, ext)));
            }
        }
        out
    }

    /// Writes frame `index` of `model` from `data`. Point data: [`DISPLACEMENT`],
    /// [`VELOCITY`], [`RESIDUAL`]; cell data: [`JACOBIAN`], [`VON_MISES`], [`MATERIAL_ID`],
    /// [`OBJECT_ID`].
    pub fn write(&mut self, index: usize, model: &Model, data: &FrameData<'_>) -> Result<()> {
        let pos: Vec<[f64; 3]> = data.x.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
        if self.opts.vtu || self.opts.vtu_per_object {
            let disp: Vec<[f64; 3]> = pos
                .iter()
                .zip(&self.rest)
                .map(|(p, r)| [p[0] - r[0], p[1] - r[1], p[2] - r[2]])
                .collect();
            let vel: Vec<[f64; 3]> = data.v.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
            let zeros;
            let residual = match data.residual {
                Some(r) => r,
                None => {
                    zeros = vec![0.0; pos.len()];
                    &zeros
                }
            };
            let cells = cell_fields(model, data.x);
            let write_part = |file: &Path, verts: Range<usize>, tets: Range<usize>| {
                // A body's tets index only its own vertices; shift them to the part's numbering
                // (an index outside the part wraps and is refused by `write_vtu`).
                let local: Vec<[u32; 4]> = model.mesh.tets[tets.clone()]
                    .iter()
                    .map(|t| t.map(|i| i.wrapping_sub(verts.start as u32)))
                    .collect();
                write_vtu(
                    file,
                    &pos[verts.clone()],
                    &local,
                    &[
                        (DISPLACEMENT, Field::Vector(&disp[verts.clone()])),
                        (VELOCITY, Field::Vector(&vel[verts.clone()])),
                        (RESIDUAL, Field::Scalar(&residual[verts.clone()])),
                    ],
                    &[
                        (JACOBIAN, Field::Scalar(&cells.j[tets.clone()])),
                        (VON_MISES, Field::Scalar(&cells.von_mises[tets.clone()])),
                        (
                            MATERIAL_ID,
                            Field::ScalarI32(&cells.material_id[tets.clone()]),
                        ),
                        (OBJECT_ID, Field::ScalarI32(&cells.object_id[tets])),
                    ],
                )
            };
            if self.opts.vtu {
                let file = self.dir.join(frame_name(index, "vtu"));
                write_part(&file, 0..pos.len(), 0..model.mesh.tets.len())?;
                self.pvd.push(data.t, file);
                self.pvd.write()?;
            }
            for (b, pvd) in self.object_pvds.iter_mut().enumerate() {
                let body = &self.bodies[b];
                let file = self.dir.join(object_frame_name(index, b));
                write_part(&file, body.vertices.clone(), body.tets.clone())?;
                pvd.push(data.t, file);
                pvd.write()?;
            }
        }
        if let Some(s) = &self.surface {
            write_obj(&self.dir.join(frame_name(index, "obj")), &pos, s)?;
        }
        self.frames += 1;
        Ok(())
    }
}
