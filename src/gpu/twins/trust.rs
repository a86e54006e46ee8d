//! Twin of the device IPC step filter's trust-box bound (`shaders/ipc_trust.wgsl`), f32,
//! operation for operation.
//!
//! The JGS2/VBD device iteration evaluates IPC contact over a candidate pair list built on the
//! host for a box per vertex ([`crate::contact::IpcContact::candidates_around`]): every pair
//! that can come within d̂ while each vertex stays in its box is in the list, so the list
//! evaluates every such point exactly and CCD over it filters every move that stays inside.
//! This kernel keeps moves inside: per vertex the largest α ≤ 1 for which x + α·step stays in
//! the box, folded into the step's bound as its reciprocal (the layout of `jgs2_combine`'s
//! bounds), and per 256-vertex group the maximum reciprocal, which `reduce_max_abs` finishes
//! into the box's own bound — so the host knows when the box, not a time of impact, limited an
//! accepted step, and rebuilds the list around the new point.
//!
//! f32 rounding: (hi − x)/step may exceed the exact ratio by a few ulp and the trial position
//! x + α·step rounds by ~ε(‖x‖ + ‖step‖), so a vertex can land a few ulp of its coordinates
//! outside the box; the host shrinks each box by far more than that
//! (`DeviceIpc`'s trust boxes).

use super::need;
use crate::gpu::{GpuVec4, Params};
use crate::Result;
use rayon::prelude::*;

/// The factor 1 − 8ε_f32 a box-limited α is scaled by (module docs).
pub const TRUST_SHRINK: f32 = 0.999_999_05;

/// Vertices per partial of `ipc_trust` (its workgroup size).
pub const TRUST_GROUP: usize = 256;

/// Twin of `ipc_trust.wgsl` (module docs): for vertex v < n, α_v = the largest α ≤ 1
/// keeping `x[v] + α·step[v]` in the box `boxes[2v]..boxes[2v + 1]`, times [`TRUST_SHRINK`]
/// (≥ 0) when below 1; `bound[v]` =
/// max(`bound[v]`, 1/max(α_v, 10⁻³⁰)); per group g of [`TRUST_GROUP`] vertices `part[g]` = the
/// maximum of those reciprocals.
pub fn ipc_trust(
    p: &Params,
    x: &[GpuVec4],
    step: &[GpuVec4],
    boxes: &[GpuVec4],
    bound: &mut [f32],
    part: &mut [f32],
) -> Result<()> {
    let n = p.n as usize;
    need(x.len(), n, "ipc_trust x")?;
    need(step.len(), n, "ipc_trust step")?;
    need(boxes.len(), 2 * n, "ipc_trust boxes")?;
    need(bound.len(), n, "ipc_trust bound")?;
    need(part.len(), n.div_ceil(TRUST_GROUP), "ipc_trust part")?;
    let inv: Vec<f32> = (0..n)
        .into_par_iter()
        .map(|v| {
            let (pv, d) = (x[v], step[v]);
            let (lo, hi) = (boxes[2 * v], boxes[2 * v + 1]);
            let mut alpha = 1.0f32;
            for k in 0..3 {
                if d[k] > 0.0 {
                    alpha = alpha.min((hi[k] - pv[k]) / d[k]);
                } else if d[k] < 0.0 {
                    alpha = alpha.min((lo[k] - pv[k]) / d[k]);
                }
            }
            if alpha < 1.0 {
                alpha = (alpha * TRUST_SHRINK).max(0.0);
            }
            1.0 / alpha.max(1e-30)
        })
        .collect();
    for (b, i) in bound[..n].iter_mut().zip(&inv) {
        *b = b.max(*i);
    }
    for (g, pg) in part[..n.div_ceil(TRUST_GROUP)].iter_mut().enumerate() {
        *pg = inv[g * TRUST_GROUP..((g + 1) * TRUST_GROUP).min(n)]
            .iter()
            .fold(0.0f32, |a, &b| a.max(b));
    }
    Ok(())
}
