// Block partial dot products for the JGS2 iteration over n vertices (1024 per block = 256
// threads × 4, as reduce_sum), with u0 ≤ 3 directions d_p = dirs[p·n ..] and their Hessian
// products hd_q = hd[q·n ..]:
//   out[u1 + 16·blk + 0]          = Σ |g_v|²·w_v²   (w = 1/c_v of the characteristic norm)
//   out[u1 + 16·blk + 1 + p]      = Σ g·d_p
//   out[u1 + 16·blk + 4 + 3p + q] = Σ d_p·hd_q
// (entries 13..16 and those of absent directions are 0). Summed over blocks in f64 on the host.
// u0 = nd | GD_ONLY (0x100): the g·d_p only (hd is not read; the d_p·hd_q entries are 0) —
// the plain trial of the cut safeguard, which has no Hessian products.
#import params

@group(0) @binding(0) var<storage, read> g: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> dirs: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> hd: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> weight: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

const WG: u32 = 256u;
const ITEMS: u32 = 4u;
const NDOT: u32 = 13u;
var<workgroup> sh: array<f32, 3328>; // NDOT × WG

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let blk = linear_group(wid);
    let base = blk * WG * ITEMS;
    let n = P.n;
    let nd = min(P.u0 & 0xffu, 3u);
    var nh = nd;
    if (P.u0 & 0x100u) != 0u {
        nh = 0u;
    }
    var acc: array<f32, 13>;
    for (var j = 0u; j < NDOT; j++) {
        acc[j] = 0.0;
    }
    for (var it = 0u; it < ITEMS; it++) {
        let i = base + it * WG + lid.x;
        if i < n {
            let gi = g[i].xyz;
            let w = weight[i];
            acc[0] += dot(gi, gi) * w * w;
            for (var p = 0u; p < nd; p++) {
                let dp = dirs[p * n + i].xyz;
                acc[1u + p] += dot(gi, dp);
                if p < nh {
                    for (var q = 0u; q < nh; q++) {
                        acc[4u + 3u * p + q] += dot(dp, hd[q * n + i].xyz);
                    }
                }
            }
        }
    }
    for (var j = 0u; j < NDOT; j++) {
        sh[j * WG + lid.x] = acc[j];
    }
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if lid.x < s {
            for (var j = 0u; j < NDOT; j++) {
                sh[j * WG + lid.x] += sh[j * WG + lid.x + s];
            }
        }
    }
    if lid.x == 0u {
        for (var j = 0u; j < 16u; j++) {
            var val = 0.0;
            if j < NDOT {
                val = sh[j * WG];
            }
            out[P.u1 + 16u * blk + j] = val;
        }
    }
}
