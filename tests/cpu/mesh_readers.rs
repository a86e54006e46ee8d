//! Every reader on hand-written fixtures (checked against hand-computed counts and volumes),
//! binary gmsh variants built byte by byte here, round trips through the writers, and the real
//! meshes in ../shared/meshes (beside the repository root) when present.

use jello::mesh::{
    read_mesh, surface, write_gmsh, write_tetgen, GmshFormat, LoadedMesh, MeshInfo, TetMesh,
};
use std::path::{Path, PathBuf};

use crate::common;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/mesh")
        .join(name)
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jello_mesh_readers_{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// The two-tet fixture: unit corner tet (volume 1/6) plus the tet on its slanted face reaching
/// (1,1,1) (volume 1/3, by hand: det[(-1,1,0),(-1,0,1),(0,1,1)] = 2).
const P: [[f64; 3]; 5] = [
    [0.0, 0.0, 0.0],
    [1.0, 0.0, 0.0],
    [0.0, 1.0, 0.0],
    [0.0, 0.0, 1.0],
    [1.0, 1.0, 1.0],
];

/// Tets as sorted lists of corner coordinates: independent of vertex numbering and orientation.
fn geometric_tets(m: &TetMesh) -> Vec<[[i64; 3]; 4]> {
    let mut v: Vec<[[i64; 3]; 4]> = m
        .tets
        .iter()
        .map(|t| {
            let mut c = t.map(|i| m.positions[i as usize].map(|x| (x * 1e6).round() as i64));
            c.sort();
            c
        })
        .collect();
    v.sort();
    v
}

fn expected_two_tets() -> Vec<[[i64; 3]; 4]> {
    let m = TetMesh {
        positions: P.to_vec(),
        tets: vec![[0, 1, 2, 3], [1, 2, 3, 4]],
    };
    geometric_tets(&m)
}

fn assert_two_tets(l: &LoadedMesh, reoriented: usize, unreferenced: usize) {
    let m = &l.mesh;
    assert_eq!(m.num_tets(), 2);
    assert_eq!(geometric_tets(m), expected_two_tets());
    assert!(
        (m.signed_volume(0) - 1.0 / 6.0).abs() < 1e-12,
        "{}",
        m.signed_volume(0)
    );
    assert!(
        (m.signed_volume(1) - 1.0 / 3.0).abs() < 1e-12,
        "{}",
        m.signed_volume(1)
    );
    assert!((m.total_volume() - 0.5).abs() < 1e-12);
    assert_eq!(l.reoriented, reoriented);
    assert_eq!(l.unreferenced, unreferenced);
    assert_eq!(
        l.warnings.iter().any(|w| w.contains("reoriented")),
        reoriented > 0,
        "{:?}",
        l.warnings
    );
    assert_eq!(
        l.warnings.iter().any(|w| w.contains("not used")),
        unreferenced > 0,
        "{:?}",
        l.warnings
    );
    // Two tets glued on one face: 8 - 2 = 6 boundary triangles, 5 boundary vertices.
    let s = surface(m);
    assert_eq!(s.triangles.len(), 6);
    assert_eq!(s.vertices.len(), 5);
}

#[test]
fn gmsh_22_ascii_sparse_tags_and_other_elements() {
    let l = read_mesh(&fixture("two_tets_v22.msh")).unwrap();
    assert_eq!(l.mesh.num_vertices(), 5);
    // Node tags 10..50 map to indices 0..4 in file order.
    assert_eq!(l.mesh.positions, P.to_vec());
    assert_eq!(l.mesh.tets[0], [0, 1, 2, 3]);
    assert_two_tets(&l, 0, 0);
}

#[test]
fn gmsh_41_ascii_blocks_parametric_nodes_and_reorientation() {
    let l = read_mesh(&fixture("two_tets_v41.msh")).unwrap();
    assert_eq!(l.mesh.positions, P.to_vec());
    // Second tet is listed as tags 7 5 9 11 = indices 2 1 3 4: negative, so it is reoriented.
    assert_two_tets(&l, 1, 0);
}

#[test]
fn gmsh_40_ascii() {
    let l = read_mesh(&fixture("two_tets_v40.msh")).unwrap();
    assert_eq!(l.mesh.positions, P.to_vec());
    assert_two_tets(&l, 0, 0);
}

#[test]
fn tetgen_one_based_with_attributes_markers_and_comments() {
    // Either file name works.
    for name in ["two_tets_1based.node", "two_tets_1based.ele"] {
        let l = read_mesh(&fixture(name)).unwrap();
        assert_eq!(l.mesh.num_vertices(), 6);
        assert_eq!(&l.mesh.positions[..5], &P[..]);
        assert_eq!(l.mesh.positions[5], [5.0, 5.0, 5.0]);
        assert_two_tets(&l, 1, 1);
    }
}

#[test]
fn medit_skips_other_sections() {
    let l = read_mesh(&fixture("two_tets.mesh")).unwrap();
    assert_eq!(l.mesh.positions, P.to_vec());
    assert_eq!(l.mesh.tets, vec![[0, 1, 2, 3], [1, 2, 3, 4]]);
    assert_two_tets(&l, 0, 0);
}

#[test]
fn vtk_legacy_classic_and_51_layouts() {
    for name in [
        "two_tets_classic.vtk",
        "two_tets_v51.vtk",
        "two_tets_field_metadata.vtk",
    ] {
        let l = read_mesh(&fixture(name)).unwrap();
        assert_eq!(l.mesh.positions, P.to_vec(), "{name}");
        assert_eq!(l.mesh.tets, vec![[0, 1, 2, 3], [1, 2, 3, 4]], "{name}");
        assert_two_tets(&l, 0, 0);
    }
}

/// Builds a binary legacy VTK (big-endian) of the two-tet mesh by hand.
#[test]
fn vtk_legacy_binary_big_endian() {
    let mut b: Vec<u8> = Vec::new();
    b.extend_from_slice(
        b"# vtk DataFile Version 3.0\nbinary two tets\nBINARY\nDATASET UNSTRUCTURED_GRID\n",
    );
    b.extend_from_slice(b"POINTS 5 double\n");
    for p in P {
        for x in p {
            b.extend_from_slice(&x.to_be_bytes());
        }
    }
    b.extend_from_slice(b"\nCELLS 2 10\n");
    for v in [4i32, 0, 1, 2, 3, 4, 1, 2, 3, 4] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    b.extend_from_slice(b"\nCELL_TYPES 2\n");
    for v in [10i32, 10] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    b.extend_from_slice(b"\n");
    let path = scratch("binary.vtk");
    std::fs::write(&path, &b).unwrap();
    let l = read_mesh(&path).unwrap();
    assert_eq!(l.mesh.positions, P.to_vec());
    assert_two_tets(&l, 0, 0);
}

/// gmsh 2.2 binary, big-endian (the marker `1` tells the reader), sparse tags, a triangle block.
fn gmsh22_binary_be() -> Vec<u8> {
    let mut b: Vec<u8> = Vec::new();
    b.extend_from_slice(b"$MeshFormat\n2.2 1 8\n");
    b.extend_from_slice(&1i32.to_be_bytes());
    b.extend_from_slice(b"\n$EndMeshFormat\n$Nodes\n5\n");
    for (i, p) in P.iter().enumerate() {
        b.extend_from_slice(&(100 + 7 * i as i32).to_be_bytes());
        for x in p {
            b.extend_from_slice(&x.to_be_bytes());
        }
    }
    b.extend_from_slice(b"\n$EndNodes\n$Elements\n3\n");
    // Block: one triangle with 2 tags.
    for v in [2i32, 1, 2, 1, 1, 1, 100, 107, 114] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    // Block: two tets with 2 tags.
    for v in [4i32, 2, 2] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    for v in [2i32, 1, 1, 100, 107, 114, 121, 3, 1, 1, 107, 114, 121, 128] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    b.extend_from_slice(b"\n$EndElements\n");
    b
}

/// gmsh 4.0 binary (little-endian): unsigned long counts, int tags.
fn gmsh40_binary_le() -> Vec<u8> {
    let mut b: Vec<u8> = Vec::new();
    b.extend_from_slice(b"$MeshFormat\n4 1 8\n");
    b.extend_from_slice(&1i32.to_le_bytes());
    b.extend_from_slice(b"\n$EndMeshFormat\n$Nodes\n");
    b.extend_from_slice(&1u64.to_le_bytes());
    b.extend_from_slice(&5u64.to_le_bytes());
    for v in [1i32, 3, 0] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&5u64.to_le_bytes());
    for (i, p) in P.iter().enumerate() {
        b.extend_from_slice(&(i as i32 + 1).to_le_bytes());
        for x in p {
            b.extend_from_slice(&x.to_le_bytes());
        }
    }
    b.extend_from_slice(b"\n$EndNodes\n$Elements\n");
    b.extend_from_slice(&1u64.to_le_bytes());
    b.extend_from_slice(&2u64.to_le_bytes());
    for v in [1i32, 3, 4] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&2u64.to_le_bytes());
    for v in [1i32, 1, 2, 3, 4, 2, 2, 3, 4, 5] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(b"\n$EndElements\n");
    b
}

#[test]
fn gmsh_binary_hand_built_agree_with_ascii() {
    let ascii = read_mesh(&fixture("two_tets_v22.msh")).unwrap().mesh;
    for (name, bytes) in [
        ("be22.msh", gmsh22_binary_be()),
        ("le40.msh", gmsh40_binary_le()),
    ] {
        let path = scratch(name);
        std::fs::write(&path, bytes).unwrap();
        let l = read_mesh(&path).unwrap();
        assert_eq!(l.mesh, ascii, "{name}");
        assert_two_tets(&l, 0, 0);
    }
}

/// A mesh with non-trivial coordinates (a jittered box grid, no exact binary fractions).
fn awkward_mesh() -> TetMesh {
    let mut m = jello::mesh::box_grid([-0.3, 0.1, 2.0], [0.7, 1.4, 2.9], [3, 2, 2]);
    for (i, p) in m.positions.iter_mut().enumerate() {
        let s = (i as f64 * 0.618).sin() * 0.01;
        p[0] += s / 3.0;
        p[1] -= s / 7.0;
        p[2] += s * std::f64::consts::PI;
    }
    m
}

#[test]
fn round_trips_are_exact() {
    let m = awkward_mesh();
    for f in [
        GmshFormat::V22Ascii,
        GmshFormat::V22Binary,
        GmshFormat::V41Ascii,
        GmshFormat::V41Binary,
    ] {
        let path = scratch(&format!("rt_{f:?}.msh"));
        write_gmsh(&path, &m, f).unwrap();
        let l = read_mesh(&path).unwrap();
        assert_eq!(l.mesh, m, "{f:?}");
        assert!(l.warnings.is_empty(), "{:?}", l.warnings);
    }
    let path = scratch("rt.node");
    write_tetgen(&path, &m).unwrap();
    assert_eq!(read_mesh(&scratch("rt.ele")).unwrap().mesh, m);
}

#[test]
fn convert_writes_by_extension() {
    let src = fixture("two_tets.mesh");
    for ext in ["msh", "node"] {
        let out = scratch(&format!("conv.{ext}"));
        let l = jello::mesh::convert(&src, &out).unwrap();
        assert_eq!(read_mesh(&out).unwrap().mesh, l.mesh, "{ext}");
    }
    for ext in ["vtu", "obj", "ply"] {
        let out = scratch(&format!("conv.{ext}"));
        jello::mesh::convert(&src, &out).unwrap();
        assert!(std::fs::metadata(&out).unwrap().len() > 100, "{ext}");
    }
    let err = jello::mesh::convert(&src, &scratch("conv.xyz")).unwrap_err();
    assert!(err.to_string().contains("conv.xyz"), "{err}");
}

/// The real meshes: counts from ../shared/meshes/README.md, all tets already positive.
#[test]
fn shared_meshes_load_when_present() {
    let cases = [
        ("armadillo_18k", 4_855, 17_500),
        ("bunny_20k", 5_722, 22_090),
    ];
    for (name, nv, nt) in cases {
        let Some(path) = common::shared_mesh(&format!("{name}.node")) else {
            continue;
        };
        let l = read_mesh(&path).unwrap();
        assert_eq!(l.mesh.num_vertices(), nv, "{name}");
        assert_eq!(l.mesh.num_tets(), nt, "{name}");
        assert_eq!(l.reoriented, 0, "{name}: {:?}", l.warnings);
        assert!((0..nt).all(|t| l.mesh.signed_volume(t) > 0.0));
        // Unit bounding box (README: longest side 1, centred at the origin).
        let (lo, hi) = l.mesh.bounding_box().unwrap();
        let ext = (0..3).map(|k| hi[k] - lo[k]).fold(0.0, f64::max);
        assert!((ext - 1.0).abs() < 1e-6, "{name}: extent {ext}");
        // Closed surface: every edge in exactly two triangles.
        let s = surface(&l.mesh);
        let mut edges: Vec<(u32, u32)> = s
            .triangles
            .iter()
            .flat_map(|t| [(t[0], t[1]), (t[1], t[2]), (t[2], t[0])])
            .map(|(a, b)| (a.min(b), a.max(b)))
            .collect();
        edges.sort_unstable();
        assert!(edges.chunks(2).all(|c| c.len() == 2 && c[0] == c[1]));
        println!("{name}:\n{}", MeshInfo::new(&l.mesh));
    }
}

/// Files written by gmsh itself and by meshio (see tests/data/mesh/README.md): all variants give
/// the same 52-node, 114-tet mesh of the 1 × 0.8 × 0.6 box.
#[test]
fn externally_written_files_agree() {
    let names = [
        "gmsh_box_v22_ascii.msh",
        "gmsh_box_v22_bin.msh",
        "gmsh_box_v40_ascii.msh",
        "gmsh_box_v41_ascii.msh",
        "gmsh_box_v41_bin.msh",
        "meshio_box.mesh",
        "meshio_box_ascii.vtk",
        "meshio_box_bin.vtk",
    ];
    let reference = read_mesh(&fixture(names[0])).unwrap().mesh;
    for name in names {
        let l = read_mesh(&fixture(name)).unwrap();
        let m = &l.mesh;
        assert_eq!(m.num_vertices(), 52, "{name}");
        assert_eq!(m.num_tets(), 114, "{name}");
        assert_eq!(l.reoriented, 0, "{name}");
        assert_eq!(l.unreferenced, 0, "{name}");
        assert!(
            (m.total_volume() - 0.48).abs() < 1e-12,
            "{name}: {}",
            m.total_volume()
        );
        assert_eq!(geometric_tets(m), geometric_tets(&reference), "{name}");
        let (lo, hi) = m.bounding_box().unwrap();
        assert_eq!((lo, hi), ([0.0; 3], [1.0, 0.8, 0.6]), "{name}");
    }
}

/// Windows line endings read the same.
#[test]
fn crlf_line_endings() {
    for name in [
        "two_tets_v22.msh",
        "two_tets_v41.msh",
        "two_tets.mesh",
        "two_tets_classic.vtk",
        "two_tets_1based.node",
    ] {
        let unix = read_mesh(&fixture(name)).unwrap();
        let ext = Path::new(name).extension().unwrap().to_str().unwrap();
        let out = scratch(&format!("crlf_{}", name));
        let crlf = |p: &Path| std::fs::read_to_string(p).unwrap().replace('\n', "\r\n");
        std::fs::write(&out, crlf(&fixture(name))).unwrap();
        if ext == "node" {
            std::fs::write(
                out.with_extension("ele"),
                crlf(&fixture(name).with_extension("ele")),
            )
            .unwrap();
        }
        let l = read_mesh(&out).unwrap();
        assert_eq!(l.mesh, unix.mesh, "{name}");
    }
}
