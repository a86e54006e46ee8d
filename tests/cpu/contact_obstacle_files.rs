//! Triangle-mesh obstacles from files (src/mesh/io/triangle_files.rs): OBJ, PLY (ASCII, binary
//! little/big endian) and STL (ASCII, binary) against the same surface, written here byte by
//! byte or by the OBJ/PLY writers; welding of STL corners; one-line errors on bad files; and an
//! obstacle read from a file added to a collision mesh, found by the broad phase and the
//! intersection check.

use crate::common;

use jello::contact::{candidates, intersecting_pairs, CollisionMesh};
use jello::mesh::{
    box_grid, parse_triangle_mesh, read_triangle_mesh, surface, write_obj, write_ply,
};
use jello::mesh::{TetMesh, TriangleMesh};
use std::path::{Path, PathBuf};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jello_obstacle_files_{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// A box surface with coordinates that are multiples of 1/4 (exact in f32).
fn box_surface() -> (Vec<[f64; 3]>, Vec<[u32; 3]>) {
    let mesh: TetMesh = box_grid([0.0; 3], [1.0, 0.5, 0.75], [4, 2, 3]);
    let s = surface(&mesh);
    let pos = s
        .vertices
        .iter()
        .map(|&v| mesh.positions[v as usize])
        .collect();
    (pos, s.local_triangles())
}

/// Triangles as sorted corner-coordinate triples: independent of vertex numbering (not of
/// winding: corners are rotated to start at the smallest, keeping orientation).
fn geometric(m: &TriangleMesh) -> Vec<[[u64; 3]; 3]> {
    let mut v: Vec<[[u64; 3]; 3]> = m
        .triangles
        .iter()
        .map(|t| {
            let c = t.map(|i| m.positions[i as usize].map(f64::to_bits));
            let k = (0..3).min_by_key(|&k| c[k]).unwrap();
            [c[k], c[(k + 1) % 3], c[(k + 2) % 3]]
        })
        .collect();
    v.sort();
    v
}

#[test]
fn obj_and_ply_round_trip_through_the_writers() {
    let mesh = box_grid([0.0; 3], [0.3, 0.2, 0.1], [3, 2, 2]);
    let s = surface(&mesh);
    for (name, write) in [
        ("box.obj", write_obj as fn(&Path, &[[f64; 3]], &_) -> _),
        ("box.ply", write_ply),
    ] {
        let p = scratch(name);
        write(&p, &mesh.positions, &s).unwrap();
        let m = read_triangle_mesh(&p).unwrap();
        let want: Vec<[f64; 3]> = s
            .vertices
            .iter()
            .map(|&v| mesh.positions[v as usize])
            .collect();
        assert_eq!(m.positions, want, "{name}: positions");
        assert_eq!(m.triangles, s.local_triangles(), "{name}: triangles");
        assert!(m.warnings.is_empty());
    }
}

fn ply_header(format: &str, nv: usize, nf: usize, vertex_props: &str) -> String {
    format!(
        "ply\nformat {format} 1.0\ncomment made by a test\nelement vertex {nv}\n{vertex_props}\
         element edge 1\nproperty int vertex1\nproperty int vertex2\n\
         element face {nf}\nproperty uchar flags\nproperty list uchar int vertex_indices\nend_header\n"
    )
}

#[test]
fn binary_and_ascii_ply_read_the_same_surface() {
    let (pos, tris) = box_surface();
    let want = TriangleMesh {
        positions: pos.clone(),
        triangles: tris.clone(),
        warnings: vec![],
    };
    // Vertex: float x, double y, uchar red, float z — mixed types and an extra property; an
    // `edge` element to skip; faces with a flags byte before the list.
    let props = "property float x\nproperty double y\nproperty uchar red\nproperty float z\n";
    for (fmt, big) in [("binary_little_endian", false), ("binary_big_endian", true)] {
        let mut b = ply_header(fmt, pos.len(), tris.len(), props).into_bytes();
        let put = |b: &mut Vec<u8>, le: &[u8]| {
            if big {
                b.extend(le.iter().rev());
            } else {
                b.extend_from_slice(le);
            }
        };
        for p in &pos {
            put(&mut b, &(p[0] as f32).to_le_bytes());
            put(&mut b, &p[1].to_le_bytes());
            b.push(200);
            put(&mut b, &(p[2] as f32).to_le_bytes());
        }
        put(&mut b, &7i32.to_le_bytes());
        put(&mut b, &(-3i32).to_le_bytes());
        for t in &tris {
            b.push(1);
            b.push(3);
            for &v in t {
                put(&mut b, &(v as i32).to_le_bytes());
            }
        }
        let m = parse_triangle_mesh(Path::new("s.ply"), &b).unwrap();
        assert_eq!(m, want, "{fmt}");
    }
    let mut text = ply_header("ascii", pos.len(), tris.len(), props);
    for p in &pos {
        text += &format!("{} {} 200 {}\n", p[0], p[1], p[2]);
    }
    text += "7 -3\n";
    for t in &tris {
        text += &format!("1 3 {} {} {}\n", t[0], t[1], t[2]);
    }
    assert_eq!(
        parse_triangle_mesh(Path::new("s.PLY"), text.as_bytes()).unwrap(),
        want
    );
}

#[test]
fn stl_ascii_and_binary_weld_to_the_same_surface() {
    let (pos, tris) = box_surface();
    let want = TriangleMesh {
        positions: pos.clone(),
        triangles: tris.clone(),
        warnings: vec![],
    };
    // ASCII, with a second solid and a collapsed facet (two equal corners) to drop.
    let mut text = String::from("solid box made by a test\n");
    let facet = |t: [[f64; 3]; 3]| {
        let mut s = String::from("  facet normal 0 0 1\n    outer loop\n");
        for p in t {
            s += &format!("      vertex {:e} {:e} {:e}\n", p[0], p[1], p[2]);
        }
        s + "    endloop\n  endfacet\n"
    };
    let half = tris.len() / 2;
    for t in &tris[..half] {
        text += &facet(t.map(|v| pos[v as usize]));
    }
    text += "endsolid box\nsolid second\n";
    text += &facet([pos[0], pos[0], pos[1]]);
    for t in &tris[half..] {
        text += &facet(t.map(|v| pos[v as usize]));
    }
    text += "endsolid second\n";
    let a = parse_triangle_mesh(Path::new("s.stl"), text.as_bytes()).unwrap();
    assert_eq!(a.positions.len(), pos.len(), "welded vertex count");
    assert_eq!(geometric(&a), geometric(&want));
    assert_eq!(a.warnings.len(), 1, "{:?}", a.warnings);
    // Binary, with a header that starts with "solid" (as some exporters write).
    let mut b = b"solid but binary".to_vec();
    b.resize(80, b' ');
    b.extend((tris.len() as u32).to_le_bytes());
    for t in &tris {
        b.extend([0u8; 12]);
        for &v in t {
            for c in pos[v as usize] {
                b.extend((c as f32).to_le_bytes());
            }
        }
        b.extend([0u8; 2]);
    }
    let m = parse_triangle_mesh(Path::new("s.stl"), &b).unwrap();
    assert_eq!(m.positions.len(), pos.len());
    assert_eq!(geometric(&m), geometric(&want));
    // −0 and +0 weld together.
    let signed =
        "solid z\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\nvertex 0 1 0\n\
                  endloop\nendfacet\nfacet normal 0 0 1\nouter loop\nvertex -0 0 0\nvertex 0 -1 0\n\
                  vertex 1 0 0\nendloop\nendfacet\nendsolid z\n";
    let z = parse_triangle_mesh(Path::new("z.stl"), signed.as_bytes()).unwrap();
    assert_eq!(z.positions.len(), 4);
}

#[test]
fn obj_statements_indices_and_polygons() {
    let text = "# a quad and a triangle\nmtllib x.mtl\no thing\nv 0 0 0\nv 1 0 0 1.0\n\
                v 1 1 0 0.5 0.5 0.5\nv 0 1 0\nvt 0 0\nvn 0 0 1\ng side\nusemtl m\ns off\n\
                f 1/1/1 2/1/1 3/1/1 4/1/1 # a quad\nv 0 0 1\nf -1//1 -5//1 -4//1\nl 1 2\n";
    let m = parse_triangle_mesh(Path::new("q.OBJ"), text.as_bytes()).unwrap();
    assert_eq!(m.positions.len(), 5);
    assert_eq!(m.positions[1], [1.0, 0.0, 0.0]);
    assert_eq!(m.triangles, vec![[0, 1, 2], [0, 2, 3], [4, 0, 1]]);
}

#[test]
fn bad_files_are_refused_with_one_line() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("m.off", b"OFF".to_vec(), "unknown triangle-mesh extension"),
        ("m.obj", b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 4\n".to_vec(), "m.obj:4: vertex index 4 out of range"),
        ("m.obj", b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 0\n".to_vec(), "m.obj:4: vertex index 0"),
        ("m.obj", b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 1\n".to_vec(), "m.obj:4: the face repeats vertex 0"),
        ("m.obj", b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2\n".to_vec(), "at least 3 corners"),
        ("m.obj", b"v 0 0 0\nv 1 nan 0\n".to_vec(), "m.obj:2: coordinate NaN"),
        ("m.obj", b"v 0 0 0\nv 1 2e13 0\n".to_vec(), "m.obj:2: coordinate 2e13"),
        ("m.obj", b"v 0 0 0\nv 1 0\n".to_vec(), "m.obj:2: a vertex needs 3 coordinates"),
        ("m.obj", b"v 0 0 0\nv 1 0 0\nv 0 1 0\n".to_vec(), "has no triangles"),
        ("m.obj", b"v 0 0 0\nv 1 x 0\n".to_vec(), "m.obj:2: expected a coordinate, found `x`"),
        ("m.ply", b"ply\nformat ascii 1.0\nelement vertex 3\n".to_vec(), "no `end_header`"),
        ("m.ply", b"plyx\n".to_vec(), "m.ply:1: not a PLY file"),
        (
            "m.ply",
            b"ply\nformat ascii 1.0\nelement vertex 99999999\nproperty float x\nproperty float y\nproperty float z\nend_header\n0 0 0\n".to_vec(),
            "declared 99999999 vertex but only",
        ),
        (
            "m.ply",
            b"ply\nformat ascii 1.0\nelement vertex 999999999\nproperty float x\nproperty float y\nproperty float z\nend_header\n0 0 0\n".to_vec(),
            "m.ply:3: declared 999999999 vertex, more than the cap",
        ),
        (
            "m.ply",
            b"ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\nend_header\n".to_vec(),
            "m.ply:3: element `vertex` needs scalar properties x, y and z",
        ),
        (
            "m.ply",
            b"ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\nproperty float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n0 0 0\n1 0 0\n0 1 0\n3 0 1 5\n".to_vec(),
            "m.ply:13: vertex index 5 out of range",
        ),
        (
            "m.ply",
            b"ply\nformat binary_little_endian 1.0\nelement vertex 3\nproperty float x\nproperty float y\nproperty float z\nend_header\n\0\0\0\0".to_vec(),
            "declared 3 vertex but only 4 bytes remain",
        ),
        (
            "m.ply",
            b"ply\nformat ascii 1.0\nelement vertex 1\nproperty quad x\nend_header\n".to_vec(),
            "m.ply:4: unknown property type `quad`",
        ),
        ("m.stl", b"hello world".to_vec(), "not an STL file"),
        ("m.stl", {
            let mut b = vec![b'x'; 80];
            b.extend(5u32.to_le_bytes());
            b.extend([0u8; 60]);
            b
        }, "binary STL (5 triangles need 334 bytes, the file has 144)"),
        ("m.stl", b"solid s\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\nendloop\n".to_vec(), "m.stl:6: expected `vertex`, found `endloop`"),
        ("m.stl", b"solid s\nfacet normal 0 0 1\nouter loop\nvertex 0 0 0\nvertex 1 0 0\nvertex 1 inf 0\n".to_vec(), "m.stl:6: a coordinate is not finite"),
    ];
    for (name, bytes, want) in cases {
        let e = parse_triangle_mesh(Path::new(name), &bytes)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(want) && !e.contains('\n') && e.starts_with(name),
            "{name}: `{e}` does not contain `{want}`"
        );
    }
    let missing = scratch("missing.stl");
    let e = read_triangle_mesh(&missing).unwrap_err().to_string();
    assert!(e.contains("missing.stl") && !e.contains('\n'), "{e}");
}

#[test]
fn an_obstacle_from_a_file_meets_a_body() {
    // A floor read from binary STL below a box body: body–floor candidates within d̂; sinking
    // the body 1 cm into the floor makes its bottom faces intersect the floor's.
    let mut b = vec![0u8; 80];
    b.extend(2u32.to_le_bytes());
    for t in [
        [[-1.0f32, 0.0, -1.0], [1.0, 0.0, 1.0], [1.0, 0.0, -1.0]],
        [[-1.0, 0.0, -1.0], [-1.0, 0.0, 1.0], [1.0, 0.0, 1.0]],
    ] {
        b.extend([0u8; 12]);
        for p in t {
            for c in p {
                b.extend(c.to_le_bytes());
            }
        }
        b.extend([0u8; 2]);
    }
    let path = scratch("floor.stl");
    std::fs::write(&path, &b).unwrap();
    let floor = read_triangle_mesh(&path).unwrap();
    assert_eq!((floor.positions.len(), floor.triangles.len()), (4, 2));
    let mesh = box_grid([-0.1, 0.001, -0.1], [0.1, 0.201, 0.1], [2, 2, 2]);
    let nv = mesh.num_vertices();
    let model = common::bodies_model(vec![mesh]);
    let mut m = CollisionMesh::from_model(&model).unwrap();
    m.add_obstacle("floor", &floor.positions, &floor.triangles)
        .unwrap();
    let x = m.positions(&model.mesh.positions).into_owned();
    let c = candidates(&m, &x, None, 2e-3).unwrap();
    assert!(c
        .pt
        .iter()
        .any(|p| m.vertex_body[p[0] as usize] == 0 && m.face_body[p[1] as usize] == 1));
    assert!(intersecting_pairs(&m, &x).unwrap().is_empty());
    let mut sunk = x.clone();
    for p in &mut sunk[..nv] {
        p[1] -= 0.011;
    }
    let hits = intersecting_pairs(&m, &sunk).unwrap();
    assert!(!hits.is_empty());
    assert!(hits
        .iter()
        .all(|h| m.face_body[h[0] as usize] != m.face_body[h[1] as usize]));
}
