// Writes a soft body's surface vertices (position and unit normal, f32) into the vertex buffer
// Bevy draws its mesh from, reading jello's device position buffer: no CPU copy of positions.
//
// One invocation per surface vertex s. The normal is the area-weighted sum of the adjacent
// triangles' normals (the cross product's length is twice the triangle's area), summed from
// the vertex's own triangle list (a CSR): no atomics, every vertex written by one thread.

struct Params {
    // First f32 of this mesh's vertices in the slab (vertex range start × 6).
    base: u32,
    // Surface vertices.
    count: u32,
    pad0: u32,
    pad1: u32,
    // jello's device positions are relative to this point (the rest centroid), m.
    origin: vec4<f32>,
}

@group(0) @binding(0) var<uniform> params: Params;
// jello's positions: xyz in metres relative to params.origin, 16-byte stride.
@group(0) @binding(1) var<storage, read> positions: array<vec4<f32>>;
// Tet-mesh vertex of each surface vertex.
@group(0) @binding(2) var<storage, read> vertex_map: array<u32>;
// Surface vertex s's triangles are adjacency[adjacency_start[s] .. adjacency_start[s + 1]].
@group(0) @binding(3) var<storage, read> adjacency_start: array<u32>;
@group(0) @binding(4) var<storage, read> adjacency: array<u32>;
// Surface triangles over surface vertices, three per triangle.
@group(0) @binding(5) var<storage, read> triangles: array<u32>;
// Bevy's vertex slab: [position.xyz, normal.xyz] per vertex (Mesh attribute order).
@group(0) @binding(6) var<storage, read_write> vertices: array<f32>;

fn relative(s: u32) -> vec3<f32> {
    return positions[vertex_map[s]].xyz;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let s = id.x;
    if s >= params.count {
        return;
    }
    var n = vec3<f32>(0.0, 0.0, 0.0);
    for (var k = adjacency_start[s]; k < adjacency_start[s + 1u]; k = k + 1u) {
        let t = 3u * adjacency[k];
        let a = relative(triangles[t]);
        let b = relative(triangles[t + 1u]);
        let c = relative(triangles[t + 2u]);
        n = n + cross(b - a, c - a);
    }
    let len = length(n);
    var unit = vec3<f32>(0.0, 1.0, 0.0);
    if len > 0.0 {
        unit = n / len;
    }
    let p = relative(s) + params.origin.xyz;
    let o = params.base + 6u * s;
    vertices[o] = p.x;
    vertices[o + 1u] = p.y;
    vertices[o + 2u] = p.z;
    vertices[o + 3u] = unit.x;
    vertices[o + 4u] = unit.y;
    vertices[o + 5u] = unit.z;
}
