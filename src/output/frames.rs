//! Per-frame outputs of a run: `.vtu` + `.pvd` series (ParaView), optional `.obj` surfaces.

use crate::error::Result;
use crate::mesh::{surface, write_obj, write_vtu, BoundarySurface, Field, PvdCollection, TetMesh};
use std::path::{Path, PathBuf};

/// The file name of frame `index` with extension `ext` (`frame_00012.vtu`): five digits at least,
/// more past step 99999.
pub fn frame_name(index: usize, ext: &str) -> String {
    format!("frame_{index:05}.{ext}")
}

/// Which frame files to write.
#[derive(Clone, Debug)]
pub struct FrameOptions {
    /// `.vtu` per frame plus `sim.pvd`.
    pub vtu: bool,
    /// `.obj` of the boundary surface per frame.
    pub obj: bool,
}

/// Writes frames into `DIR/frames/`.
pub struct FrameWriter {
    dir: PathBuf,
    opts: FrameOptions,
    pvd: PvdCollection,
    surface: Option<BoundarySurface>,
    rest: Vec<[f64; 3]>,
    frames: usize,
}

impl FrameWriter {
    /// A writer for `mesh` (its positions are the rest/initial configuration).
    pub fn new(out_dir: &Path, mesh: &TetMesh, opts: FrameOptions) -> Self {
        let dir = out_dir.join("frames");
        FrameWriter {
            pvd: PvdCollection::new(dir.join("sim.pvd")),
            surface: opts.obj.then(|| surface(mesh)),
            rest: mesh.positions.clone(),
            dir,
            opts,
            frames: 0,
        }
    }

    /// Frames written so far.
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// Continues a series: `frames` (time in s, step) are the frames already on disk, listed
    /// again in `sim.pvd` (which is not rewritten until the next frame).
    pub fn resume(&mut self, frames: &[(f64, usize)]) {
        if self.opts.vtu {
            for &(t, step) in frames {
                self.pvd.push(t, self.dir.join(frame_name(step, "vtu")));
            }
        }
        self.frames = frames.len();
    }

    /// Rewrites `sim.pvd` with the frames listed so far (after [`FrameWriter::resume`]).
    pub fn write_series(&self) -> Result<()> {
        if self.opts.vtu {
            self.pvd.write()?;
        }
        Ok(())
    }

    /// The files frame `index` consists of, relative to the output directory (`frames/...`):
    /// `.vtu`, `.obj` as configured, and `.png` when `png`.
    pub fn files(&self, index: usize, png: bool) -> Vec<String> {
        let mut out = Vec::new();
        for (on, ext) in [(self.opts.vtu, "vtu"), (self.opts.obj, "obj"), (png, "png")] {
            if on {
                out.push(format!("frames/{}", frame_name(index, ext)));
            }
        }
        out
    }

    /// Writes frame `index` at time `t` (s) from flattened positions `x` (m) and velocities
    /// `v` (m/s). Point data: displacement (m) and velocity (m/s).
    pub fn write(
        &mut self,
        index: usize,
        t: f64,
        mesh: &TetMesh,
        x: &[f64],
        v: &[f64],
    ) -> Result<()> {
        let pos: Vec<[f64; 3]> = x.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
        if self.opts.vtu {
            let disp: Vec<[f64; 3]> = pos
                .iter()
                .zip(&self.rest)
                .map(|(p, r)| [p[0] - r[0], p[1] - r[1], p[2] - r[2]])
                .collect();
            let vel: Vec<[f64; 3]> = v.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
            let file = self.dir.join(frame_name(index, "vtu"));
            write_vtu(
                &file,
                &pos,
                &mesh.tets,
                &[
                    ("displacement", Field::Vector(&disp)),
                    ("velocity", Field::Vector(&vel)),
                ],
                &[],
            )?;
            self.pvd.push(t, file);
            self.pvd.write()?;
        }
        if let Some(s) = &self.surface {
            write_obj(&self.dir.join(frame_name(index, "obj")), &pos, s)?;
        }
        self.frames += 1;
        Ok(())
    }
}
