//! Twins of `axpy`, `scale`, `copy_vec4` and the block reductions.

use super::need;
use crate::gpu::Params;
use crate::Result;
use rayon::prelude::*;

pub use crate::gpu::abi::REDUCE_BLOCK;
use crate::gpu::abi::{REDUCE_ITEMS as ITEMS, REDUCE_THREADS as WG};

/// `y[i] = f0·x[i] + y[i]`, i < n.
pub fn axpy(p: &Params, x: &[f32], y: &mut [f32]) -> Result<()> {
    let n = p.n as usize;
    need(x.len(), n, "axpy x")?;
    need(y.len(), n, "axpy y")?;
    let a = p.f0;
    y[..n]
        .par_iter_mut()
        .zip(x[..n].par_iter())
        .for_each(|(y, x)| *y += a * *x);
    Ok(())
}

/// `x[i] = f0·x[i]`, i < n.
pub fn scale(p: &Params, x: &mut [f32]) -> Result<()> {
    let n = p.n as usize;
    need(x.len(), n, "scale x")?;
    let a = p.f0;
    x[..n].par_iter_mut().for_each(|x| *x *= a);
    Ok(())
}

/// `y[i] = x[i]`, i < n (vec4s).
pub fn copy_vec4(p: &Params, x: &[[f32; 4]], y: &mut [[f32; 4]]) -> Result<()> {
    let n = p.n as usize;
    need(x.len(), n, "copy_vec4 x")?;
    need(y.len(), n, "copy_vec4 y")?;
    y[..n].copy_from_slice(&x[..n]);
    Ok(())
}

/// Number of partials a first reduction pass over `n` items produces.
pub fn partial_count(n: usize) -> usize {
    n.div_ceil(REDUCE_BLOCK).max(1)
}

/// Block reduction mirroring the WGSL: per thread an in-order fold over its 4 strided items,
/// then the shared-memory tree.
fn block_reduce(
    p: &Params,
    out: &mut [f32],
    what: &str,
    item: impl Fn(usize) -> f32 + Sync,
    fold: impl Fn(f32, f32) -> f32 + Sync,
) -> Result<()> {
    let n = p.n as usize;
    let groups = partial_count(n);
    let off = p.u0 as usize;
    need(out.len(), off + groups, what)?;
    out[off..off + groups]
        .par_iter_mut()
        .enumerate()
        .for_each(|(g, o)| {
            let base = g * REDUCE_BLOCK;
            let mut sh = [0.0f32; WG];
            for (t, s) in sh.iter_mut().enumerate() {
                let mut acc = 0.0f32;
                for k in 0..ITEMS {
                    let i = base + k * WG + t;
                    if i < n {
                        acc = fold(acc, item(i));
                    }
                }
                *s = acc;
            }
            let mut s = WG / 2;
            while s > 0 {
                for t in 0..s {
                    sh[t] = fold(sh[t], sh[t + s]);
                }
                s >>= 1;
            }
            *o = sh[0];
        });
    Ok(())
}

/// Partial sums: `out[u0 + g] = Σ a[i]` over block g of [`REDUCE_BLOCK`] items.
pub fn reduce_sum(p: &Params, a: &[f32], out: &mut [f32]) -> Result<()> {
    need(a.len(), p.n as usize, "reduce_sum a")?;
    block_reduce(p, out, "reduce_sum out", |i| a[i], |x, y| x + y)
}

/// Partial dot products: `out[u0 + g] = Σ a[i]·b[i]` over block g.
pub fn reduce_dot(p: &Params, a: &[f32], b: &[f32], out: &mut [f32]) -> Result<()> {
    need(a.len(), p.n as usize, "reduce_dot a")?;
    need(b.len(), p.n as usize, "reduce_dot b")?;
    block_reduce(p, out, "reduce_dot out", |i| a[i] * b[i], |x, y| x + y)
}

/// Partial max-abs: `out[u0 + g] = max |a[i]|` over block g.
pub fn reduce_max_abs(p: &Params, a: &[f32], out: &mut [f32]) -> Result<()> {
    need(a.len(), p.n as usize, "reduce_max_abs a")?;
    block_reduce(p, out, "reduce_max_abs out", |i| a[i].abs(), f32::max)
}
