// The H-matrix far field's blob (`hm`, bound by the importing kernel): layout constants and
// float reads. Layout in src/gpu/twins/hmatrix.rs.
const HM_HEADER: u32 = 8u;
const HM_NODE_WORDS: u32 = 10u;
const HM_PAIR_WORDS: u32 = 3u;
const HM_NONE: u32 = 0xffffffffu;

fn hf(i: u32) -> f32 {
    return bitcast<f32>(hm[i]);
}
