// The device broad phase's hashed uniform grid (Rust: crate::gpu::twins::broad, which documents
// the design). Primitive records `prims[i]` are vec4<u32>(c0, c1, c2, body bits): faces first
// (c0, c1, c2), then edges (c0, c1, c1), then surface vertices (v, v, v); collision vertex ids.
// Body bits: bits 0–29 the body, bit 30 self-contact, bit 31 obstacle. Boxes are two vec4s per
// primitive (lo, hi; w unused).

// Cell coordinates are clamped to [-CELL_BIAS, CELL_BIAS): 21 bits per axis.
const CELL_BIAS: i32 = 1048576;
// A box spanning more cells than this (or more than LARGE_SPAN along one axis) is "large":
// kept out of the grid and tested directly.
const LARGE_CELLS: u32 = 512u;
const LARGE_SPAN: u32 = 512u;
// Empty bucket / end of a bucket's list.
const EMPTY: u32 = 0xffffffffu;
const BODY_MASK: u32 = 0x3fffffffu;
const SELF_CONTACT: u32 = 0x40000000u;
const OBSTACLE: u32 = 0x80000000u;

// Cell coordinate of v (m) for 1/h = inv: floor(v·inv) clamped, monotone in v (NaN → lowest).
fn cell_coord(v: f32, inv: f32) -> i32 {
    let c = floor(v * inv);
    if c >= f32(-CELL_BIAS) {
        return i32(min(c, f32(CELL_BIAS - 1)));
    }
    return -CELL_BIAS;
}

fn cell_of(p: vec3<f32>, inv: f32) -> vec3<i32> {
    return vec3<i32>(cell_coord(p.x, inv), cell_coord(p.y, inv), cell_coord(p.z, inv));
}

// Cells per axis of the range [lo, hi] (inclusive).
fn cell_span(lo: vec3<i32>, hi: vec3<i32>) -> vec3<u32> {
    return vec3<u32>(max(hi - lo, vec3<i32>(0))) + vec3<u32>(1u);
}

fn is_large(span: vec3<u32>) -> bool {
    if span.x > LARGE_SPAN || span.y > LARGE_SPAN || span.z > LARGE_SPAN {
        return true;
    }
    return span.x * span.y * span.z > LARGE_CELLS;
}

// The biased coordinates (each < 2^21).
fn cell_biased(c: vec3<i32>) -> vec3<u32> {
    return vec3<u32>(c + vec3<i32>(CELL_BIAS));
}

// The exact 63-bit cell key as two words.
fn cell_key(u: vec3<u32>) -> vec2<u32> {
    return vec2<u32>(u.x | (u.y << 21u), (u.y >> 11u) | (u.z << 10u));
}

// Bucket of a cell in a table of `t` (a power of two) buckets.
fn cell_bucket(u: vec3<u32>, t: u32) -> u32 {
    return ((u.x * 73856093u) ^ (u.y * 19349663u) ^ (u.z * 83492791u)) & (t - 1u);
}

fn boxes_overlap(alo: vec3<f32>, ahi: vec3<f32>, blo: vec3<f32>, bhi: vec3<f32>) -> bool {
    return all(alo <= bhi) && all(blo <= ahi);
}

// CollisionMesh::bodies_may_touch on the body bits.
fn bodies_may_touch(a: u32, b: u32) -> bool {
    if (a & b & OBSTACLE) != 0u {
        return false;
    }
    return (a & BODY_MASK) != (b & BODY_MASK) || (a & SELF_CONTACT) != 0u;
}
