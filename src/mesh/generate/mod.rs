//! Mesh generators, so bundled scenes need no mesh files.

mod ball;
mod grid;
mod ring;
mod ring_net;

pub use ball::ball;
pub use grid::box_grid;
pub use ring::ring;
pub use ring_net::{ring_net, ring_net_clearance, RingNet};
