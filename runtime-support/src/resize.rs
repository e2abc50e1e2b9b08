//! Separable resize of float32 planes over their last two axes with taps the compiler
//! computed (`onnxc_resize_f32`, the compiler's `Op::Resize`; ONNX Resize/Upsample with
//! constant scales, sizes and roi).
//!
//! Per output row: the row's input rows are combined with their weights into one row in
//! scratch (vectorized along the row; a row that reads one input row with weight 1 is used in
//! place), then each output column combines its input columns of that row (a gather from
//! L1). Rows are combined before columns, in the order onnx's reference evaluator applies the
//! axes. An index of -1 marks an output row or column outside a `tf_crop_and_resize` region:
//! it takes the extrapolation value.

/// How one axis's taps apply.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TapKind {
    /// Each output combines `taps` inputs with weights.
    Weighted = 0,
    /// Each output is one input (weight 1) or extrapolated.
    Gather = 1,
    /// Output `i` is input `i`.
    Identity = 2,
}

/// One axis's taps: for output `o`, inputs `index[o·taps + t]` (in `[0, n_in)`, or -1 for
/// an extrapolated output: then every tap of `o` is -1) weighted by `weight[o·taps + t]`.
/// The identity has no tables (`index` and `weight` empty).
#[derive(Clone, Debug, PartialEq)]
pub struct AxisTaps {
    pub kind: TapKind,
    pub n_in: i64,
    pub n_out: i64,
    pub taps: i64,
    pub index: Vec<i64>,
    pub weight: Vec<f32>,
}

impl AxisTaps {
    /// The identity of an axis of length `n`.
    pub fn identity(n: i64) -> AxisTaps {
        AxisTaps {
            kind: TapKind::Identity,
            n_in: n,
            n_out: n,
            taps: 1,
            index: Vec::new(),
            weight: Vec::new(),
        }
    }

    /// Taps from tables (`index`/`weight` of `n_out · taps` entries), classified: one tap of
    /// weight 1 everywhere is a gather, and a gather of `i` at every `i` the identity.
    /// `None` when the tables are inconsistent (an index outside `[-1, n_in)`, a partly
    /// extrapolated output, wrong lengths).
    pub fn new(
        n_in: i64,
        n_out: i64,
        taps: i64,
        index: Vec<i64>,
        weight: Vec<f32>,
    ) -> Option<AxisTaps> {
        let len = usize::try_from(n_out.checked_mul(taps)?).ok()?;
        if taps < 1 || n_in < 1 || index.len() != len || weight.len() != len {
            return None;
        }
        for row in index.chunks(taps as usize) {
            let outside = row[0] == -1;
            if row
                .iter()
                .any(|&i| i < -1 || i >= n_in || (i == -1) != outside)
            {
                return None;
            }
        }
        let gather = taps == 1
            && weight
                .iter()
                .zip(&index)
                .all(|(&w, &i)| w == 1.0 || i == -1);
        let identity =
            gather && n_in == n_out && index.iter().enumerate().all(|(o, &i)| i == o as i64);
        if identity {
            return Some(AxisTaps::identity(n_in));
        }
        Some(AxisTaps {
            kind: if gather {
                TapKind::Gather
            } else {
                TapKind::Weighted
            },
            n_in,
            n_out,
            taps,
            index,
            weight,
        })
    }
}

/// A resize of `planes` planes of `rows.n_in × cols.n_in` floats into `rows.n_out ×
/// cols.n_out`.
#[derive(Clone, Debug, PartialEq)]
pub struct ResizeGeometry {
    pub planes: i64,
    pub rows: AxisTaps,
    pub cols: AxisTaps,
    pub extrapolation: f32,
}

const HEADER: usize = 9;

impl ResizeGeometry {
    /// The kernel's integer parameters: `[planes, h_in, w_in, h_out, w_out, taps_h, taps_w,
    /// kind_h, kind_w]`, then the row indices, then the column indices.
    pub fn encode(&self) -> (Vec<i64>, Vec<f32>) {
        let (r, c) = (&self.rows, &self.cols);
        let mut p = vec![
            self.planes,
            r.n_in,
            c.n_in,
            r.n_out,
            c.n_out,
            r.taps,
            c.taps,
            r.kind as i64,
            c.kind as i64,
        ];
        p.extend_from_slice(&r.index);
        p.extend_from_slice(&c.index);
        let mut f = vec![self.extrapolation];
        f.extend_from_slice(&r.weight);
        f.extend_from_slice(&c.weight);
        (p, f)
    }

    /// Floats of scratch the kernel needs: one combined input row.
    pub fn scratch_floats(&self) -> usize {
        self.cols.n_in as usize
    }
}

/// Resizes `planes` float planes of `x` into `y` (see the module docs).
///
/// # Safety
/// `params`/`floats` encode a geometry as [`ResizeGeometry::encode`] does (indices within
/// their axes); `x` holds `planes·h_in·w_in` floats, `y` `planes·h_out·w_out`, `scratch`
/// `w_in`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_resize_f32(
    params: *const i64,
    floats: *const f32,
    x: *const f32,
    y: *mut f32,
    scratch: *mut f32,
) {
    // SAFETY: the header is 9 values; the tables follow, sized by it (caller's contract).
    let (x, y, row, dims, rows, cols, extrapolation) = unsafe {
        let h = std::slice::from_raw_parts(params, HEADER);
        let [planes, h_in, w_in, h_out, w_out, th, tw, kh, kw] =
            [h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8]].map(|v| v as usize);
        // The identity has no tables.
        let lh = if kh == TapKind::Identity as usize {
            0
        } else {
            h_out * th
        };
        let lw = if kw == TapKind::Identity as usize {
            0
        } else {
            w_out * tw
        };
        let ih = std::slice::from_raw_parts(params.add(HEADER), lh);
        let iw = std::slice::from_raw_parts(params.add(HEADER + lh), lw);
        let extrapolation = *floats;
        let wh = std::slice::from_raw_parts(floats.add(1), lh);
        let ww = std::slice::from_raw_parts(floats.add(1 + lh), lw);
        let x = std::slice::from_raw_parts(x, planes * h_in * w_in);
        let y = std::slice::from_raw_parts_mut(y, planes * h_out * w_out);
        let row = std::slice::from_raw_parts_mut(scratch, w_in);
        let rows = Taps {
            kind: kh,
            taps: th,
            index: ih,
            weight: wh,
        };
        let cols = Taps {
            kind: kw,
            taps: tw,
            index: iw,
            weight: ww,
        };
        (
            x,
            y,
            row,
            (h_in, w_in, h_out, w_out),
            rows,
            cols,
            extrapolation,
        )
    };
    crate::multiversion!(resize(x, y, row, dims, &rows, &cols, extrapolation));
}

struct Taps<'a> {
    kind: usize,
    taps: usize,
    index: &'a [i64],
    weight: &'a [f32],
}

#[inline(always)]
fn resize(
    x: &[f32],
    y: &mut [f32],
    row: &mut [f32],
    (h_in, w_in, h_out, w_out): (usize, usize, usize, usize),
    rows: &Taps,
    cols: &Taps,
    extrapolation: f32,
) {
    if h_out == 0 || w_out == 0 || w_in == 0 || h_in == 0 {
        return;
    }
    let row_identity = rows.kind == TapKind::Identity as usize;
    // Columns that repeat each input k times (nearest upsampling by an integer factor).
    let repeat = if cols.kind == TapKind::Gather as usize && cols.taps == 1 {
        (2..=4).find(|&k| {
            cols.index
                .iter()
                .enumerate()
                .all(|(o, &i)| i == (o / k) as i64)
        })
    } else {
        None
    };
    for (plane, out_plane) in x
        .chunks_exact(h_in * w_in)
        .zip(y.chunks_exact_mut(h_out * w_out))
    {
        for o in 0..h_out {
            let t0 = o * rows.taps;
            let first = if row_identity {
                o as i64
            } else {
                rows.index[t0]
            };
            // An output row that reads the same single input row as the one before it (nearest
            // upsampling) is a copy of that output row.
            if o > 0 && rows.kind == TapKind::Gather as usize && first == rows.index[t0 - 1] {
                let (done, rest) = out_plane.split_at_mut(o * w_out);
                rest[..w_out].copy_from_slice(&done[(o - 1) * w_out..]);
                continue;
            }
            let out = &mut out_plane[o * w_out..(o + 1) * w_out];
            let src: &[f32] = if first < 0 {
                row.fill(extrapolation);
                row
            } else if rows.kind != TapKind::Weighted as usize {
                let r = first as usize;
                &plane[r * w_in..(r + 1) * w_in]
            } else {
                combine_rows(
                    plane,
                    w_in,
                    &rows.index[t0..t0 + rows.taps],
                    &rows.weight[t0..t0 + rows.taps],
                    row,
                );
                row
            };
            match (cols.kind, cols.taps) {
                (k, _) if k == TapKind::Identity as usize => out.copy_from_slice(src),
                _ if repeat == Some(2) => repeat_cols::<2>(src, out),
                _ if repeat == Some(3) => repeat_cols::<3>(src, out),
                _ if repeat == Some(4) => repeat_cols::<4>(src, out),
                (k, 1) if k == TapKind::Gather as usize => {
                    for (v, &i) in out.iter_mut().zip(cols.index) {
                        *v = if i < 0 {
                            extrapolation
                        } else {
                            src[i as usize]
                        };
                    }
                }
                (_, 1) => combine_cols::<1>(src, cols, extrapolation, out),
                (_, 2) => combine_cols::<2>(src, cols, extrapolation, out),
                (_, 4) => combine_cols::<4>(src, cols, extrapolation, out),
                _ => {
                    for (c, v) in out.iter_mut().enumerate() {
                        let t = c * cols.taps;
                        let ix = &cols.index[t..t + cols.taps];
                        *v = if ix[0] < 0 {
                            extrapolation
                        } else {
                            ix.iter()
                                .zip(&cols.weight[t..t + cols.taps])
                                .fold(0.0, |s, (&i, &w)| s + w * src[i as usize])
                        };
                    }
                }
            }
        }
    }
}

/// `row = Σ_t weight[t] · plane[index[t]]` (rows of `w` floats).
#[inline(always)]
fn combine_rows(plane: &[f32], w: usize, index: &[i64], weight: &[f32], row: &mut [f32]) {
    let r0 = &plane[index[0] as usize * w..][..w];
    let w0 = weight[0];
    for (o, &v) in row.iter_mut().zip(r0) {
        *o = w0 * v;
    }
    for (&i, &wt) in index.iter().zip(weight).skip(1) {
        let r = &plane[i as usize * w..][..w];
        for (o, &v) in row.iter_mut().zip(r) {
            *o += wt * v;
        }
    }
}

/// `out[o] = src[o / K]`.
#[inline(always)]
fn repeat_cols<const K: usize>(src: &[f32], out: &mut [f32]) {
    let whole = out.len() / K;
    let (body, rest) = out.split_at_mut(whole * K);
    for (c, &v) in body.chunks_exact_mut(K).zip(src) {
        c.copy_from_slice(&[v; K]);
    }
    if !rest.is_empty() {
        rest.fill(src[whole]);
    }
}

#[inline(always)]
fn combine_cols<const T: usize>(src: &[f32], cols: &Taps, extrapolation: f32, out: &mut [f32]) {
    for ((v, ix), wt) in out
        .iter_mut()
        .zip(cols.index.chunks_exact(T))
        .zip(cols.weight.chunks_exact(T))
    {
        *v = if ix[0] < 0 {
            extrapolation
        } else {
            let mut s = 0.0;
            for t in 0..T {
                s += wt[t] * src[ix[t] as usize];
            }
            s
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same resize, one output at a time.
    fn naive(g: &ResizeGeometry, x: &[f32]) -> Vec<f32> {
        let tables = |a: &AxisTaps| match a.kind {
            TapKind::Identity => AxisTaps {
                index: (0..a.n_out).collect(),
                weight: vec![1.0; a.n_out as usize],
                ..a.clone()
            },
            _ => a.clone(),
        };
        let (r, c) = (&tables(&g.rows), &tables(&g.cols));
        let (hi, wi, ho, wo) = (
            r.n_in as usize,
            c.n_in as usize,
            r.n_out as usize,
            c.n_out as usize,
        );
        let mut y = vec![0f32; g.planes as usize * ho * wo];
        for p in 0..g.planes as usize {
            for oy in 0..ho {
                for ox in 0..wo {
                    let mut s = 0.0f32;
                    for tx in 0..c.taps as usize {
                        let ix = c.index[ox * c.taps as usize + tx];
                        let mut col = 0.0f32;
                        for ty in 0..r.taps as usize {
                            let iy = r.index[oy * r.taps as usize + ty];
                            col += if iy < 0 {
                                if ty == 0 { g.extrapolation } else { 0.0 }
                            } else {
                                r.weight[oy * r.taps as usize + ty]
                                    * x[(p * hi + iy as usize) * wi + ix.max(0) as usize]
                            };
                        }
                        s += if ix < 0 {
                            0.0
                        } else {
                            c.weight[ox * c.taps as usize + tx] * col
                        };
                    }
                    let extrap = c.index[ox * c.taps as usize] < 0;
                    y[(p * ho + oy) * wo + ox] = if extrap { g.extrapolation } else { s };
                }
            }
        }
        y
    }

    fn run(g: &ResizeGeometry, x: &[f32]) -> Vec<f32> {
        let (p, f) = g.encode();
        let mut y = vec![f32::NAN; (g.planes * g.rows.n_out * g.cols.n_out) as usize];
        let mut scratch = vec![0f32; g.scratch_floats()];
        // SAFETY: sizes as documented.
        unsafe {
            onnxc_resize_f32(
                p.as_ptr(),
                f.as_ptr(),
                x.as_ptr(),
                y.as_mut_ptr(),
                scratch.as_mut_ptr(),
            )
        };
        y
    }

    fn linear(n_in: i64, n_out: i64, extrap_first: bool) -> AxisTaps {
        let mut index = Vec::new();
        let mut weight = Vec::new();
        for o in 0..n_out {
            if extrap_first && o == 0 {
                index.extend([-1, -1]);
                weight.extend([0.0, 0.0]);
                continue;
            }
            let xo = ((o as f64 + 0.5) * n_in as f64 / n_out as f64 - 0.5).max(0.0);
            let i0 = (xo.floor() as i64).min(n_in - 1);
            let r = (xo - i0 as f64) as f32;
            index.extend([i0, (i0 + 1).min(n_in - 1)]);
            weight.extend([1.0 - r, r]);
        }
        AxisTaps::new(n_in, n_out, 2, index, weight).unwrap()
    }

    #[test]
    fn every_tap_kind_matches_the_naive_resize() {
        let x: Vec<f32> = (0..3 * 5 * 7)
            .map(|i| ((i * 37) % 23) as f32 - 11.0)
            .collect();
        let nearest = |n_in: i64, n_out: i64| {
            AxisTaps::new(
                n_in,
                n_out,
                1,
                (0..n_out).map(|o| o * n_in / n_out).collect(),
                vec![1.0; n_out as usize],
            )
            .unwrap()
        };
        let cubic = {
            let (n_in, n_out) = (7i64, 4i64);
            let index = (0..n_out)
                .flat_map(|o| (0..4).map(move |t| (o + t).min(n_in - 1)))
                .collect();
            let weight = (0..n_out)
                .flat_map(|o| [-0.1, 0.6, 0.6 - 0.01 * o as f32, -0.1])
                .collect();
            AxisTaps::new(n_in, n_out, 4, index, weight).unwrap()
        };
        let three = AxisTaps::new(
            7,
            2,
            3,
            vec![0, 1, 2, 4, 5, 6],
            vec![0.2, 0.5, 0.3, 0.3, 0.4, 0.3],
        )
        .unwrap();
        assert_eq!(nearest(5, 5).kind, TapKind::Identity);
        assert_eq!(nearest(5, 10).kind, TapKind::Gather);
        assert_eq!(cubic.kind, TapKind::Weighted);
        let cases = [
            (nearest(5, 10), nearest(7, 14)),
            (linear(5, 9, false), linear(7, 3, false)),
            (linear(5, 9, true), linear(7, 11, true)),
            (AxisTaps::identity(5), cubic.clone()),
            (linear(5, 2, false), AxisTaps::identity(7)),
            (nearest(5, 3), three),
            (nearest(5, 15), nearest(7, 14)),
            (nearest(5, 10), nearest(7, 21)),
            (nearest(5, 11), nearest(7, 27)),
            (linear(5, 9, false), nearest(7, 28)),
        ];
        for (rows, cols) in cases {
            let g = ResizeGeometry {
                planes: 3,
                rows,
                cols,
                extrapolation: -7.5,
            };
            let (got, want) = (run(&g, &x), naive(&g, &x));
            for (a, b) in got.iter().zip(&want) {
                assert!(
                    (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                    "{g:?}: {got:?} vs {want:?}"
                );
            }
        }
    }

    #[test]
    fn inconsistent_tables_are_rejected() {
        assert!(AxisTaps::new(4, 2, 1, vec![0, 4], vec![1.0, 1.0]).is_none());
        assert!(AxisTaps::new(4, 2, 2, vec![0, -1, 1, 2], vec![1.0; 4]).is_none());
        assert!(AxisTaps::new(4, 2, 1, vec![0], vec![1.0]).is_none());
        assert!(AxisTaps::new(4, 2, 0, vec![], vec![]).is_none());
    }
}
