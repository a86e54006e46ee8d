//! A ring net (chain mail): flat rings on a square grid, each linked to its neighbours by
//! smaller upright rings threaded through both holes — one mesh of disjoint closed rings that
//! hold together only through contact.
//!
//! **Layout.** Flat rings (axis y, outer radius R, inner radius r, wall w = R − r, thickness
//! h along the axis) sit `spacing = 2R + w` apart along x and z (a gap of one wall between
//! neighbours). The link between two neighbours is an upright ring in the vertical plane
//! through both centres, centred between them, of centre-line radius `spacing/2 − r/2` and the
//! same wall and thickness: it crosses each flat ring's plane a distance r/2 from that ring's
//! centre, on the side of the link, so the up to four links through one hole do not meet.
//! [`ring_net_clearance`] is the smallest gap this leaves (it must be positive).

use super::ring::ring;
use crate::mesh::TetMesh;

/// The geometry of a ring net: flat-ring radii and thickness (m) and cells around each ring.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RingNet {
    /// Flat rings' outer radius R, m.
    pub radius: f64,
    /// Flat rings' inner radius r (the hole), m; 0 < r < R.
    pub inner_radius: f64,
    /// Every ring's thickness along its axis, m.
    pub height: f64,
    /// Cells of each ring `[around ≥ 3, across, along]` (6 tets per cell).
    pub cells: [usize; 3],
}

impl RingNet {
    /// Centre distance of neighbouring flat rings, m: 2R + (R − r).
    pub fn spacing(&self) -> f64 {
        3.0 * self.radius - self.inner_radius
    }

    /// The links' inner and outer radii, m.
    pub fn link_radii(&self) -> (f64, f64) {
        let (r, w) = (self.inner_radius, self.radius - self.inner_radius);
        let mid = 0.5 * self.spacing() - 0.5 * r;
        (mid - 0.5 * w, mid + 0.5 * w)
    }
}

/// The smallest clearance between rings of a net, m (negative: some rings would intersect),
/// over the three places they come close, with each hole taken as its polygon's inscribed
/// circle (radius × cos(π/around)):
/// - a link where it crosses a flat ring's plane (a w × h rectangle centred r/2 from the ring's
///   centre) against that ring's hole: r·cos(π/n) − |(r/2 + w/2, h/2)|;
/// - a flat ring's wall (distances w/2 to 3w/2 from a link's centre, thickness h) against the
///   link's hole (radius r/2 + w): (r/2 + w)·cos(π/n) − |(3w/2, h/2)|;
/// - two perpendicular links through one hole: r/2 − w/2 − h/2.
pub fn ring_net_clearance(net: &RingNet) -> f64 {
    let (r, w, h) = (net.inner_radius, net.radius - net.inner_radius, net.height);
    let c = (std::f64::consts::PI / net.cells[0].max(3) as f64).cos();
    let (link_inner, _) = net.link_radii();
    let link_in_hole = r * c - (0.5 * (r + w)).hypot(0.5 * h);
    let ring_in_link = link_inner * c - (1.5 * w).hypot(0.5 * h);
    let links_apart = 0.5 * (r - w - h);
    link_in_hole.min(ring_in_link).min(links_apart)
}

/// A net of `count = [nx, nz]` flat rings centred on `center` (m), with the links between grid
/// neighbours: nx·nz flat rings, then (nx − 1)·nz links along x, then nx·(nz − 1) along z, each
/// ring a [`ring`] mesh (the flat ones as generated, the links turned upright). Positively
/// oriented. The caller checks [`ring_net_clearance`] > 0.
pub fn ring_net(center: [f64; 3], count: [usize; 2], net: &RingNet) -> TetMesh {
    let s = net.spacing();
    let (link_inner, link_outer) = net.link_radii();
    let at = |i: f64, j: f64| {
        [
            center[0] + (i - 0.5 * (count[0] as f64 - 1.0)) * s,
            center[1],
            center[2] + (j - 0.5 * (count[1] as f64 - 1.0)) * s,
        ]
    };
    let mut out = TetMesh {
        positions: Vec::new(),
        tets: Vec::new(),
    };
    // `turn` maps an offset from the ring's centre (ring about y) to the placed ring's.
    let mut add = |c: [f64; 3], inner: f64, outer: f64, turn: fn([f64; 3]) -> [f64; 3]| {
        let m = ring([0.0; 3], inner, outer, net.height, net.cells);
        let base = out.positions.len() as u32;
        out.positions.extend(m.positions.iter().map(|&p| {
            let q = turn(p);
            [c[0] + q[0], c[1] + q[1], c[2] + q[2]]
        }));
        out.tets.extend(m.tets.iter().map(|t| t.map(|v| v + base)));
    };
    let flat: fn([f64; 3]) -> [f64; 3] = |p| p;
    // Proper rotations (det +1, so tets stay positive): +90° about x takes the axis y to z
    // (a ring in the xy-plane, linking along x); +90° about z takes it to −x (the yz-plane).
    let along_x: fn([f64; 3]) -> [f64; 3] = |[x, y, z]| [x, -z, y];
    let along_z: fn([f64; 3]) -> [f64; 3] = |[x, y, z]| [-y, x, z];
    for j in 0..count[1] {
        for i in 0..count[0] {
            add(at(i as f64, j as f64), net.inner_radius, net.radius, flat);
        }
    }
    for j in 0..count[1] {
        for i in 0..count[0].saturating_sub(1) {
            add(
                at(i as f64 + 0.5, j as f64),
                link_inner,
                link_outer,
                along_x,
            );
        }
    }
    for j in 0..count[1].saturating_sub(1) {
        for i in 0..count[0] {
            add(
                at(i as f64, j as f64 + 0.5),
                link_inner,
                link_outer,
                along_z,
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contact::{check_intersection_free, BodyKind, CollisionBody, CollisionMesh};
    use crate::mesh::topology::surface;

    const NET: RingNet = RingNet {
        radius: 0.05,
        inner_radius: 0.04,
        height: 0.01,
        cells: [16, 1, 1],
    };

    #[test]
    fn a_net_is_positive_disjoint_and_linked() {
        assert!(ring_net_clearance(&NET) > 0.0);
        let count = [3, 2];
        let m = ring_net([0.1, 0.5, -0.2], count, &NET);
        let rings = 3 * 2 + 2 * 2 + 3;
        let per = 16 * 2 * 2;
        assert_eq!(m.num_vertices(), rings * per);
        assert!((0..m.num_tets()).all(|t| m.signed_volume(t) > 0.0));
        // Each ring its own body: no two rings' surfaces meet (exact check).
        let faces = surface(&m).triangles;
        let bodies = (0..rings)
            .map(|k| CollisionBody {
                name: format!("ring{k}"),
                kind: BodyKind::Deformable,
                self_contact: true,
                vertices: k * per..(k + 1) * per,
            })
            .collect();
        let mesh = CollisionMesh::from_triangles(&m.positions, bodies, &faces).unwrap();
        check_intersection_free(&mesh, &m.positions).unwrap();
        // Linked: the first x-link's centre line passes through the first flat ring's hole,
        // r/2 from its centre (its lowest point lies below the flat ring's plane).
        let link = &m.positions[6 * per..7 * per];
        let low = link.iter().map(|p| p[1]).fold(f64::INFINITY, f64::min);
        let high = link.iter().map(|p| p[1]).fold(f64::NEG_INFINITY, f64::max);
        assert!(low < 0.5 - 0.02 && high > 0.5 + 0.02, "{low} {high}");
    }

    #[test]
    fn too_thick_a_net_has_no_clearance() {
        let thick = RingNet {
            height: 0.04,
            ..NET
        };
        assert!(ring_net_clearance(&thick) < 0.0);
    }
}
