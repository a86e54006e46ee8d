// Flat-shaded surface rendering straight from a simulation's position buffer.
//
// Vertex input is the simulation's `array<vec4<f32>>` (xyz = world position in metres, w unused),
// so no normals are stored anywhere: the fragment shader rebuilds the face normal from the
// screen-space derivatives of the interpolated world position. Those derivatives are tangent to
// the (planar) triangle, so their cross product is the exact face normal — flat shading for free.
// The normal is flipped to face the viewer, which makes the result independent of winding.
//
// All colours here are linear; the colour target is sRGB so the hardware encodes on store.

struct Frame {
    view_proj: mat4x4<f32>,
    // xyz: eye position (m).
    eye: vec4<f32>,
    // xyz: unit direction towards the key light; w: its intensity.
    key_dir: vec4<f32>,
    // xyz: unit direction towards the fill light; w: its intensity.
    fill_dir: vec4<f32>,
    // xyz: unit world up; w: ambient intensity.
    up: vec4<f32>,
    // rgb: background colour (linear), used to fade the ground plane out at its rim.
    background: vec4<f32>,
    // xyz: ground plane centre (m); w: radius over which the ground fades out (m).
    ground_centre: vec4<f32>,
    // xyz: first in-plane ground axis; w: checker cell size (m).
    ground_u: vec4<f32>,
    // xyz: second in-plane ground axis; w: unused.
    ground_v: vec4<f32>,
};

struct Draw {
    // rgb: base colour (linear); a: unused.
    colour: vec4<f32>,
    // x: 1 for the ground plane, 0 for a body.
    params: vec4<f32>,
};

@group(0) @binding(0) var<uniform> frame: Frame;
@group(0) @binding(1) var<uniform> draw: Draw;

struct VsOut {
    @builtin(position) clip: vec4<f32>,
    @location(0) world: vec3<f32>,
};

@vertex
fn vs_main(@location(0) position: vec4<f32>) -> VsOut {
    var out: VsOut;
    out.world = position.xyz;
    out.clip = frame.view_proj * vec4<f32>(position.xyz, 1.0);
    return out;
}

@fragment
fn fs_main(in: VsOut) -> @location(0) vec4<f32> {
    // Derivatives first: they must be taken in uniform control flow.
    let dx = dpdx(in.world);
    let dy = dpdy(in.world);
    let to_eye = normalize(frame.eye.xyz - in.world);
    var n = cross(dx, dy);
    let n_len = length(n);
    if (n_len > 1e-20) {
        n = n / n_len;
    } else {
        // Degenerate (edge-on) footprint: light it as if facing the viewer.
        n = to_eye;
    }
    if (dot(n, to_eye) < 0.0) {
        n = -n;
    }

    let is_ground = draw.params.x > 0.5;
    var base = draw.colour.rgb;
    if (is_ground) {
        n = frame.up.xyz;
        let rel = in.world - frame.ground_centre.xyz;
        let cell = max(frame.ground_u.w, 1e-6);
        let cu = floor(dot(rel, frame.ground_u.xyz) / cell);
        let cv = floor(dot(rel, frame.ground_v.xyz) / cell);
        let odd = (i32(cu) + i32(cv)) & 1;
        base = base * select(1.0, 0.88, odd == 1);
    }

    // Hemispherical ambient: a bit brighter for faces turned up.
    let hemi = 0.75 + 0.25 * dot(n, frame.up.xyz);
    var light = vec3<f32>(frame.up.w * hemi);
    let key = frame.key_dir.xyz;
    light += vec3<f32>(frame.key_dir.w * max(dot(n, key), 0.0));
    light += vec3<f32>(frame.fill_dir.w * max(dot(n, frame.fill_dir.xyz), 0.0));
    var colour = base * light;
    if (!is_ground) {
        // A small Blinn-Phong highlight from the key light reads the facets better.
        let h = normalize(key + to_eye);
        colour += vec3<f32>(0.12 * pow(max(dot(n, h), 0.0), 48.0));
    }

    if (is_ground) {
        // Fade the ground into the background so its square rim does not show.
        let rel = in.world - frame.ground_centre.xyz;
        let r = length(rel - dot(rel, frame.up.xyz) * frame.up.xyz);
        let fade_r = max(frame.ground_centre.w, 1e-6);
        let t = smoothstep(0.55 * fade_r, fade_r, r);
        colour = mix(colour, frame.background.rgb, t);
    }
    return vec4<f32>(colour, 1.0);
}
