//! Tap tables computed when the kernel runs, from an axis's lengths and the op's attributes
//! (`TapKind::Computed`): what a model whose lengths are taken at run time needs, since its
//! tables' lengths follow them.
//!
//! The formulas are onnx's reference implementation's (`op_resize.py`), in its order of f64
//! operations, as the compiler's table maps (`frontend::ops::resize::taps`) build them: the
//! compiler's tests check both give the same tables bit for bit.

use crate::params::{self, ensure};

/// The coordinate transformation of `coordinate_transformation_mode` (all but
/// `tf_crop_and_resize`, whose roi the compiler's tables take).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coord {
    HalfPixel = 0,
    HalfPixelSymmetric = 1,
    PytorchHalfPixel = 2,
    AlignCorners = 3,
    Asymmetric = 4,
    /// Resize-11/12's `(y + 0.5) / scale`, in float32.
    TfHalfPixelForNn = 5,
}

/// `nearest_mode`, and opsets before 11 (`Simple`: down when upsampling, up when
/// downsampling).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nearest {
    RoundPreferFloor = 0,
    RoundPreferCeil = 1,
    Floor = 2,
    Ceil = 3,
    Simple = 4,
}

/// The interpolation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Filter {
    Nearest(Nearest),
    Linear,
    /// With `cubic_coeff_a`.
    Cubic(f64),
}

/// Where an axis's scale comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    /// A constant scale (the `scales` input).
    Given(f64),
    /// `n_out / n_in` (the `sizes` input, or an axis sized by another value's shape).
    Sizes,
}

/// How one axis's taps follow from its lengths.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rule {
    pub filter: Filter,
    pub coord: Coord,
    pub exclude_outside: bool,
    pub antialias: bool,
    pub scale: Scale,
}

/// Words a rule takes in a parameter blob.
pub const RULE_WORDS: usize = 7;

impl Rule {
    /// `[filter, nearest mode or the cubic coefficient's bits, coord, exclude_outside,
    /// antialias, scale kind, the given scale's bits or 0]`.
    pub fn encode(&self) -> [i64; RULE_WORDS] {
        let (filter, second) = match self.filter {
            Filter::Nearest(n) => (0, n as i64),
            Filter::Linear => (1, 0),
            Filter::Cubic(a) => (2, a.to_bits() as i64),
        };
        let (kind, scale) = match self.scale {
            Scale::Given(s) => (0, s.to_bits() as i64),
            Scale::Sizes => (1, 0),
        };
        [
            filter,
            second,
            self.coord as i64,
            self.exclude_outside as i64,
            self.antialias as i64,
            kind,
            scale,
        ]
    }

    /// The rule of `w` (`encode`'s words), validated: known kinds, a finite cubic
    /// coefficient, a finite positive scale, antialiasing only with linear and cubic
    /// filters, `exclude_outside` not with nearest.
    pub fn decode(w: &[i64]) -> params::Result<Rule> {
        ensure(w.len() == RULE_WORDS, "a tap rule of the wrong length")?;
        let bad = params::ParamError("an unknown tap rule");
        let filter = match w[0] {
            0 => Filter::Nearest(match w[1] {
                0 => Nearest::RoundPreferFloor,
                1 => Nearest::RoundPreferCeil,
                2 => Nearest::Floor,
                3 => Nearest::Ceil,
                4 => Nearest::Simple,
                _ => return Err(bad),
            }),
            1 => Filter::Linear,
            2 => {
                let a = f64::from_bits(w[1] as u64);
                ensure(a.is_finite(), "a cubic coefficient that is not finite")?;
                Filter::Cubic(a)
            }
            _ => return Err(bad),
        };
        let coord = match w[2] {
            0 => Coord::HalfPixel,
            1 => Coord::HalfPixelSymmetric,
            2 => Coord::PytorchHalfPixel,
            3 => Coord::AlignCorners,
            4 => Coord::Asymmetric,
            5 => Coord::TfHalfPixelForNn,
            _ => return Err(bad),
        };
        let flag = |v: i64| match v {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(bad),
        };
        let (exclude_outside, antialias) = (flag(w[3])?, flag(w[4])?);
        let scale = match w[5] {
            0 => {
                let s = f64::from_bits(w[6] as u64);
                ensure(
                    s.is_finite() && s > 0.0,
                    "a scale that is not finite and positive",
                )?;
                Scale::Given(s)
            }
            1 => {
                ensure(w[6] == 0, "an unknown tap rule")?;
                Scale::Sizes
            }
            _ => return Err(bad),
        };
        let nearest = matches!(filter, Filter::Nearest(_));
        ensure(
            !(nearest && (antialias || exclude_outside)),
            "a nearest rule with antialias or exclude_outside",
        )?;
        Ok(Rule {
            filter,
            coord,
            exclude_outside,
            antialias,
            scale,
        })
    }

    /// The scale of an axis from `n_in` to `n_out`.
    pub fn scale(&self, n_in: usize, n_out: usize) -> f64 {
        match self.scale {
            Scale::Given(s) => s,
            Scale::Sizes => n_out as f64 / n_in as f64,
        }
    }

    /// Taps per output: 1 for nearest; the reference's footprint otherwise (2 for linear, 4
    /// for cubic, wider when antialiasing a downscale).
    pub fn taps(&self, n_in: usize, n_out: usize) -> usize {
        let support = match self.filter {
            Filter::Nearest(_) => return 1,
            Filter::Cubic(_) => 2.0,
            Filter::Linear => 1.0,
        };
        let s = if self.antialias {
            self.scale(n_in, n_out).min(1.0)
        } else {
            1.0
        };
        (2.0 - 2.0 * ((-support / s).floor() + 1.0)) as usize
    }

    /// Source coordinate of output position `y` (the reference's `_compute_x_ori`).
    fn source(&self, s: f64, n_in: usize, n_out: usize, y: f64) -> f64 {
        let input_width = n_in as f64;
        let output_width = s * input_width;
        let ow_is_1 = output_width == 1.0;
        let half_pixel = || (y + 0.5) / s - 0.5;
        match self.coord {
            Coord::AlignCorners if ow_is_1 => 0.0,
            Coord::AlignCorners => y * (n_in - 1) as f64 / (output_width - 1.0),
            Coord::Asymmetric => y / s,
            Coord::PytorchHalfPixel if ow_is_1 => -0.5,
            Coord::PytorchHalfPixel | Coord::HalfPixel => half_pixel(),
            Coord::TfHalfPixelForNn => ((y + 0.5) as f32 / s as f32) as f64,
            Coord::HalfPixelSymmetric => {
                let adjustment = n_out as f64 / output_width;
                let center = n_in as f64 / 2.0;
                let offset = center * (1.0 - adjustment);
                offset + (y + 0.5) / s - 0.5
            }
        }
    }

    /// The tables of an axis from `n_in` to `n_out` with `taps` per output (`Rule::taps`):
    /// `index[o·taps + t]` in `[0, n_in)` and `weight[o·taps + t]`.
    pub fn fill<W: Weight>(&self, n_in: usize, n_out: usize, index: &mut [i64], weight: &mut [W]) {
        let taps = self.taps(n_in, n_out);
        let s = self.scale(n_in, n_out);
        let last = n_in as i64 - 1;
        let rows = index
            .chunks_exact_mut(taps)
            .zip(weight.chunks_exact_mut(taps));
        for (o, (ix, wt)) in rows.enumerate().take(n_out) {
            let x = self.source(s, n_in, n_out, o as f64);
            match self.filter {
                Filter::Nearest(mode) => {
                    ix[0] = nearest(mode, s, x).clamp(0, last);
                    wt[0] = W::of(1.0);
                }
                _ => self.weighted(s, n_in, x, ix, wt),
            }
        }
    }

    /// The `taps` inputs nearest to `x` (ties to the smaller, as the reference's edge-padded
    /// neighbor search picks them) and the filter at each one's distance.
    fn weighted<W: Weight>(&self, s: f64, n_in: usize, x: f64, ix: &mut [i64], wt: &mut [W]) {
        let taps = ix.len();
        let half = (taps / 2) as f64;
        let xp = x + half;
        let pp = xp.floor();
        let start = (pp + if xp == pp { -half } else { 1.0 - half }) - half;
        let filter_scale = if self.antialias { fmin(s, 1.0) } else { 1.0 };
        let last = (n_in - 1) as f64;
        let coef = |k: usize| {
            let i = start + k as f64;
            let ad = ((i - x) * filter_scale).abs();
            let w = match self.filter {
                Filter::Cubic(a) => {
                    let ad2 = ad * ad;
                    let ad3 = ad2 * ad;
                    if ad <= 1.0 {
                        ((a + 2.0) * ad3 - (a + 3.0) * ad2) + 1.0
                    } else if ad < 2.0 {
                        ((a * ad3 - (5.0 * a) * ad2) + (8.0 * a) * ad) - 4.0 * a
                    } else {
                        0.0
                    }
                }
                _ => fmax(1.0 - ad, 0.0),
            };
            if self.exclude_outside && !(i >= 0.0 && i <= last) {
                0.0
            } else {
                w
            }
        };
        let sum = if self.antialias || self.exclude_outside {
            let sum = (1..taps).fold(coef(0), |acc, k| acc + coef(k));
            Some(if sum == 0.0 { 1.0 } else { sum })
        } else {
            None
        };
        for k in 0..taps {
            let w = coef(k);
            wt[k] = W::of(match sum {
                Some(sum) => w / sum,
                None => w,
            });
            ix[k] = f64_to_i64(start + k as f64).clamp(0, last as i64);
        }
    }
}

/// A tap weight's type: float32 for the float kernel, float64 for the 8-bit one (whose
/// sums must round as the compiler's float64 maps do).
pub trait Weight: Copy {
    fn of(v: f64) -> Self;
}

impl Weight for f32 {
    fn of(v: f64) -> f32 {
        v as f32
    }
}

impl Weight for f64 {
    fn of(v: f64) -> f64 {
        v
    }
}

/// The input index output coordinate `x` rounds to (before clamping), as the reference
/// weighs two neighbors: at an integer `x`, `x − 1` and `x` (taking `x`); otherwise `⌊x⌋`
/// and `⌊x⌋ + 1`, by the mode. It finds them from `x + 1` (its edge padding), which can
/// round to an integer where `x` is not: the pair is then `x − 1, x` as for the exact `x`.
fn nearest(mode: Nearest, s: f64, x: f64) -> i64 {
    let xi = x.floor();
    let r = x - xi;
    let up = match mode {
        Nearest::RoundPreferFloor => r > 0.5,
        Nearest::RoundPreferCeil => r >= 0.5,
        Nearest::Floor => false,
        Nearest::Ceil => true,
        Nearest::Simple => s < 1.0,
    };
    let up = x == xi || up;
    let xp = x + 1.0;
    let pp = xp.floor();
    let first = if xp == pp { pp - 2.0 } else { pp - 1.0 };
    f64_to_i64(if up { first + 1.0 } else { first })
}

/// The compiler's float-to-integer cast (saturating, NaN to 0), as Rust's `as`.
fn f64_to_i64(v: f64) -> i64 {
    v as i64
}

/// The IR's `Max` (NaN when either is).
fn fmax(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// The IR's `Min` (NaN when either is).
fn fmin(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}
