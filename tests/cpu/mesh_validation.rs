//! Every load-time validation: each error must name the file and the line (text) or element
//! (binary), and fixable defects must come back as warnings.

use jello::mesh::{read_mesh, LoadedMesh};
use jello::JelloError;
use std::path::PathBuf;

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("jello_mesh_validation_{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(name: &str, text: &[u8]) -> PathBuf {
    let p = dir().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Writes a TetGen pair and loads it.
fn tetgen(stem: &str, node: &str, ele: &str) -> Result<LoadedMesh, JelloError> {
    write(&format!("{stem}.node"), node.as_bytes());
    write(&format!("{stem}.ele"), ele.as_bytes());
    read_mesh(&dir().join(format!("{stem}.node")))
}

/// Asserts that the error's one-line message names `file:line` and contains `needle`.
fn assert_at(err: JelloError, file: &str, line: usize, needle: &str) {
    let s = err.to_string();
    assert!(!s.contains('\n'), "multi-line message: {s}");
    assert!(
        s.contains(&format!("{file}:{line}:")),
        "expected `{file}:{line}:` in `{s}`"
    );
    assert!(s.contains(needle), "expected `{needle}` in `{s}`");
}

const NODE: &str = "5 3 0 0\n0 0 0 0\n1 1 0 0\n2 0 1 0\n3 0 0 1\n4 1 1 1\n";

#[test]
fn index_out_of_range() {
    let e = tetgen("oor", NODE, "2 4 0\n0 0 1 2 3\n1 1 2 3 5\n").unwrap_err();
    assert_at(e, "oor.ele", 3, "out of range");

    let msh = "$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$Nodes\n4\n1 0 0 0\n2 1 0 0\n3 0 1 0\n4 0 0 1\n$EndNodes\n$Elements\n1\n1 4 2 0 0 1 2 3 9\n$EndElements\n";
    let e = read_mesh(&write("oor.msh", msh.as_bytes())).unwrap_err();
    assert_at(e, "oor.msh", 13, "node tag 9");

    let medit = "MeshVersionFormatted 1\nDimension 3\nVertices\n4\n0 0 0 0\n1 0 0 0\n0 1 0 0\n0 0 1 0\nTetrahedra\n1\n1 2 3 0 0\nEnd\n";
    let e = read_mesh(&write("oor.mesh", medit.as_bytes())).unwrap_err();
    assert_at(e, "oor.mesh", 11, "out of range");

    let vtk = "# vtk DataFile Version 3.0\nt\nASCII\nDATASET UNSTRUCTURED_GRID\nPOINTS 4 float\n0 0 0\n1 0 0\n0 1 0\n0 0 1\nCELLS 1 5\n4 0 1 2 4\nCELL_TYPES 1\n10\n";
    let e = read_mesh(&write("oor.vtk", vtk.as_bytes())).unwrap_err();
    assert_at(e, "oor.vtk", 11, "out of range");
}

#[test]
fn non_finite_coordinates() {
    let node = "5 3 0 0\n0 0 0 0\n1 1 0 0\n2 0 NaN 0\n3 0 0 1\n4 1 1 1\n";
    let e = tetgen("nan", node, "1 4 0\n0 0 1 2 3\n").unwrap_err();
    assert_at(e, "nan.node", 4, "not finite");
    let node = "5 3 0 0\n0 0 0 0\n1 1 0 0\n2 0 1 0\n3 0 0 inf\n4 1 1 1\n";
    let e = tetgen("inf", node, "1 4 0\n0 0 1 2 3\n").unwrap_err();
    assert_at(e, "inf.node", 5, "not finite");

    // Binary gmsh: the message names the node record.
    let mut b = b"$MeshFormat\n2.2 1 8\n".to_vec();
    b.extend_from_slice(&1i32.to_le_bytes());
    b.extend_from_slice(b"\n$EndMeshFormat\n$Nodes\n2\n");
    for (tag, x) in [(1i32, 0.0f64), (2, f64::NAN)] {
        b.extend_from_slice(&tag.to_le_bytes());
        for v in [x, 0.0, 0.0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
    b.extend_from_slice(b"\n$EndNodes\n");
    let s = read_mesh(&write("nan_bin.msh", &b))
        .unwrap_err()
        .to_string();
    assert!(
        s.contains("nan_bin.msh") && s.contains("node #1") && s.contains("non-finite"),
        "{s}"
    );
}

#[test]
fn garbage_numbers() {
    let node = "5 3 0 0\n0 0 0 0\n1 1 0 0\n2 0 1.0abc 0\n3 0 0 1\n4 1 1 1\n";
    let e = tetgen("garbage", node, "1 4 0\n0 0 1 2 3\n").unwrap_err();
    assert_at(e, "garbage.node", 4, "`1.0abc`");
    let e = tetgen("garbage2", NODE, "1 4 0\n0 0 1 x2 3\n").unwrap_err();
    assert_at(e, "garbage2.ele", 2, "`x2`");
    // A short line must not silently borrow numbers from the next one.
    let e = tetgen("short", NODE, "2 4 0\n0 0 1 2\n1 1 2 3 4\n").unwrap_err();
    assert_at(e, "short.ele", 2, "expected 5 numbers");
}

#[test]
fn degenerate_tet() {
    // Vertex 4 lies in the plane of 0, 1, 2 (z = 0).
    let node = "5 3 0 0\n0 0 0 0\n1 1 0 0\n2 0 1 0\n3 0 0 1\n4 0.3 0.3 0\n";
    let e = tetgen("degen", node, "2 4 0\n0 0 1 2 3\n1 0 1 2 4\n").unwrap_err();
    assert_at(e, "degen.ele", 3, "degenerate");
    // A repeated vertex is degenerate too.
    let e = tetgen("repeat", NODE, "1 4 0\n0 0 1 1 3\n").unwrap_err();
    assert_at(e, "repeat.ele", 2, "degenerate");
    // Binary: the message names the element.
    let flat = jello::mesh::TetMesh {
        positions: vec![
            [0.0; 3],
            [1.0, 0.0, 0.0],
            [0.0, 1.0, 0.0],
            [0.0, 0.0, 1.0],
            [0.2, 0.2, 0.0],
        ],
        tets: vec![[0, 1, 2, 3], [0, 1, 2, 4]],
    };
    let p = dir().join("degen_bin.msh");
    jello::mesh::write_gmsh(&p, &flat, jello::mesh::GmshFormat::V41Binary).unwrap();
    let s = read_mesh(&p).unwrap_err().to_string();
    assert!(
        s.contains("degen_bin.msh")
            && s.contains("element #1 (binary data)")
            && s.contains("degenerate"),
        "{s}"
    );
    // A tiny but genuine tet at a tiny scale is fine (the threshold is relative).
    let node = "4 3 0 0\n0 0 0 0\n1 1e-6 0 0\n2 0 1e-6 0\n3 0 0 1e-6\n";
    let l = tetgen("tiny", node, "1 4 0\n0 0 1 2 3\n").unwrap();
    assert!((l.mesh.total_volume() - 1e-18 / 6.0).abs() < 1e-30);
}

#[test]
fn huge_declared_counts_are_refused_before_allocating() {
    // 10^15 points of 24+ bytes each would abort the process if allocated.
    let e = tetgen(
        "huge",
        "1000000000000000 3 0 0\n0 0 0 0\n",
        "1 4 0\n0 0 1 2 3\n",
    )
    .unwrap_err();
    assert_at(e, "huge.node", 1, "declared");
    let e = tetgen("huge2", NODE, "1000000000000000 4 0\n0 0 1 2 3\n").unwrap_err();
    assert_at(e, "huge2.ele", 1, "declared");

    let msh = "$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$Nodes\n999999999999999\n1 0 0 0\n$EndNodes\n";
    let e = read_mesh(&write("huge.msh", msh.as_bytes())).unwrap_err();
    assert_at(e, "huge.msh", 5, "declared");

    let mut b = b"$MeshFormat\n4.1 1 8\n".to_vec();
    b.extend_from_slice(&1i32.to_le_bytes());
    b.extend_from_slice(b"\n$EndMeshFormat\n$Nodes\n");
    for v in [1u64, u64::MAX / 2, 1, u64::MAX / 2] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    let s = read_mesh(&write("huge_bin.msh", &b))
        .unwrap_err()
        .to_string();
    assert!(s.contains("huge_bin.msh") && s.contains("declared"), "{s}");

    let medit = "MeshVersionFormatted 1\nDimension 3\nVertices\n123456789012345\n0 0 0 0\n";
    let e = read_mesh(&write("huge.mesh", medit.as_bytes())).unwrap_err();
    assert_at(e, "huge.mesh", 4, "declared");

    let vtk = "# vtk DataFile Version 3.0\nt\nBINARY\nDATASET UNSTRUCTURED_GRID\nPOINTS 999999999999 double\n";
    let s = read_mesh(&write("huge.vtk", vtk.as_bytes()))
        .unwrap_err()
        .to_string();
    assert!(s.contains("huge.vtk:5:") && s.contains("declared"), "{s}");
}

#[test]
fn truncated_files() {
    // Enough bytes to pass the count check, but the file ends in the middle of a record.
    let e = tetgen(
        "trunc",
        NODE,
        "2 4 0\n0 0 1 2 3\n1      1         2          3   ",
    )
    .unwrap_err();
    assert_at(e, "trunc.ele", 3, "truncated");

    let msh = "$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$Nodes\n4\n1 0 0 0\n2 1 0 0\n3 0 1 0\n4 0 0 1\n$EndNodes\n$Elements\n1\n1 4 2 0 0 1 2 3 4\n";
    let e = read_mesh(&write("trunc.msh", msh.as_bytes())).unwrap_err();
    assert_at(e, "trunc.msh", 14, "truncated");

    // Binary: cut a valid file in the middle of the element records.
    let m = jello::mesh::box_grid([0.0; 3], [1.0; 3], [2, 2, 2]);
    let full = dir().join("full_bin.msh");
    jello::mesh::write_gmsh(&full, &m, jello::mesh::GmshFormat::V41Binary).unwrap();
    let bytes = std::fs::read(&full).unwrap();
    let cut = write("trunc_bin.msh", &bytes[..bytes.len() - 300]);
    let s = read_mesh(&cut).unwrap_err().to_string();
    assert!(
        s.contains("trunc_bin.msh") && s.contains("truncated"),
        "{s}"
    );

    // Unclosed unknown section.
    let msh = "$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$Comments\nhello\n";
    let e = read_mesh(&write("unclosed.msh", msh.as_bytes())).unwrap_err();
    assert_at(e, "unclosed.msh", 4, "not closed");
}

#[test]
fn negative_tets_are_reoriented_with_a_warning() {
    // Tet 1 lists (1,0,0),(0,0,1),(0,1,0),(1,1,1): negative.
    let l = tetgen("neg", NODE, "2 4 0\n0 0 1 2 3\n1 1 3 2 4\n").unwrap();
    assert_eq!(l.reoriented, 1);
    assert!(
        l.warnings
            .iter()
            .any(|w| w.contains("neg.ele") && w.contains("1 negatively oriented")),
        "{:?}",
        l.warnings
    );
    assert!((0..2).all(|t| l.mesh.signed_volume(t) > 0.0));
    assert!((l.mesh.signed_volume(1) - 1.0 / 3.0).abs() < 1e-12);
    // Same vertex set as written.
    let mut t = l.mesh.tets[1];
    t.sort();
    assert_eq!(t, [1, 2, 3, 4]);
}

#[test]
fn unreferenced_vertices_are_reported_and_removable() {
    let node = "7 3 0 0\n0 0 0 0\n1 9 9 9\n2 1 0 0\n3 0 1 0\n4 0 0 1\n5 1 1 1\n6 8 8 8\n";
    let l = tetgen("unref", node, "2 4 0\n0 0 2 3 4\n1 2 3 4 5\n").unwrap();
    assert_eq!(l.unreferenced, 2);
    assert!(
        l.warnings.iter().any(|w| w.contains("2 vertices")),
        "{:?}",
        l.warnings
    );
    assert_eq!(l.mesh.unreferenced_vertices(), vec![1, 6]);
    let mut m = l.mesh.clone();
    let vol = m.total_volume();
    let map = m.remove_unreferenced();
    assert_eq!(
        map,
        vec![Some(0), None, Some(1), Some(2), Some(3), Some(4), None]
    );
    assert_eq!(m.num_vertices(), 5);
    assert!(m.unreferenced_vertices().is_empty());
    assert_eq!(m.total_volume(), vol);
    for (old, new) in map.iter().enumerate() {
        if let Some(n) = new {
            assert_eq!(m.positions[*n as usize], l.mesh.positions[old]);
        }
    }
}

#[test]
fn empty_mesh_and_unsupported_format() {
    // Only a triangle: no tets.
    let msh = "$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$Nodes\n3\n1 0 0 0\n2 1 0 0\n3 0 1 0\n$EndNodes\n$Elements\n1\n1 2 2 0 0 1 2 3\n$EndElements\n";
    let s = read_mesh(&write("empty.msh", msh.as_bytes()))
        .unwrap_err()
        .to_string();
    assert!(
        s.contains("empty.msh") && s.contains("no tetrahedra"),
        "{s}"
    );
    let s = read_mesh(&write("x.stl", b"solid"))
        .unwrap_err()
        .to_string();
    assert!(s.contains("x.stl") && s.contains("unsupported"), "{s}");
    let s = read_mesh(&dir().join("missing.node"))
        .unwrap_err()
        .to_string();
    assert!(s.contains("missing.node"), "{s}");
    let s = read_mesh(&write("notgmsh.msh", b"hello world"))
        .unwrap_err()
        .to_string();
    assert!(
        s.contains("notgmsh.msh:1:") && s.contains("not a gmsh file"),
        "{s}"
    );
}

/// Garbage bytes of every kind must give an error, never a panic.
#[test]
fn random_corruption_never_panics() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let m = jello::mesh::box_grid([0.0; 3], [1.0; 3], [2, 1, 1]);
    let formats = [
        ("c.msh", jello::mesh::GmshFormat::V22Ascii),
        ("c.msh", jello::mesh::GmshFormat::V22Binary),
        ("c.msh", jello::mesh::GmshFormat::V41Ascii),
        ("c.msh", jello::mesh::GmshFormat::V41Binary),
    ];
    let mut originals: Vec<(String, Vec<u8>)> = Vec::new();
    for (i, (name, f)) in formats.iter().enumerate() {
        let p = dir().join(format!("orig{i}_{name}"));
        jello::mesh::write_gmsh(&p, &m, *f).unwrap();
        originals.push((format!("corrupt{i}.msh"), std::fs::read(&p).unwrap()));
    }
    for name in [
        "two_tets.mesh",
        "two_tets_classic.vtk",
        "meshio_box_bin.vtk",
    ] {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/mesh")
            .join(name);
        let ext = p.extension().unwrap().to_str().unwrap().to_string();
        originals.push((format!("corrupt_{name}.{ext}"), std::fs::read(&p).unwrap()));
    }
    for (name, bytes) in &originals {
        for _ in 0..150 {
            let mut b = bytes.clone();
            match rng.random_range(0..3) {
                0 => b.truncate(rng.random_range(0..b.len())),
                1 => {
                    for _ in 0..rng.random_range(1..6) {
                        let i = rng.random_range(0..b.len());
                        b[i] = rng.random();
                    }
                }
                _ => {
                    let i = rng.random_range(0..b.len());
                    b.insert(i, b"-9 \n$e1".to_vec()[rng.random_range(0..7)]);
                }
            }
            let p = write(name, &b);
            // Either outcome is fine; reaching here without a panic is the point, and an Ok
            // result must still be a valid mesh.
            if let Ok(l) = read_mesh(&p) {
                let n = l.mesh.num_vertices() as u32;
                assert!(l.mesh.tets.iter().flatten().all(|&v| v < n));
                assert!((0..l.mesh.num_tets()).all(|t| l.mesh.signed_volume(t) > 0.0));
                assert!(l.mesh.positions.iter().flatten().all(|x| x.is_finite()));
            }
        }
    }
}
