//! The resize of `onnxc_resize_f32` over uint8 or int8 planes (`onnxc_resize_8`): a Resize
//! on quantized values (QOperator models' upsampling, over dims taken at run time too).
//!
//! Each output is its taps' weighted sum in float64, rows first, then rounded half to even
//! and saturated: what the compiler's float64 maps compute for an integer Resize (as onnx's
//! reference does, in float64 then `saturate_cast`), so that the kernel and the maps agree
//! to the byte, also where a sum is a tie. Its taps are therefore computed from rules
//! (float64 weights, `Rule::fill`) or are gathers and identities; weighted tables given in
//! the blob, whose weights are float32, are refused (`ResizeParams::decode_8`).

use super::{AxisParams, ResizeGeometry, ResizeParams, TapKind};
use crate::abi::ONNXC_OK;
use crate::kernels::Status;
use crate::params;

/// Floats of scratch for rows of `w_in` elements whose computed tables have `computed`
/// entries: one float of slack to align the rest to 8 bytes, then 8-byte words: the
/// computed indices, their float64 weights and one combined input row of float64s.
pub(super) fn scratch_floats(w_in: usize, computed: usize) -> usize {
    1 + 2 * (2 * computed + w_in)
}

impl ResizeGeometry {
    /// Floats of scratch `onnxc_resize_8` needs (`scratch_floats`).
    pub fn scratch_floats_8(&self) -> usize {
        scratch_floats(
            self.cols.n_in as usize,
            self.rows.computed_len() + self.cols.computed_len(),
        )
    }
}

impl<'a> ResizeParams<'a> {
    /// `decode`, refusing weighted tables given in the blob (the 8-bit kernel's taps are
    /// computed, gathers or identities).
    pub fn decode_8(blob: &'a [i64]) -> params::Result<ResizeParams<'a>> {
        let p = ResizeParams::decode(blob)?;
        params::ensure(
            p.rows.kind != TapKind::Weighted && p.cols.kind != TapKind::Weighted,
            "weighted tables given to the 8-bit resize",
        )?;
        Ok(p)
    }

    /// Floats of scratch `onnxc_resize_8` needs (`int8::scratch_floats`).
    pub fn scratch_floats_8(&self) -> usize {
        scratch_floats(
            self.cols.n_in,
            self.rows.computed_len() + self.cols.computed_len(),
        )
    }
}

/// `onnxc_resize_f32` over uint8 planes (`signed` 0) or int8 planes (see the module docs;
/// the extrapolation value is rounded and saturated too). Returns `ONNXC_ERR_PARAMS`,
/// touching nothing, when `params` is not a valid blob (`ResizeParams::decode_8`).
///
/// # Safety
/// As `onnxc_resize_f32`, with `x` and `y` holding bytes and `scratch`
/// `ResizeParams::scratch_floats_8` floats.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_resize_8(
    params: *const i64,
    floats: *const f32,
    x: *const u8,
    y: *mut u8,
    scratch: *mut f32,
    signed: i64,
) -> Status {
    let p = params::decode_blob!(params, ResizeParams::decode_8);
    let (r, c) = (p.rows, p.cols);
    let (lh, lw) = (r.computed_len(), c.computed_len());
    // SAFETY: the caller's contract: the float array starts with the extrapolation value,
    // scratch holds `scratch_floats_8` floats (8-byte words after at most one of slack), and
    // x and y the planes the validated parameters describe.
    let (extrapolation, index, weight, row, x, y) = unsafe {
        let words = scratch.add(scratch.align_offset(2).min(1)) as *mut u64;
        (
            *floats as f64,
            std::slice::from_raw_parts_mut(words as *mut i64, lh + lw),
            std::slice::from_raw_parts_mut(words.add(lh + lw) as *mut f64, lh + lw),
            std::slice::from_raw_parts_mut(words.add(2 * (lh + lw)) as *mut f64, c.n_in),
            std::slice::from_raw_parts(x, p.planes * r.n_in * c.n_in),
            std::slice::from_raw_parts_mut(y, p.planes * r.n_out * c.n_out),
        )
    };
    let (ih, iw) = index.split_at_mut(lh);
    let (wh, ww) = weight.split_at_mut(lh);
    let rows = Taps8::of(&r, ih, wh);
    let cols = Taps8::of(&c, iw, ww);
    let dims = (r.n_in, c.n_in, r.n_out, c.n_out);
    if signed != 0 {
        // SAFETY: int8 and uint8 have the same size and alignment.
        let (x, y) = unsafe {
            (
                std::slice::from_raw_parts(x.as_ptr() as *const i8, x.len()),
                std::slice::from_raw_parts_mut(y.as_mut_ptr() as *mut i8, y.len()),
            )
        };
        crate::multiversion!(resize_8(x, y, row, dims, &rows, &cols, extrapolation));
    } else {
        crate::multiversion!(resize_8(x, y, row, dims, &rows, &cols, extrapolation));
    }
    ONNXC_OK
}

/// One axis's taps for the 8-bit kernel: computed into `index` and `weight` by its rule, or
/// a gather whose indices the blob holds (weight 1), or the identity.
struct Taps8<'a> {
    kind: TapKind,
    taps: usize,
    index: &'a [i64],
    weight: &'a [f64],
}

impl<'a> Taps8<'a> {
    /// Axis `a`'s taps, its rule's tables computed into `index` and `weight` (`a.n_out ·
    /// a.taps` entries each; empty for other kinds).
    fn of(a: &AxisParams<'a>, index: &'a mut [i64], weight: &'a mut [f64]) -> Taps8<'a> {
        match a.rule {
            Some(rule) => {
                rule.fill(a.n_in, a.n_out, index, weight);
                let kind = match rule.filter {
                    super::Filter::Nearest(_) => TapKind::Gather,
                    _ => TapKind::Weighted,
                };
                Taps8 {
                    kind,
                    taps: a.taps,
                    index,
                    weight,
                }
            }
            None => Taps8 {
                kind: a.kind,
                taps: a.taps,
                index: a.index,
                weight: &[],
            },
        }
    }

    /// Output `o`'s input `k` and its weight (1 for a gather).
    #[inline(always)]
    fn tap(&self, o: usize, k: usize) -> (i64, f64) {
        match self.kind {
            TapKind::Identity => (o as i64, 1.0),
            TapKind::Gather => (self.index[o], 1.0),
            _ => (
                self.index[o * self.taps + k],
                self.weight[o * self.taps + k],
            ),
        }
    }
}

/// An 8-bit element: exact in float64, stored rounded half to even and saturated.
trait Int8: Copy {
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
}

impl Int8 for u8 {
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> u8 {
        // `as` saturates.
        v.round_ties_even() as u8
    }
}

impl Int8 for i8 {
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> i8 {
        v.round_ties_even() as i8
    }
}

/// Per output row: its input rows combined in float64 into `row` (an input row converted
/// when it reads one), or the extrapolation value; then each output column its taps' sum
/// over `row`, rounded. An output row reading the same single input row as the one before
/// it is a copy of that output row.
#[inline(always)]
fn resize_8<T: Int8>(
    x: &[T],
    y: &mut [T],
    row: &mut [f64],
    (h_in, w_in, h_out, w_out): (usize, usize, usize, usize),
    rows: &Taps8,
    cols: &Taps8,
    extrapolation: f64,
) {
    if h_out == 0 || w_out == 0 || w_in == 0 || h_in == 0 {
        return;
    }
    let outside = T::from_f64(extrapolation);
    let one_row = rows.kind != TapKind::Weighted;
    for (plane, out_plane) in x
        .chunks_exact(h_in * w_in)
        .zip(y.chunks_exact_mut(h_out * w_out))
    {
        for o in 0..h_out {
            let first = rows.tap(o, 0).0;
            if o > 0 && one_row && first == rows.tap(o - 1, 0).0 {
                let (done, rest) = out_plane.split_at_mut(o * w_out);
                rest[..w_out].copy_from_slice(&done[(o - 1) * w_out..]);
                continue;
            }
            if first < 0 {
                row.fill(extrapolation);
            } else {
                let taps = if one_row { 1 } else { rows.taps };
                for k in 0..taps {
                    let (i, wt) = rows.tap(o, k);
                    let src = &plane[i as usize * w_in..][..w_in];
                    if k == 0 {
                        for (f, &v) in row.iter_mut().zip(src) {
                            *f = wt * v.to_f64();
                        }
                    } else {
                        for (f, &v) in row.iter_mut().zip(src) {
                            *f += wt * v.to_f64();
                        }
                    }
                }
            }
            let out = &mut out_plane[o * w_out..(o + 1) * w_out];
            for (c, v) in out.iter_mut().enumerate() {
                let (i, wt) = cols.tap(c, 0);
                *v = if i < 0 {
                    outside
                } else if cols.kind != TapKind::Weighted {
                    T::from_f64(row[i as usize])
                } else {
                    let mut s = wt * row[i as usize];
                    for k in 1..cols.taps {
                        let (i, wt) = cols.tap(c, k);
                        s += wt * row[i as usize];
                    }
                    T::from_f64(s)
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{AxisTaps, Coord, Filter, Nearest, Rule, Scale};
    use super::*;
    use crate::abi::ONNXC_ERR_PARAMS;

    fn rule(filter: Filter, coord: Coord, scale: Scale) -> Rule {
        Rule {
            filter,
            coord,
            exclude_outside: false,
            antialias: false,
            scale,
        }
    }

    /// Runs the kernel on `x` (bytes), returning its status and output.
    fn run(g: &ResizeGeometry, x: &[u8], signed: bool) -> (Status, Vec<u8>) {
        let (p, f) = g.encode();
        let mut y = vec![0xAAu8; (g.planes * g.rows.n_out * g.cols.n_out) as usize];
        let mut scratch = vec![f32::NAN; g.scratch_floats_8() + 1];
        // Misaligned scratch (by one float) must work too: the kernel aligns its words.
        let s = &mut scratch[x.len() % 2..];
        // SAFETY: p is a sealed blob and f its floats; sizes as documented.
        let status = unsafe {
            onnxc_resize_8(
                p.as_ptr(),
                f.as_ptr(),
                x.as_ptr(),
                y.as_mut_ptr(),
                s.as_mut_ptr(),
                signed as i64,
            )
        };
        (status, y)
    }

    /// The resize one output at a time in float64 from the rules' float64 tables, rows
    /// first, rounded half to even and saturated: the compiler's maps.
    fn naive(g: &ResizeGeometry, x: &[f64], lo: f64, hi: f64) -> Vec<f64> {
        let tables = |a: &AxisTaps| -> (usize, Vec<i64>, Vec<f64>) {
            match a.rule {
                Some(rule) => {
                    let len = (a.n_out * a.taps) as usize;
                    let (mut i, mut w) = (vec![0; len], vec![0.0; len]);
                    rule.fill(a.n_in as usize, a.n_out as usize, &mut i, &mut w);
                    (a.taps as usize, i, w)
                }
                None if a.kind == TapKind::Identity => {
                    (1, (0..a.n_out).collect(), vec![1.0; a.n_out as usize])
                }
                None => (1, a.index.clone(), vec![1.0; a.index.len()]),
            }
        };
        let ((th, ih, wh), (tw, iw, ww)) = (tables(&g.rows), tables(&g.cols));
        let (hi_, wi, ho, wo) = (
            g.rows.n_in as usize,
            g.cols.n_in as usize,
            g.rows.n_out as usize,
            g.cols.n_out as usize,
        );
        let e = g.extrapolation as f64;
        let mut y = Vec::new();
        for p in 0..g.planes as usize {
            for oy in 0..ho {
                // The row pass over every input column, then the column pass.
                let row: Vec<f64> = (0..wi)
                    .map(|c| {
                        if ih[oy * th] < 0 {
                            return e;
                        }
                        let mut s = 0.0;
                        for t in 0..th {
                            let r = ih[oy * th + t] as usize;
                            let v = wh[oy * th + t] * x[(p * hi_ + r) * wi + c];
                            s = if t == 0 { v } else { s + v };
                        }
                        s
                    })
                    .collect();
                for ox in 0..wo {
                    let v = if iw[ox * tw] < 0 {
                        e
                    } else {
                        let mut s = 0.0;
                        for t in 0..tw {
                            let v = ww[ox * tw + t] * row[iw[ox * tw + t] as usize];
                            s = if t == 0 { v } else { s + v };
                        }
                        s
                    };
                    y.push(v.round_ties_even().clamp(lo, hi));
                }
            }
        }
        y
    }

    /// Every rule kind and gathers given in the blob (with extrapolated outputs), on uint8
    /// and int8 planes, at the extremes of each type (saturating cubic overshoot).
    #[test]
    fn matches_the_float64_maps() {
        let near = |m| Filter::Nearest(m);
        let gather = |n_in: i64, n_out: i64| {
            let index = (0..n_out)
                .map(|o| if o == 0 { -1 } else { o * n_in / n_out })
                .collect();
            AxisTaps::new(n_in, n_out, 1, index, vec![1.0; n_out as usize]).unwrap()
        };
        let axes = |(hi, wi, ho, wo): (i64, i64, i64, i64), rh: Rule, rw: Rule| {
            (
                AxisTaps::computed(hi, ho, rh).unwrap(),
                AxisTaps::computed(wi, wo, rw).unwrap(),
            )
        };
        let linear = rule(Filter::Linear, Coord::HalfPixel, Scale::Given(2.0));
        let cases = [
            axes((5, 7, 10, 14), linear, linear),
            axes(
                (6, 9, 9, 13),
                rule(Filter::Linear, Coord::HalfPixel, Scale::Given(1.5)),
                rule(Filter::Linear, Coord::AlignCorners, Scale::Sizes),
            ),
            axes(
                (5, 7, 11, 3),
                rule(Filter::Cubic(-0.75), Coord::HalfPixel, Scale::Sizes),
                Rule {
                    antialias: true,
                    ..rule(Filter::Cubic(-0.5), Coord::HalfPixel, Scale::Given(0.45))
                },
            ),
            axes(
                (5, 7, 10, 21),
                rule(
                    near(Nearest::RoundPreferFloor),
                    Coord::HalfPixel,
                    Scale::Given(2.0),
                ),
                rule(near(Nearest::Floor), Coord::Asymmetric, Scale::Given(3.0)),
            ),
            (
                AxisTaps::identity(5),
                AxisTaps::computed(7, 12, linear).unwrap(),
            ),
            (gather(5, 9), AxisTaps::computed(7, 14, linear).unwrap()),
            (AxisTaps::computed(5, 10, linear).unwrap(), gather(7, 11)),
        ];
        for (rows, cols) in cases {
            let g = ResizeGeometry {
                planes: 3,
                rows,
                cols,
                extrapolation: -300.5,
            };
            let n = (3 * g.rows.n_in * g.cols.n_in) as usize;
            // The extremes of each type, then a spread of values.
            let x: Vec<u8> = (0..n)
                .map(|i| match i % 9 {
                    0 => 0,
                    1 => 255,
                    2 => 127,
                    3 => 128,
                    _ => (i * 37 % 256) as u8,
                })
                .collect();
            for signed in [false, true] {
                let (status, got) = run(&g, &x, signed);
                assert_eq!(status, ONNXC_OK);
                let (values, lo, hi): (Vec<f64>, f64, f64) = if signed {
                    (x.iter().map(|&v| v as i8 as f64).collect(), -128.0, 127.0)
                } else {
                    (x.iter().map(|&v| v as f64).collect(), 0.0, 255.0)
                };
                let got: Vec<f64> = (got.iter())
                    .map(|&v| if signed { v as i8 as f64 } else { v as f64 })
                    .collect();
                assert_eq!(got, naive(&g, &values, lo, hi), "{g:?} signed {signed}");
            }
        }
    }

    /// Weighted tables given in the blob (float32 weights) are refused, touching nothing.
    #[test]
    fn refuses_given_weights() {
        let weighted = AxisTaps::new(2, 3, 2, vec![0, 1, 0, 1, 0, 1], vec![0.5; 6]).unwrap();
        assert_eq!(weighted.kind, TapKind::Weighted);
        let g = ResizeGeometry {
            planes: 1,
            rows: AxisTaps::identity(2),
            cols: weighted,
            extrapolation: 0.0,
        };
        let (status, y) = run(&g, &[1, 2, 3, 4], false);
        assert_eq!(status, ONNXC_ERR_PARAMS);
        assert!(y.iter().all(|&v| v == 0xAA));
    }
}
