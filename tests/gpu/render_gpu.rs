//! Surface renderer on a real wgpu adapter (Mesa lavapipe / llvmpipe in CI). Fails when no
//! adapter is found unless JELLO_SKIP_GPU_TESTS=1. `WGPU_BACKEND=gl` selects the GL backend.

use glam::Vec3;
use jello::render::{
    self, bounding_box, Camera, GroundPlane, RenderStyle, RgbaImage, SurfaceDraw, SurfaceMesh,
    SurfaceRenderer, UpAxis,
};
use std::sync::OnceLock;

struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
}

fn gpu() -> Option<&'static Gpu> {
    static GPU: OnceLock<Option<Gpu>> = OnceLock::new();
    let gpu = GPU.get_or_init(|| {
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        }))
        .ok()?;
        eprintln!("render tests on adapter: {:?}", adapter.get_info());
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("jello render tests"),
            required_limits: wgpu::Limits::downlevel_defaults(),
            ..Default::default()
        }))
        .ok()?;
        Some(Gpu { device, queue })
    });
    if gpu.is_none() {
        assert!(
            std::env::var("JELLO_SKIP_GPU_TESTS").is_ok_and(|v| v == "1"),
            "no wgpu adapter/device found (set JELLO_SKIP_GPU_TESTS=1 to skip GPU tests)"
        );
        eprintln!("skipping: no GPU adapter and JELLO_SKIP_GPU_TESTS=1");
    }
    gpu.as_ref()
}

/// Axis-aligned cube of side `side` centred at `c`: 8 vertices, 12 triangles. Each face's
/// winding is checked against its outward direction so the triangles are outward-oriented.
fn cube(c: Vec3, side: f32) -> (Vec<[f32; 4]>, Vec<[u32; 3]>) {
    let h = 0.5 * side;
    let verts: Vec<Vec3> = (0..8)
        .map(|i| {
            c + h * Vec3::new(
                if i & 1 == 0 { -1.0 } else { 1.0 },
                if i & 2 == 0 { -1.0 } else { 1.0 },
                if i & 4 == 0 { -1.0 } else { 1.0 },
            )
        })
        .collect();
    // Each face: 4 corners in cyclic order.
    let faces: [[u32; 4]; 6] = [
        [0, 2, 6, 4], // -x
        [1, 3, 7, 5], // +x
        [0, 1, 5, 4], // -y
        [2, 3, 7, 6], // +y
        [0, 1, 3, 2], // -z
        [4, 5, 7, 6], // +z
    ];
    let mut tris = Vec::new();
    for f in faces {
        let q = f.map(|i| verts[i as usize]);
        let face_centre = 0.25 * (q[0] + q[1] + q[2] + q[3]);
        let n = (q[1] - q[0]).cross(q[2] - q[0]);
        let f = if n.dot(face_centre - c) > 0.0 {
            f
        } else {
            [f[3], f[2], f[1], f[0]]
        };
        tris.push([f[0], f[1], f[2]]);
        tris.push([f[0], f[2], f[3]]);
    }
    let pos = verts.iter().map(|v| [v.x, v.y, v.z, 1.0]).collect();
    (pos, tris)
}

fn render(
    g: &Gpu,
    size: (u32, u32),
    samples: u32,
    ground: Option<GroundPlane>,
    camera: &Camera,
    draws: &[SurfaceDraw<'_>],
) -> RgbaImage {
    let mut r = SurfaceRenderer::with_samples(&g.device, size, samples).unwrap();
    r.set_ground(ground).unwrap();
    let mut enc = g.device.create_command_encoder(&Default::default());
    r.record(&g.device, &mut enc, draws, camera).unwrap();
    g.queue.submit([enc.finish()]);
    r.read_rgba(&g.device, &g.queue).unwrap()
}

fn differs(a: [u8; 4], b: [u8; 4], tol: u8) -> bool {
    (0..3).any(|k| a[k].abs_diff(b[k]) > tol)
}

/// Expected background bytes: the style's sRGB colour quantised to 8 bits.
fn background_bytes() -> [u8; 4] {
    let bg = RenderStyle::default().background;
    [
        (bg[0] * 255.0).round() as u8,
        (bg[1] * 255.0).round() as u8,
        (bg[2] * 255.0).round() as u8,
        255,
    ]
}

/// Pixels that differ from the background: (count, centroid x, centroid y, bbox).
fn coverage(img: &RgbaImage) -> (usize, f32, f32, [u32; 4]) {
    let bg = background_bytes();
    let (mut n, mut sx, mut sy) = (0usize, 0f64, 0f64);
    let mut bb = [u32::MAX, u32::MAX, 0, 0];
    for y in 0..img.height {
        for x in 0..img.width {
            if differs(img.get(x, y).unwrap(), bg, 3) {
                n += 1;
                sx += x as f64 + 0.5;
                sy += y as f64 + 0.5;
                bb = [bb[0].min(x), bb[1].min(y), bb[2].max(x), bb[3].max(y)];
            }
        }
    }
    let d = n.max(1) as f64;
    (n, (sx / d) as f32, (sy / d) as f32, bb)
}

const RED: [f32; 3] = [0.9, 0.1, 0.1];
const BLUE: [f32; 3] = [0.1, 0.2, 0.9];

#[test]
fn empty_frame_is_the_background_colour() {
    let Some(g) = gpu() else { return };
    let cam = Camera::framing([-1.0; 3], [1.0; 3], 1.0).unwrap();
    let img = render(g, (64, 48), 4, None, &cam, &[]);
    assert_eq!((img.width, img.height), (64, 48));
    assert_eq!(img.pixels.len(), 64 * 48 * 4);
    let bg = background_bytes();
    for y in 0..img.height {
        for x in 0..img.width {
            let p = img.get(x, y).unwrap();
            assert!(
                !differs(p, bg, 1) && p[3] == 255,
                "({x},{y}) = {p:?}, want {bg:?}"
            );
        }
    }
}

#[test]
fn cube_covers_its_projection_and_stays_in_frame() {
    let Some(g) = gpu() else { return };
    // Odd width exercises the 256-byte row padding of the read-back.
    let size = (203, 151);
    let centre = Vec3::new(0.3, 1.0, -0.2);
    let (pos, tris) = cube(centre, 1.0);
    let mesh = SurfaceMesh::new(&g.device, &pos, &tris).unwrap();
    let (lo, hi) = bounding_box(&pos).unwrap();
    let cam = Camera::framing(lo, hi, size.0 as f32 / size.1 as f32).unwrap();
    let img = render(g, size, 4, None, &cam, &[mesh.draw(RED)]);
    let (n, cx, cy, bb) = coverage(&img);
    let frac = n as f32 / (size.0 * size.1) as f32;
    assert!(frac > 0.08, "cube covers only {:.3} of the image", frac);
    // The framing camera keeps the whole cube inside the image.
    assert!(
        bb[0] > 0 && bb[1] > 0 && bb[2] < size.0 - 1 && bb[3] < size.1 - 1,
        "{bb:?}"
    );
    // Every projected corner and the centroid land on covered pixels (or on its edge).
    let bg = background_bytes();
    let p = cam.project_to_pixel(centre, size.0, size.1).unwrap();
    let px = img.get(p[0] as u32, p[1] as u32).unwrap();
    assert!(differs(px, bg, 3), "centroid pixel {p:?} is background");
    assert!(px[0] > px[2], "red body should render reddish, got {px:?}");
    for v in &pos {
        let q = cam
            .project_to_pixel([v[0], v[1], v[2]], size.0, size.1)
            .unwrap();
        assert!(
            (q[0] - bb[0] as f32) > -1.5
                && (q[0] - bb[2] as f32) < 2.5
                && (q[1] - bb[1] as f32) > -1.5
                && (q[1] - bb[3] as f32) < 2.5,
            "corner {q:?} outside coverage {bb:?}"
        );
    }
    // Coverage centroid is near the projected centroid (a cube's silhouette is nearly
    // symmetric about it; perspective shifts it by a few pixels at most).
    assert!(
        (cx - p[0]).abs() < 6.0 && (cy - p[1]).abs() < 6.0,
        "{cx},{cy} vs {p:?}"
    );
}

#[test]
fn translating_the_body_in_x_moves_it_right() {
    let Some(g) = gpu() else { return };
    let size = (160, 120);
    let (pos, tris) = cube(Vec3::ZERO, 0.5);
    let mesh = SurfaceMesh::new(&g.device, &pos, &tris).unwrap();
    // One camera for both frames, framing the union of both positions.
    let shift = Vec3::new(0.6, 0.0, 0.0);
    let cam = Camera::framing([-0.25; 3], Vec3::splat(0.25) + shift, 160.0 / 120.0).unwrap();
    let r = SurfaceRenderer::new(&g.device, size).unwrap();
    let frame = |positions: &[[f32; 4]]| {
        mesh.write_positions(&g.queue, positions).unwrap();
        let mut enc = g.device.create_command_encoder(&Default::default());
        r.record(&g.device, &mut enc, &[mesh.draw(BLUE)], &cam)
            .unwrap();
        g.queue.submit([enc.finish()]);
        r.read_rgba(&g.device, &g.queue).unwrap()
    };
    let a = coverage(&frame(&pos));
    let moved: Vec<[f32; 4]> = pos
        .iter()
        .map(|p| [p[0] + shift.x, p[1], p[2], p[3]])
        .collect();
    let b = coverage(&frame(&moved));
    let pa = cam.project_to_pixel(Vec3::ZERO, size.0, size.1).unwrap();
    let pb = cam.project_to_pixel(shift, size.0, size.1).unwrap();
    let (seen, want) = (b.1 - a.1, pb[0] - pa[0]);
    assert!(want > 10.0, "test setup: projected shift {want} too small");
    assert!(
        (seen - want).abs() < 0.2 * want,
        "coverage centroid moved {seen} px, projection says {want} px"
    );
    assert!(a.0 > 200 && b.0 > 200, "coverage {} / {}", a.0, b.0);
}

#[test]
fn near_body_occludes_far_body_in_either_draw_order() {
    let Some(g) = gpu() else { return };
    let size = (128, 128);
    let cam = Camera::look_at([0.0, 0.0, 6.0], [0.0, 0.0, 0.0], Vec3::Y, 40.0, 1.0);
    let (far_p, far_t) = cube(Vec3::ZERO, 1.0);
    let (near_p, near_t) = cube(Vec3::new(0.0, 0.0, 2.0), 0.4);
    let far = SurfaceMesh::new(&g.device, &far_p, &far_t).unwrap();
    let near = SurfaceMesh::new(&g.device, &near_p, &near_t).unwrap();
    let orders = [
        [far.draw(BLUE), near.draw(RED)],
        [near.draw(RED), far.draw(BLUE)],
    ];
    for draws in orders {
        let img = render(g, size, 4, None, &cam, &draws);
        let c = img.get(64, 64).unwrap();
        assert!(
            c[0] > c[2] + 40,
            "centre should show the near red cube, got {c:?}"
        );
        // Off the near cube but on the far one: blue.
        let side = cam
            .project_to_pixel([0.4, 0.0, 0.5], size.0, size.1)
            .unwrap();
        let s = img.get(side[0] as u32, side[1] as u32).unwrap();
        assert!(
            s[2] > s[0] + 40,
            "far cube should show blue at {side:?}, got {s:?}"
        );
    }
}

/// Culling is off and the normal comes from screen-space derivatives (which do not see the
/// winding), so a surface with every triangle flipped must render identically.
#[test]
fn winding_does_not_change_the_image() {
    let Some(g) = gpu() else { return };
    let size = (120, 90);
    let (pos, tris) = cube(Vec3::ZERO, 1.0);
    let flipped: Vec<[u32; 3]> = tris.iter().map(|t| [t[0], t[2], t[1]]).collect();
    let cam = Camera::framing([-0.5; 3], [0.5; 3], 120.0 / 90.0).unwrap();
    let a_mesh = SurfaceMesh::new(&g.device, &pos, &tris).unwrap();
    let b_mesh = SurfaceMesh::new(&g.device, &pos, &flipped).unwrap();
    let a = render(g, size, 4, None, &cam, &[a_mesh.draw(RED)]);
    let b = render(g, size, 4, None, &cam, &[b_mesh.draw(RED)]);
    assert!(coverage(&a).0 > 1000);
    let mismatched = (0..size.1)
        .flat_map(|y| (0..size.0).map(move |x| (x, y)))
        .filter(|&(x, y)| differs(a.get(x, y).unwrap(), b.get(x, y).unwrap(), 2))
        .count();
    assert!(
        mismatched * 1000 < (size.0 * size.1) as usize,
        "{mismatched} pixels differ between windings"
    );
}

#[test]
fn visible_faces_are_flat_and_distinct() {
    let Some(g) = gpu() else { return };
    let size = (200, 200);
    let (pos, tris) = cube(Vec3::ZERO, 1.0);
    let mesh = SurfaceMesh::new(&g.device, &pos, &tris).unwrap();
    let cam = Camera::framing([-0.5; 3], [0.5; 3], 1.0).unwrap();
    let img = render(g, size, 4, None, &cam, &[mesh.draw([0.7, 0.7, 0.7])]);
    // The fixed 3/4 view (+Y up) sees the +Y, +X and +Z faces.
    let mut shades = Vec::new();
    for face in [Vec3::X, Vec3::Y, Vec3::Z] {
        let p = cam.project_to_pixel(0.5 * face, size.0, size.1).unwrap();
        let (x, y) = (p[0] as u32, p[1] as u32);
        let c = img.get(x, y).unwrap();
        // Flat: the neighbourhood of the face centre has one colour.
        for (dx, dy) in [(-4i32, 0i32), (4, 0), (0, -4), (0, 4), (3, 3)] {
            let q = img
                .get((x as i32 + dx) as u32, (y as i32 + dy) as u32)
                .unwrap();
            assert!(!differs(q, c, 2), "face {face}: {q:?} vs {c:?} (not flat)");
        }
        shades.push((face, c));
    }
    for i in 0..3 {
        for j in i + 1..3 {
            assert!(
                differs(shades[i].1, shades[j].1, 8),
                "faces {} and {} shade alike: {:?} {:?}",
                shades[i].0,
                shades[j].0,
                shades[i].1,
                shades[j].1
            );
        }
    }
    // Key light from above: the top face is the brightest.
    let lum = |c: [u8; 4]| c[0] as u32 + c[1] as u32 + c[2] as u32;
    assert!(lum(shades[1].1) > lum(shades[0].1) && lum(shades[1].1) > lum(shades[2].1));
}

#[test]
fn ground_plane_shows_under_the_body_and_supports_z_up() {
    let Some(g) = gpu() else { return };
    let size = (160, 120);
    for up in [UpAxis::Y, UpAxis::Z] {
        let upv = up.vector();
        let centre = 0.5 * upv; // resting on the plane at height 0
        let (pos, tris) = cube(centre, 1.0);
        let mesh = SurfaceMesh::new(&g.device, &pos, &tris).unwrap();
        let (lo, hi) = bounding_box(&pos).unwrap();
        let cam = Camera::framing_with_up(lo, hi, 160.0 / 120.0, up).unwrap();
        let ground = GroundPlane::under_box(lo, hi, up);
        assert_eq!(ground.height, 0.0);
        let with = render(g, size, 4, Some(ground), &cam, &[mesh.draw(BLUE)]);
        let without = render(g, size, 4, None, &cam, &[mesh.draw(BLUE)]);
        assert!(coverage(&with).0 > coverage(&without).0 + 500, "{up:?}");
        // A ground point beside the cube (to the camera's right, slightly towards it) is
        // grey, not background.
        let back = (cam.eye - cam.target).normalize();
        let flat = (back - back.dot(upv) * upv).normalize();
        let probe = 1.0 * cam.right() + 0.3 * flat; // outside the cube's footprint
        let p = cam.project_to_pixel(probe, size.0, size.1).unwrap();
        let c = with
            .get(p[0] as u32, p[1] as u32)
            .unwrap_or_else(|| panic!("{up:?}: probe {p:?} outside the image"));
        assert!(
            differs(c, background_bytes(), 3),
            "{up:?}: ground pixel is background"
        );
        let spread = c[0].max(c[1]).max(c[2]) - c[0].min(c[1]).min(c[2]);
        assert!(spread < 20, "{up:?}: ground should be grey, got {c:?}");
        // The body still wins where it rests on the plane: its centre pixel is blue.
        let q = cam.project_to_pixel(centre, size.0, size.1).unwrap();
        let b = with.get(q[0] as u32, q[1] as u32).unwrap();
        assert!(b[2] > b[0] + 30, "{up:?}: body centre {b:?}");
    }
}

#[test]
fn msaa_and_single_sample_cover_the_same_area() {
    let Some(g) = gpu() else { return };
    let size = (150, 100);
    let (pos, tris) = cube(Vec3::ZERO, 1.0);
    let mesh = SurfaceMesh::new(&g.device, &pos, &tris).unwrap();
    let cam = Camera::framing([-0.5; 3], [0.5; 3], 1.5).unwrap();
    let one = coverage(&render(g, size, 1, None, &cam, &[mesh.draw(RED)])).0 as f32;
    let four = coverage(&render(g, size, 4, None, &cam, &[mesh.draw(RED)])).0 as f32;
    assert!(one > 1000.0);
    assert!(((one - four) / one).abs() < 0.05, "1x {one} vs 4x {four}");
}

#[test]
fn render_png_round_trips_through_the_file() {
    let Some(g) = gpu() else { return };
    let (pos, tris) = cube(Vec3::new(0.0, 0.5, 0.0), 1.0);
    let (lo, hi) = bounding_box(&pos).unwrap();
    let size = (320, 240);
    let cam = Camera::framing(lo, hi, 320.0 / 240.0).unwrap();
    let ground = GroundPlane::under_box(lo, hi, UpAxis::Y);
    let dir = std::env::temp_dir().join(format!("jello-render-test-{}", std::process::id()));
    let path = dir.join("cube.png");
    let img = render::render_png(
        &g.device,
        &g.queue,
        &pos,
        &tris,
        &cam,
        size,
        Some(ground),
        &path,
    )
    .unwrap();
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), size);
    assert_eq!(info.color_type, png::ColorType::Rgba);
    assert_eq!(&buf[..info.buffer_size()], &img.pixels[..]);
    std::fs::remove_dir_all(&dir).unwrap();
    // For eyeballing: JELLO_RENDER_EXAMPLE_PNG=/tmp/x.png keeps a copy.
    if let Ok(keep) = std::env::var("JELLO_RENDER_EXAMPLE_PNG") {
        render::write_png(std::path::Path::new(&keep), &img).unwrap();
    }
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let Some(g) = gpu() else { return };
    let (pos, tris) = cube(Vec3::ZERO, 1.0);
    let cam = Camera::framing([-0.5; 3], [0.5; 3], 1.0).unwrap();
    let e = render::render_rgba(&g.device, &g.queue, &pos, &[[0, 1, 8]], &cam, (8, 8), None)
        .unwrap_err();
    assert!(e.to_string().contains("triangle 0"), "{e}");
    let mut nan = pos.clone();
    nan[3][1] = f32::NAN;
    assert!(render::render_rgba(&g.device, &g.queue, &nan, &tris, &cam, (8, 8), None).is_err());
    assert!(SurfaceRenderer::new(&g.device, (0, 10)).is_err());
    assert!(SurfaceRenderer::with_samples(&g.device, (10, 10), 3).is_err());
    let mut bad_cam = cam;
    bad_cam.eye = bad_cam.target;
    assert!(render::render_rgba(&g.device, &g.queue, &pos, &tris, &bad_cam, (8, 8), None).is_err());

    let mesh = SurfaceMesh::new(&g.device, &pos, &tris).unwrap();
    assert!(mesh.write_positions(&g.queue, &pos[..4]).is_err());
    let r = SurfaceRenderer::new(&g.device, (8, 8)).unwrap();
    let mut enc = g.device.create_command_encoder(&Default::default());
    let mut d = mesh.draw(RED);
    d.index_count = 35;
    assert!(r.record(&g.device, &mut enc, &[d], &cam).is_err());
    d.index_count = 39;
    assert!(r.record(&g.device, &mut enc, &[d], &cam).is_err());
    // A buffer without VERTEX usage (e.g. a plain storage buffer) is refused.
    let storage_only = g.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 128,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let d = SurfaceDraw {
        positions: &storage_only,
        ..mesh.draw(RED)
    };
    let e = r.record(&g.device, &mut enc, &[d], &cam).unwrap_err();
    assert!(e.to_string().contains("VERTEX"), "{e}");
    let empty = g.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 0,
        usage: wgpu::BufferUsages::VERTEX,
        mapped_at_creation: false,
    });
    let d = SurfaceDraw {
        positions: &empty,
        ..mesh.draw(RED)
    };
    assert!(r.record(&g.device, &mut enc, &[d], &cam).is_err());
    // Nothing to draw is fine.
    let d = SurfaceDraw {
        positions: &empty,
        index_count: 0,
        ..mesh.draw(RED)
    };
    r.record(&g.device, &mut enc, &[d], &cam).unwrap();
    let mut ground = GroundPlane::under_box([0.0; 3], [1.0; 3], UpAxis::Y);
    ground.half_extent = -1.0;
    let mut r = r;
    assert!(r.set_ground(Some(ground)).is_err());
}

/// Positions and triangles of a surface.
type Surface = (Vec<[f32; 4]>, Vec<[u32; 3]>);

/// Reads a TetGen mesh (0-based) and returns its boundary triangles oriented away from the
/// tet's fourth vertex (outward), independently of the library's mesh code.
fn tetgen_surface(stem: &str) -> Option<Surface> {
    let node = std::fs::read_to_string(format!("{stem}.node")).ok()?;
    let ele = std::fs::read_to_string(format!("{stem}.ele")).ok()?;
    let nums = |l: &str| -> Vec<f64> { l.split_whitespace().map(|t| t.parse().unwrap()).collect() };
    let mut lines = node
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'));
    let n = nums(lines.next()?)[0] as usize;
    let pos: Vec<[f32; 4]> = lines
        .take(n)
        .map(|l| {
            let v = nums(l);
            [v[1] as f32, v[2] as f32, v[3] as f32, 1.0]
        })
        .collect();
    let mut lines = ele
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'));
    let m = nums(lines.next()?)[0] as usize;
    let mut faces: std::collections::HashMap<[u32; 3], ([u32; 3], u32)> = Default::default();
    let mut count: std::collections::HashMap<[u32; 3], u32> = Default::default();
    for l in lines.take(m) {
        let v = nums(l);
        let t = [v[1] as u32, v[2] as u32, v[3] as u32, v[4] as u32];
        for (a, b, c, d) in [(0, 1, 2, 3), (0, 1, 3, 2), (0, 2, 3, 1), (1, 2, 3, 0)] {
            let f = [t[a], t[b], t[c]];
            let mut key = f;
            key.sort();
            *count.entry(key).or_default() += 1;
            faces.insert(key, (f, t[d]));
        }
    }
    let p3 = |i: u32| Vec3::new(pos[i as usize][0], pos[i as usize][1], pos[i as usize][2]);
    let tris = count
        .iter()
        .filter(|(_, &c)| c == 1)
        .map(|(k, _)| {
            let (f, opp) = faces[k];
            let n = (p3(f[1]) - p3(f[0])).cross(p3(f[2]) - p3(f[0]));
            if n.dot(p3(opp) - p3(f[0])) > 0.0 {
                [f[0], f[2], f[1]]
            } else {
                f
            }
        })
        .collect();
    Some((pos, tris))
}

#[test]
fn real_mesh_surface_renders_inside_its_framing() {
    let Some(g) = gpu() else { return };
    let stem = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/meshes/armadillo_18k"
    );
    let Some((pos, tris)) = tetgen_surface(stem) else {
        eprintln!("skipping: {stem}.node/.ele not found");
        return;
    };
    assert!(tris.len() > 1000);
    let (lo, hi) = bounding_box(&pos).unwrap();
    let size = (320, 240);
    let cam = Camera::framing(lo, hi, 320.0 / 240.0).unwrap();
    let ground = GroundPlane::under_box(lo, hi, UpAxis::Y);
    let img =
        render::render_rgba(&g.device, &g.queue, &pos, &tris, &cam, size, Some(ground)).unwrap();
    // Every surface vertex projects inside the image, and the pixel there is not background
    // (sampled: the silhouette is covered wherever a vertex lands, up to antialiased edges).
    let bg = background_bytes();
    let mut covered = 0;
    for v in pos.iter().step_by(7) {
        let p = cam
            .project_to_pixel([v[0], v[1], v[2]], size.0, size.1)
            .unwrap();
        assert!(p[0] >= 0.0 && p[1] >= 0.0 && p[0] < size.0 as f32 && p[1] < size.1 as f32);
        covered += differs(img.get(p[0] as u32, p[1] as u32).unwrap(), bg, 3) as usize;
    }
    let sampled = pos.iter().step_by(7).count();
    assert!(
        covered * 100 >= sampled * 99,
        "{covered} of {sampled} vertices land on the body"
    );
    if let Ok(keep) = std::env::var("JELLO_RENDER_MESH_PNG") {
        render::write_png(std::path::Path::new(&keep), &img).unwrap();
    }
}

/// Two independent implementations (GPU pipeline, CPU rasterizer) of the same look must agree
/// pixel for pixel up to antialiasing and rounding.
#[test]
fn cpu_rasterizer_matches_gpu_image() {
    let Some(g) = gpu() else { return };
    let size = (200, 150);
    let (pos, tris) = cube(Vec3::new(0.0, 0.5, 0.0), 1.0);
    let (lo, hi) = bounding_box(&pos).unwrap();
    let cam = Camera::framing(lo, hi, 200.0 / 150.0).unwrap();
    let ground = GroundPlane::under_box(lo, hi, UpAxis::Y);
    let gpu_img =
        render::render_rgba(&g.device, &g.queue, &pos, &tris, &cam, size, Some(ground)).unwrap();
    let cpu_img = render::render_rgba_cpu(
        &[render::CpuSurface {
            positions: &pos,
            triangles: &tris,
            colour: render::DEFAULT_BODY_COLOUR,
            vertex_colours: None,
        }],
        &cam,
        size,
        &RenderStyle::default(),
        Some(&ground),
    )
    .unwrap();
    let n = (size.0 * size.1) as usize;
    let mut far_off = 0;
    let mut total = 0u64;
    for (a, b) in gpu_img
        .pixels
        .chunks_exact(4)
        .zip(cpu_img.pixels.chunks_exact(4))
    {
        let d = (0..3).map(|k| a[k].abs_diff(b[k])).max().unwrap();
        total += d as u64;
        far_off += (d > 12) as usize;
    }
    let mean = total as f64 / n as f64;
    eprintln!("gpu vs cpu: mean max-channel diff {mean:.3}, {far_off} pixels off by > 12");
    assert!(mean < 1.0, "mean difference {mean}");
    assert!(
        far_off * 500 < n,
        "{far_off} of {n} pixels differ by more than 12 levels"
    );
    let (cg, cc) = (coverage(&gpu_img).0 as f64, coverage(&cpu_img).0 as f64);
    assert!((cg - cc).abs() < 0.01 * cg, "coverage gpu {cg} cpu {cc}");
}

#[test]
fn tet_mesh_upload_matches_hand_built_cube_on_gpu() {
    let Some(g) = gpu() else { return };
    let mesh = jello::mesh::box_grid([-0.5; 3], [0.5; 3], [2, 3, 2]);
    let tet_surface = SurfaceMesh::from_tet_mesh(&g.device, &mesh).unwrap();
    assert_eq!(tet_surface.vertex_count() as usize, mesh.positions.len());
    let (pos, tris) = cube(Vec3::ZERO, 1.0);
    let hand = SurfaceMesh::new(&g.device, &pos, &tris).unwrap();
    let size = (120, 90);
    let cam = Camera::framing([-0.5; 3], [0.5; 3], 120.0 / 90.0).unwrap();
    let a = render(g, size, 4, None, &cam, &[tet_surface.draw(BLUE)]);
    let b = render(g, size, 4, None, &cam, &[hand.draw(BLUE)]);
    let off = a
        .pixels
        .chunks_exact(4)
        .zip(b.pixels.chunks_exact(4))
        .filter(|(p, q)| (0..3).any(|k| p[k].abs_diff(q[k]) > 2))
        .count();
    assert!(coverage(&a).0 > 2000);
    assert!(
        off * 200 < (size.0 * size.1) as usize,
        "{off} pixels differ"
    );
}

/// The simulation's use: a compute pass moves the vertices in a STORAGE | VERTEX buffer and
/// the render pass in the same encoder draws the moved surface, with no CPU round trip.
#[test]
fn draws_positions_written_by_a_compute_pass_in_the_same_encoder() {
    let Some(g) = gpu() else { return };
    let size = (160, 120);
    let (pos, tris) = cube(Vec3::ZERO, 0.5);
    let mesh = SurfaceMesh::new(&g.device, &pos, &tris).unwrap();
    let shift = 0.6f32;
    let module = g.device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("shift x"),
        source: wgpu::ShaderSource::Wgsl(
            format!(
                "@group(0) @binding(0) var<storage, read_write> p: array<vec4<f32>>;
                     @compute @workgroup_size(64)
                     fn main(@builtin(global_invocation_id) id: vec3<u32>) {{
                         if (id.x < arrayLength(&p)) {{ p[id.x].x += {shift:.3}; }}
                     }}"
            )
            .into(),
        ),
    });
    let pipeline = g
        .device
        .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: None,
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
    let bind = g.device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: mesh.positions().as_entire_binding(),
        }],
    });
    let cam = Camera::framing([-0.25; 3], [0.25 + shift, 0.25, 0.25], 160.0 / 120.0).unwrap();
    let r = SurfaceRenderer::new(&g.device, size).unwrap();
    let before = {
        let mut enc = g.device.create_command_encoder(&Default::default());
        r.record(&g.device, &mut enc, &[mesh.draw(RED)], &cam)
            .unwrap();
        g.queue.submit([enc.finish()]);
        coverage(&r.read_rgba(&g.device, &g.queue).unwrap())
    };
    let after = {
        let mut enc = g.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(1, 1, 1);
        }
        r.record(&g.device, &mut enc, &[mesh.draw(RED)], &cam)
            .unwrap();
        g.queue.submit([enc.finish()]);
        coverage(&r.read_rgba(&g.device, &g.queue).unwrap())
    };
    let pa = cam.project_to_pixel(Vec3::ZERO, size.0, size.1).unwrap();
    let pb = cam
        .project_to_pixel([shift, 0.0, 0.0], size.0, size.1)
        .unwrap();
    let (seen, want) = (after.1 - before.1, pb[0] - pa[0]);
    assert!(
        want > 10.0 && (seen - want).abs() < 0.2 * want,
        "moved {seen} px, want {want}"
    );
}
