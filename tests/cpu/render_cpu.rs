//! CPU fallback rasterizer: geometric checks that need no GPU adapter.

use glam::Vec3;
use jello::render::{
    bounding_box, render_png_cpu, render_rgba_cpu, Camera, CpuSurface, GroundPlane, RenderStyle,
    RgbaImage, UpAxis,
};

/// Axis-aligned cube of side `side` centred at `c`, outward-oriented (checked per face).
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
    let faces: [[u32; 4]; 6] = [
        [0, 2, 6, 4],
        [1, 3, 7, 5],
        [0, 1, 5, 4],
        [2, 3, 7, 6],
        [0, 1, 3, 2],
        [4, 5, 7, 6],
    ];
    let mut tris = Vec::new();
    for f in faces {
        let q = f.map(|i| verts[i as usize]);
        let n = (q[1] - q[0]).cross(q[2] - q[0]);
        let f = if n.dot(0.25 * (q[0] + q[1] + q[2] + q[3]) - c) > 0.0 {
            f
        } else {
            [f[3], f[2], f[1], f[0]]
        };
        tris.push([f[0], f[1], f[2]]);
        tris.push([f[0], f[2], f[3]]);
    }
    (verts.iter().map(|v| [v.x, v.y, v.z, 1.0]).collect(), tris)
}

fn bg() -> [u8; 4] {
    let b = RenderStyle::default().background;
    [
        (b[0] * 255.0).round() as u8,
        (b[1] * 255.0).round() as u8,
        (b[2] * 255.0).round() as u8,
        255,
    ]
}

fn differs(a: [u8; 4], b: [u8; 4], tol: u8) -> bool {
    (0..3).any(|k| a[k].abs_diff(b[k]) > tol)
}

fn coverage(img: &RgbaImage) -> (usize, f32, f32, [u32; 4]) {
    let (mut n, mut sx, mut sy) = (0usize, 0f64, 0f64);
    let mut bb = [u32::MAX, u32::MAX, 0, 0];
    for y in 0..img.height {
        for x in 0..img.width {
            if differs(img.get(x, y).unwrap(), bg(), 3) {
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

fn draw<'a>(p: &'a [[f32; 4]], t: &'a [[u32; 3]], colour: [f32; 3]) -> CpuSurface<'a> {
    CpuSurface {
        positions: p,
        triangles: t,
        colour,
        vertex_colours: None,
    }
}

const RED: [f32; 3] = [0.9, 0.1, 0.1];
const BLUE: [f32; 3] = [0.1, 0.2, 0.9];

#[test]
fn empty_frame_is_background() {
    let cam = Camera::framing([-1.0; 3], [1.0; 3], 1.0).unwrap();
    let img = render_rgba_cpu(&[], &cam, (33, 17), &RenderStyle::default(), None).unwrap();
    assert_eq!(img.pixels.len(), 33 * 17 * 4);
    assert!(img.pixels.chunks_exact(4).all(|p| p == bg()));
}

#[test]
fn cube_lands_on_its_projection_and_moves_with_x() {
    let size = (161, 121);
    let (pos, tris) = cube(Vec3::ZERO, 0.5);
    let shift = Vec3::new(0.6, 0.0, 0.0);
    let cam = Camera::framing([-0.25; 3], Vec3::splat(0.25) + shift, 161.0 / 121.0).unwrap();
    let style = RenderStyle::default();
    let a_img = render_rgba_cpu(&[draw(&pos, &tris, RED)], &cam, size, &style, None).unwrap();
    let a = coverage(&a_img);
    let moved: Vec<[f32; 4]> = pos
        .iter()
        .map(|p| [p[0] + shift.x, p[1], p[2], 1.0])
        .collect();
    let b =
        coverage(&render_rgba_cpu(&[draw(&moved, &tris, RED)], &cam, size, &style, None).unwrap());
    let pa = cam.project_to_pixel(Vec3::ZERO, size.0, size.1).unwrap();
    let pb = cam.project_to_pixel(shift, size.0, size.1).unwrap();
    assert!(a.0 > 300, "coverage {}", a.0);
    assert!(
        (a.1 - pa[0]).abs() < 4.0 && (a.2 - pa[1]).abs() < 4.0,
        "{a:?} vs {pa:?}"
    );
    let (seen, want) = (b.1 - a.1, pb[0] - pa[0]);
    assert!(
        want > 10.0 && (seen - want).abs() < 0.15 * want,
        "{seen} vs {want}"
    );
    // Every corner projects onto the coverage box (up to antialiased edge pixels).
    for v in &pos {
        let q = cam
            .project_to_pixel([v[0], v[1], v[2]], size.0, size.1)
            .unwrap();
        let bb = a.3;
        assert!(
            q[0] > bb[0] as f32 - 1.5
                && q[0] < bb[2] as f32 + 2.5
                && q[1] > bb[1] as f32 - 1.5
                && q[1] < bb[3] as f32 + 2.5,
            "{q:?} vs {bb:?}"
        );
    }
    let c = a_img.get(pa[0] as u32, pa[1] as u32).unwrap();
    assert!(c[0] > c[2] + 40, "{c:?}");
}

#[test]
fn near_occludes_far_in_either_order() {
    let size = (96, 96);
    let cam = Camera::look_at([0.0, 0.0, 6.0], [0.0, 0.0, 0.0], Vec3::Y, 40.0, 1.0);
    let (fp, ft) = cube(Vec3::ZERO, 1.0);
    let (np, nt) = cube(Vec3::new(0.0, 0.0, 2.0), 0.4);
    for order in [false, true] {
        let mut draws = vec![draw(&fp, &ft, BLUE), draw(&np, &nt, RED)];
        if order {
            draws.reverse();
        }
        let img = render_rgba_cpu(&draws, &cam, size, &RenderStyle::default(), None).unwrap();
        let c = img.get(48, 48).unwrap();
        assert!(c[0] > c[2] + 40, "{c:?}");
        let side = cam
            .project_to_pixel([0.4, 0.0, 0.5], size.0, size.1)
            .unwrap();
        let s = img.get(side[0] as u32, side[1] as u32).unwrap();
        assert!(s[2] > s[0] + 40, "{s:?}");
    }
}

#[test]
fn winding_is_irrelevant_and_faces_are_flat() {
    let size = (120, 120);
    let (pos, tris) = cube(Vec3::ZERO, 1.0);
    let flipped: Vec<[u32; 3]> = tris.iter().map(|t| [t[0], t[2], t[1]]).collect();
    let cam = Camera::framing([-0.5; 3], [0.5; 3], 1.0).unwrap();
    let s = RenderStyle::default();
    let grey = [0.7; 3];
    let a = render_rgba_cpu(&[draw(&pos, &tris, grey)], &cam, size, &s, None).unwrap();
    let b = render_rgba_cpu(&[draw(&pos, &flipped, grey)], &cam, size, &s, None).unwrap();
    assert_eq!(a, b);
    let mut shades = vec![];
    for face in [Vec3::X, Vec3::Y, Vec3::Z] {
        let p = cam.project_to_pixel(0.5 * face, size.0, size.1).unwrap();
        let c = a.get(p[0] as u32, p[1] as u32).unwrap();
        for (dx, dy) in [(-3i32, 0i32), (3, 0), (0, -3), (0, 3)] {
            let q = a
                .get((p[0] as i32 + dx) as u32, (p[1] as i32 + dy) as u32)
                .unwrap();
            assert!(!differs(q, c, 2), "{face}: {q:?} vs {c:?}");
        }
        shades.push(c);
    }
    assert!(differs(shades[0], shades[1], 8) && differs(shades[1], shades[2], 8));
    assert!(differs(shades[0], shades[2], 8));
}

#[test]
fn ground_crossing_the_near_plane_is_clipped_not_garbled() {
    // Camera low over a huge ground plane: the plane extends behind the eye, so its triangles
    // must be clipped at the near plane. Below the horizon every pixel is ground.
    let size = (80, 60);
    let cam = Camera::look_at(
        [0.0, 0.5, 0.0],
        [0.0, 0.3, -3.0],
        Vec3::Y,
        50.0,
        80.0 / 60.0,
    );
    let mut g = GroundPlane::under_box([-1.0, 0.0, -1.0], [1.0, 0.0, 1.0], UpAxis::Y);
    g.half_extent = 400.0;
    let img = render_rgba_cpu(&[], &cam, size, &RenderStyle::default(), Some(&g)).unwrap();
    for x in 0..size.0 {
        let p = img.get(x, size.1 - 1).unwrap();
        let spread = p[0].max(p[1]).max(p[2]) - p[0].min(p[1]).min(p[2]);
        assert!(
            differs(p, bg(), 3) && spread < 20,
            "bottom row pixel {x}: {p:?}"
        );
    }
    // The top row looks above the horizon: background.
    for x in 0..size.0 {
        assert!(!differs(img.get(x, 0).unwrap(), bg(), 1));
    }
}

#[test]
fn z_up_scene_with_ground_and_png_output() {
    let size = (160, 120);
    let (pos, tris) = cube(Vec3::new(0.0, 0.0, 0.5), 1.0);
    let (lo, hi) = bounding_box(&pos).unwrap();
    let cam = Camera::framing_with_up(lo, hi, 160.0 / 120.0, UpAxis::Z).unwrap();
    let ground = GroundPlane::under_box(lo, hi, UpAxis::Z);
    let dir = std::env::temp_dir().join(format!("jello-render-cpu-{}", std::process::id()));
    let path = dir.join("z_up.png");
    let img = render_png_cpu(&pos, &tris, &cam, size, Some(ground), &path).unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() > 100);
    std::fs::remove_dir_all(&dir).unwrap();
    // Top of the cube (+Z) is above its centre in the image (smaller row).
    let top = cam
        .project_to_pixel([0.0, 0.0, 1.0], size.0, size.1)
        .unwrap();
    let mid = cam
        .project_to_pixel([0.0, 0.0, 0.5], size.0, size.1)
        .unwrap();
    assert!(top[1] < mid[1]);
    assert!(differs(
        img.get(top[0] as u32, top[1] as u32 + 2).unwrap(),
        bg(),
        3
    ));
    if let Ok(keep) = std::env::var("JELLO_RENDER_CPU_PNG") {
        jello::render::write_png(std::path::Path::new(&keep), &img).unwrap();
    }
}

#[test]
fn bad_inputs_are_errors() {
    let (pos, tris) = cube(Vec3::ZERO, 1.0);
    let cam = Camera::framing([-0.5; 3], [0.5; 3], 1.0).unwrap();
    let s = RenderStyle::default();
    assert!(render_rgba_cpu(&[draw(&pos, &[[0, 1, 9]], RED)], &cam, (8, 8), &s, None).is_err());
    assert!(render_rgba_cpu(&[draw(&pos, &tris, RED)], &cam, (0, 8), &s, None).is_err());
    assert!(render_rgba_cpu(&[draw(&pos, &tris, [f32::NAN; 3])], &cam, (8, 8), &s, None).is_err());
    let mut g = GroundPlane::under_box([0.0; 3], [1.0; 3], UpAxis::Y);
    g.cell = 0.0;
    assert!(render_rgba_cpu(&[], &cam, (8, 8), &s, Some(&g)).is_err());
}

#[test]
fn tet_box_surface_renders_like_the_hand_built_cube() {
    // The boundary of a subdivided tet box lies on the same six planes as the 12-triangle cube,
    // so flat shading must give the same image up to edge antialiasing.
    let mesh = jello::mesh::box_grid([-0.5; 3], [0.5; 3], [3, 2, 4]);
    let pos = jello::render::positions_to_vec4(&mesh.positions);
    let tris = jello::mesh::surface(&mesh).triangles;
    let (cpos, ctris) = cube(Vec3::ZERO, 1.0);
    let size = (120, 90);
    let cam = Camera::framing([-0.5; 3], [0.5; 3], 120.0 / 90.0).unwrap();
    let s = RenderStyle::default();
    let a = render_rgba_cpu(&[draw(&pos, &tris, RED)], &cam, size, &s, None).unwrap();
    let b = render_rgba_cpu(&[draw(&cpos, &ctris, RED)], &cam, size, &s, None).unwrap();
    let off = a
        .pixels
        .chunks_exact(4)
        .zip(b.pixels.chunks_exact(4))
        .filter(|(p, q)| (0..3).any(|k| p[k].abs_diff(q[k]) > 2))
        .count();
    assert!(coverage(&a).0 > 2000);
    assert!(off * 200 < a.pixels.len() / 4, "{off} pixels differ");
}

#[test]
fn ball_silhouette_has_the_projected_sphere_area() {
    // A sphere of radius R at distance d, centred on the view axis, projects to a disc of
    // radius (H/2)·tan(asin(R/d))/tan(fov/2) pixels.
    let (r, d, fov) = (0.5f64, 3.0f64, 40f64);
    let mesh = jello::mesh::ball([0.0; 3], r, 16);
    let pos = jello::render::positions_to_vec4(&mesh.positions);
    let tris = jello::mesh::surface(&mesh).triangles;
    let size = (200u32, 200u32);
    let cam = Camera::look_at([0.0, 0.0, d as f32], [0.0; 3], Vec3::Y, fov as f32, 1.0);
    let img = render_rgba_cpu(
        &[draw(&pos, &tris, BLUE)],
        &cam,
        size,
        &RenderStyle::default(),
        None,
    )
    .unwrap();
    let rpx = 0.5 * size.1 as f64 * (r / d).asin().tan() / (0.5 * fov.to_radians()).tan();
    let want = std::f64::consts::PI * rpx * rpx;
    let (n, cx, cy, _) = coverage(&img);
    // The polyhedral ball is inscribed in the sphere (a little smaller), while every partly
    // covered rim pixel counts as covered (about half the perimeter extra, ≈ +2 % here).
    let rim = std::f64::consts::PI * rpx;
    let ratio = n as f64 / want;
    assert!(
        n as f64 > 0.95 * want && (n as f64) < want + rim,
        "coverage {n} vs disc {want:.0} ({ratio:.3})"
    );
    assert!(
        (cx - 100.0).abs() < 1.0 && (cy - 100.0).abs() < 1.0,
        "{cx},{cy}"
    );
}
