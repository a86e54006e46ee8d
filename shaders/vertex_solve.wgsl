// Per listed vertex k < n: i = lists[u1 + k]; δ = −(A + H_b)⁻¹ r by Cholesky with H_b = hbar[i]
// the barrier curvature; u0 & 3 picks the system: 0 = primary, on failure the fallback (JGS2
// with its VBD fallback); 1 = primary only; 2 = fallback only. A failed solve gives δ = 0. δ is
// then limited to 0.9 × its first time of impact with any obstacle (solver.rs: local_steps,
// filter; from the contact records, nc = len(contacts) / nv per vertex) and written to
// dirs[(u0 >> 4)·nv + i], nv = len(hbar).
#import params
#import jgs2
#import obstacle

@group(0) @binding(0) var<storage, read> lists: array<u32>;
@group(0) @binding(1) var<storage, read> sys: array<LocalSystem>;
@group(0) @binding(2) var<storage, read> hbar: array<mat3x3<f32>>;
@group(0) @binding(3) var<storage, read> contacts: array<Contact>;
@group(0) @binding(4) var<storage, read_write> dirs: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let k = linear_group(wid) * 64u + lid.x;
    if k >= P.n {
        return;
    }
    let i = lists[P.u1 + k];
    let s = sys[i];
    let hb = hbar[i];
    let mode = P.u0 & 3u;
    var res: Solve3;
    res.ok = false;
    res.d = vec3<f32>(0.0);
    if mode != 2u {
        res = chol_solve3(s.a + hb, s.r.xyz);
    }
    if !res.ok && mode != 1u {
        res = chol_solve3(s.af + hb, s.rf.xyz);
    }
    var d = vec3<f32>(0.0);
    if res.ok {
        d = res.d;
    }
    let nv = arrayLength(&hbar);
    d = d * contact_step_bound(i, arrayLength(&contacts) / nv, d);
    dirs[(P.u0 >> 4u) * nv + i] = vec4<f32>(d, 0.0);
}
