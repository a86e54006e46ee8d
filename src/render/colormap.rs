//! A perceptual colour map for scalar fields painted on a surface (the residual picture) and a
//! log-scale mapping of values to it.

/// Viridis (van der Walt and Smith, matplotlib's default map) sampled at t = 0, 0.1, …, 1, sRGB
/// 8-bit. Perceptually uniform, readable in greyscale and by colour-blind viewers; its
/// lightness rises monotonically from dark purple (low) to yellow (high).
const VIRIDIS: [[u8; 3]; 11] = [
    [68, 1, 84],
    [72, 36, 117],
    [65, 68, 135],
    [53, 95, 141],
    [42, 120, 142],
    [33, 145, 140],
    [34, 168, 132],
    [68, 191, 112],
    [122, 209, 81],
    [189, 223, 38],
    [253, 231, 37],
];

/// The colour for vertices that carry no value (pinned vertices in the residual picture): a
/// neutral grey, sRGB.
pub const NO_VALUE_COLOUR: [f32; 3] = [0.62, 0.62, 0.62];

/// Viridis at `t` ∈ [0, 1] (clamped; NaN maps to 0), sRGB in [0, 1]: piecewise linear between
/// the samples.
pub fn viridis(t: f32) -> [f32; 3] {
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    let x = t * (VIRIDIS.len() - 1) as f32;
    let i = (x.floor() as usize).min(VIRIDIS.len() - 2);
    let f = x - i as f32;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    std::array::from_fn(|k| ((1.0 - f) * a[k] as f32 + f * b[k] as f32) / 255.0)
}

/// A log₁₀ scale from the smallest to the largest positive value of a field.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogScale {
    /// The value painted at the bottom of the map (the smallest positive value), in the
    /// field's unit.
    pub min: f64,
    /// The value painted at the top (the largest value).
    pub max: f64,
}

impl LogScale {
    /// The scale spanning the positive, finite values of `values` (others are skipped), or
    /// `None` when there is none.
    pub fn spanning<'a>(values: impl IntoIterator<Item = &'a f64>) -> Option<LogScale> {
        let (mut min, mut max) = (f64::INFINITY, 0.0f64);
        for &v in values {
            if v.is_finite() && v > 0.0 {
                min = min.min(v);
                max = max.max(v);
            }
        }
        (max > 0.0).then_some(LogScale { min, max })
    }

    /// Where `v` falls on the map, in [0, 1]: log-linear between `min` and `max` (0.5 when they
    /// are equal); `None` for a value that is not positive and finite.
    pub fn position(&self, v: f64) -> Option<f32> {
        if !(v.is_finite() && v > 0.0) {
            return None;
        }
        let span = (self.max / self.min).log10();
        if span <= 0.0 {
            return Some(0.5);
        }
        Some(((v / self.min).log10() / span).clamp(0.0, 1.0) as f32)
    }

    /// The sRGB colour of `v`: viridis at [`Self::position`], [`NO_VALUE_COLOUR`] for a value
    /// that is not positive and finite.
    pub fn colour(&self, v: f64) -> [f32; 3] {
        self.position(v).map_or(NO_VALUE_COLOUR, viridis)
    }
}
