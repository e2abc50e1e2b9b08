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

use crate::abi::ONNXC_OK;
use crate::kernels::Status;
use crate::params;

mod int8;
mod taps;

pub use int8::onnxc_resize_8;

pub use taps::{Coord, Filter, Nearest, RULE_WORDS, Rule, Scale, Weight};

/// How one axis's taps apply.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TapKind {
    /// Each output combines `taps` inputs with weights.
    Weighted = 0,
    /// Each output is one input (weight 1) or extrapolated.
    Gather = 1,
    /// Output `i` is input `i`.
    Identity = 2,
    /// Tables the kernel computes from the axis's lengths by a `Rule` (a model whose lengths
    /// are taken at run time).
    Computed = 3,
}

/// One axis's taps: for output `o`, inputs `index[o·taps + t]` (in `[0, n_in)`, or -1 for
/// an extrapolated output: then every tap of `o` is -1) weighted by `weight[o·taps + t]`.
/// The identity has no tables (`index` and `weight` empty), nor has an axis whose tables
/// the kernel computes (`rule`).
#[derive(Clone, Debug, PartialEq)]
pub struct AxisTaps {
    pub kind: TapKind,
    pub n_in: i64,
    pub n_out: i64,
    pub taps: i64,
    pub index: Vec<i64>,
    pub weight: Vec<f32>,
    /// How the kernel computes the tables (`TapKind::Computed`).
    pub rule: Option<Rule>,
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
            rule: None,
        }
    }

    /// An axis from `n_in` to `n_out` whose tables the kernel computes by `rule`; `None`
    /// when they would be empty or too large.
    pub fn computed(n_in: i64, n_out: i64, rule: Rule) -> Option<AxisTaps> {
        if n_in < 1 || n_out < 1 {
            return None;
        }
        let taps = rule.taps(n_in as usize, n_out as usize) as i64;
        if taps < 1 || n_out.checked_mul(taps)? > params::MAX_EXTENT {
            return None;
        }
        Some(AxisTaps {
            kind: TapKind::Computed,
            n_in,
            n_out,
            taps,
            index: Vec::new(),
            weight: Vec::new(),
            rule: Some(rule),
        })
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
            rule: None,
        })
    }

    /// Entries of the tables the kernel computes (none unless `Computed`).
    fn computed_len(&self) -> usize {
        match self.kind {
            TapKind::Computed => (self.n_out * self.taps) as usize,
            _ => 0,
        }
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

impl ResizeGeometry {
    /// The kernel's integer parameters, a sealed blob (`params::seal`): `[len, planes, h_in,
    /// w_in, h_out, w_out, taps_h, taps_w, kind_h, kind_w]`, then the rows' indices (or, for
    /// computed taps, their rule: `Rule::encode`), then the columns'; and its floats: the
    /// extrapolation value, the row weights, the column weights (none for computed taps).
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
        for a in [r, c] {
            match a.rule {
                Some(rule) => p.extend_from_slice(&rule.encode()),
                None => p.extend_from_slice(&a.index),
            }
        }
        let mut f = vec![self.extrapolation];
        f.extend_from_slice(&r.weight);
        f.extend_from_slice(&c.weight);
        (params::seal(p), f)
    }

    /// Floats of scratch the kernel needs (`scratch_floats`).
    pub fn scratch_floats(&self) -> usize {
        scratch_floats(
            self.cols.n_in as usize,
            self.rows.computed_len() + self.cols.computed_len(),
        )
    }
}

/// Floats of scratch for a resize of rows of `w_in` floats whose computed tables have
/// `computed` entries: the indices (two floats each, after one float of slack to align
/// them), the weights, one combined input row.
fn scratch_floats(w_in: usize, computed: usize) -> usize {
    let tables = if computed == 0 { 0 } else { 1 + 3 * computed };
    tables + w_in
}

/// One axis of a decoded parameter blob: how its taps apply, its extents, taps per output,
/// and the index table borrowed from the blob (empty for the identity and for computed
/// tables, whose rule it has).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AxisParams<'a> {
    pub kind: TapKind,
    pub n_in: usize,
    pub n_out: usize,
    pub taps: usize,
    pub index: &'a [i64],
    pub rule: Option<Rule>,
}

impl AxisParams<'_> {
    /// Entries of the tables the kernel computes (none unless `Computed`).
    fn computed_len(&self) -> usize {
        match self.kind {
            TapKind::Computed => self.n_out * self.taps,
            _ => 0,
        }
    }

    /// Entries of its weight table in the kernel's float array.
    fn floats_len(&self) -> usize {
        match self.kind {
            TapKind::Computed => 0,
            _ => self.index.len(),
        }
    }
}

/// `onnxc_resize_f32`'s integer parameters (`ResizeGeometry::encode`), decoded and validated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ResizeParams<'a> {
    pub planes: usize,
    pub rows: AxisParams<'a>,
    pub cols: AxisParams<'a>,
}

impl<'a> ResizeParams<'a> {
    /// Decodes and checks `blob`: counts in range, a known kind per axis (the identity with
    /// one tap and as many outputs as inputs, a gather with one tap, computed taps with a
    /// valid rule giving the blob's taps), index tables of `n_out · taps` entries, each in
    /// `[-1, n_in)` with an output's taps all -1 or none, planes whose sizes fit in memory. Walks the index tables (O(h_out·taps_h +
    /// w_out·taps_w)), which the kernel reads for every plane anyway.
    pub fn decode(blob: &'a [i64]) -> params::Result<ResizeParams<'a>> {
        use params::{MAX_EXTENT, ensure, in_range, product};
        let mut r = params::Reader::new(blob)?;
        let [planes, h_in, w_in, h_out, w_out, th, tw, kh, kw] = r.array()?;
        in_range(planes, 0, params::MAX_WORDS, "plane count out of range")?;
        for v in [h_in, w_in, h_out, w_out] {
            in_range(v, 0, MAX_EXTENT, "an extent is out of range")?;
        }
        let too_big = "a tensor is too large";
        product([planes, h_in, w_in], too_big)?;
        product([planes, h_out, w_out], too_big)?;
        let mut axis = |n_in: i64, n_out: i64, taps: i64, kind: i64| {
            in_range(taps, 1, MAX_EXTENT, "taps out of range")?;
            let kind = match kind {
                0 => TapKind::Weighted,
                1 => TapKind::Gather,
                2 => TapKind::Identity,
                3 => TapKind::Computed,
                _ => return Err(params::ParamError("unknown tap kind")),
            };
            let len = match kind {
                TapKind::Identity => {
                    ensure(taps == 1 && n_in == n_out, "an identity that is not one")?;
                    0
                }
                TapKind::Gather => {
                    ensure(taps == 1, "a gather of several taps")?;
                    n_out
                }
                TapKind::Weighted => product([n_out, taps], too_big)?,
                TapKind::Computed => {
                    let rule = Rule::decode(r.words(RULE_WORDS)?)?;
                    ensure(n_in > 0 || n_out == 0, "computed taps of an empty axis")?;
                    if n_in > 0 {
                        let want = rule.taps(n_in as usize, n_out as usize);
                        ensure(want as i64 == taps, "taps that are not the rule's")?;
                    }
                    product([n_out, taps], too_big)?;
                    return Ok(AxisParams {
                        kind,
                        n_in: n_in as usize,
                        n_out: n_out as usize,
                        taps: taps as usize,
                        index: &[],
                        rule: Some(rule),
                    });
                }
            };
            let index = r.words(len as usize)?;
            for out in index.chunks(taps as usize) {
                let outside = out[0] == -1;
                ensure(
                    out.iter()
                        .all(|&i| (-1..n_in).contains(&i) && (i == -1) == outside),
                    "an index is out of range",
                )?;
            }
            Ok(AxisParams {
                kind,
                n_in: n_in as usize,
                n_out: n_out as usize,
                taps: taps as usize,
                index,
                rule: None,
            })
        };
        let rows = axis(h_in, h_out, th, kh)?;
        let cols = axis(w_in, w_out, tw, kw)?;
        r.finish()?;
        Ok(ResizeParams {
            planes: planes as usize,
            rows,
            cols,
        })
    }

    /// Floats of the kernel's float array: the extrapolation value and the weights.
    pub fn floats_len(&self) -> usize {
        1 + self.rows.floats_len() + self.cols.floats_len()
    }

    /// Floats of scratch the kernel needs (`ResizeGeometry::scratch_floats`).
    pub fn scratch_floats(&self) -> usize {
        scratch_floats(
            self.cols.n_in,
            self.rows.computed_len() + self.cols.computed_len(),
        )
    }
}

/// Resizes `planes` float planes of `x` into `y` (see the module docs). Returns
/// `ONNXC_ERR_PARAMS`, touching nothing, when `params` is not a valid blob
/// (`ResizeParams::decode`).
///
/// # Safety
/// `params` points to a sealed blob (`params::blob`) and `floats` to the float array
/// [`ResizeGeometry::encode`] made with it; `x` holds `planes·h_in·w_in` floats, `y`
/// `planes·h_out·w_out`, `scratch` `w_in`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_resize_f32(
    params: *const i64,
    floats: *const f32,
    x: *const f32,
    y: *mut f32,
    scratch: *mut f32,
) -> Status {
    let p = params::decode_blob!(params, ResizeParams::decode);
    let (r, c) = (p.rows, p.cols);
    let (lh, lw) = (r.computed_len(), c.computed_len());
    // SAFETY: the float array and the buffers hold what the validated parameters describe
    // (the caller's contract): scratch `scratch_floats()` floats, computed tables first (the
    // indices 8-byte aligned within its slack float), then the combined row.
    let (x, y, row, extrapolation, wh, ww, computed) = unsafe {
        let (fh, fw) = (r.floats_len(), c.floats_len());
        let mut tables = scratch;
        let mut computed = None;
        if lh + lw > 0 {
            let skip = scratch.align_offset(2).min(1);
            let index = scratch.add(skip) as *mut i64;
            let weight = scratch.add(1 + 2 * (lh + lw));
            computed = Some((
                std::slice::from_raw_parts_mut(index, lh + lw),
                std::slice::from_raw_parts_mut(weight, lh + lw),
            ));
            tables = weight.add(lh + lw);
        }
        (
            std::slice::from_raw_parts(x, p.planes * r.n_in * c.n_in),
            std::slice::from_raw_parts_mut(y, p.planes * r.n_out * c.n_out),
            std::slice::from_raw_parts_mut(tables, c.n_in),
            *floats,
            std::slice::from_raw_parts(floats.add(1), fh),
            std::slice::from_raw_parts(floats.add(1 + fh), fw),
            computed,
        )
    };
    let (rows, cols) = match computed {
        None => (Taps::of(&r, r.index, wh), Taps::of(&c, c.index, ww)),
        Some((index, weight)) => {
            let (ih, iw) = index.split_at_mut(lh);
            let (wth, wtw) = weight.split_at_mut(lh);
            for (a, i, w) in [(&r, &mut *ih, &mut *wth), (&c, &mut *iw, &mut *wtw)] {
                if let Some(rule) = a.rule {
                    rule.fill(a.n_in, a.n_out, i, w);
                }
            }
            (
                Taps::computed(&r, ih, wth, r.index, wh),
                Taps::computed(&c, iw, wtw, c.index, ww),
            )
        }
    };
    let dims = (r.n_in, c.n_in, r.n_out, c.n_out);
    crate::multiversion!(resize(x, y, row, dims, &rows, &cols, extrapolation));
    ONNXC_OK
}

struct Taps<'a> {
    kind: usize,
    taps: usize,
    index: &'a [i64],
    weight: &'a [f32],
}

impl<'a> Taps<'a> {
    /// Axis `a`'s taps from the blob's index table and the float array's weights.
    fn of(a: &AxisParams, index: &'a [i64], weight: &'a [f32]) -> Taps<'a> {
        Taps {
            kind: a.kind as usize,
            taps: a.taps,
            index,
            weight,
        }
    }

    /// As `of`, but a computed axis takes the tables the kernel computed (`computed` and
    /// `computed_weight`): a nearest rule's are a gather, the others weighted.
    fn computed(
        a: &AxisParams,
        computed: &'a [i64],
        computed_weight: &'a [f32],
        index: &'a [i64],
        weight: &'a [f32],
    ) -> Taps<'a> {
        let Some(rule) = a.rule else {
            return Taps::of(a, index, weight);
        };
        let kind = match rule.filter {
            Filter::Nearest(_) => TapKind::Gather,
            _ => TapKind::Weighted,
        };
        Taps {
            kind: kind as usize,
            taps: a.taps,
            index: computed,
            weight: computed_weight,
        }
    }
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
        // SAFETY: p is a sealed blob and f its floats; sizes as documented.
        let status = unsafe {
            onnxc_resize_f32(
                p.as_ptr(),
                f.as_ptr(),
                x.as_ptr(),
                y.as_mut_ptr(),
                scratch.as_mut_ptr(),
            )
        };
        assert_eq!(status, ONNXC_OK);
        let d = ResizeParams::decode(&p).unwrap();
        assert_eq!(
            (d.floats_len(), d.scratch_floats()),
            (f.len(), g.scratch_floats())
        );
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

    /// Axes whose tables the kernel computes resize as the same tables given in the blob.
    #[test]
    fn computed_taps_match_the_given_tables() {
        let x: Vec<f32> = (0..2 * 6 * 9)
            .map(|i| ((i * 29) % 31) as f32 - 15.0)
            .collect();
        let rule = |filter, coord, scale| Rule {
            filter,
            coord,
            exclude_outside: false,
            antialias: false,
            scale,
        };
        let tables = |a: &AxisTaps| {
            let rule = a.rule.unwrap();
            let len = a.computed_len();
            let (mut index, mut weight) = (vec![0; len], vec![0.0; len]);
            rule.fill(a.n_in as usize, a.n_out as usize, &mut index, &mut weight);
            AxisTaps::new(a.n_in, a.n_out, a.taps, index, weight).unwrap()
        };
        let near = Filter::Nearest(Nearest::Floor);
        let cases = [
            (
                rule(near, Coord::Asymmetric, Scale::Given(2.0)),
                rule(near, Coord::Asymmetric, Scale::Given(2.0)),
            ),
            (
                rule(Filter::Linear, Coord::HalfPixel, Scale::Sizes),
                rule(Filter::Cubic(-0.75), Coord::AlignCorners, Scale::Sizes),
            ),
            (
                rule(Filter::Linear, Coord::PytorchHalfPixel, Scale::Given(0.5)),
                Rule {
                    antialias: true,
                    exclude_outside: true,
                    ..rule(Filter::Linear, Coord::HalfPixel, Scale::Given(0.45))
                },
            ),
        ];
        for (rh, rw) in cases {
            let n_out = |r: &Rule, n: i64| match r.scale {
                Scale::Given(s) => (s * n as f64).floor() as i64,
                Scale::Sizes => 2 * n - 1,
            };
            let computed = ResizeGeometry {
                planes: 2,
                rows: AxisTaps::computed(6, n_out(&rh, 6), rh).unwrap(),
                cols: AxisTaps::computed(9, n_out(&rw, 9), rw).unwrap(),
                extrapolation: 0.0,
            };
            let given = ResizeGeometry {
                rows: tables(&computed.rows),
                cols: tables(&computed.cols),
                ..computed.clone()
            };
            assert_eq!(run(&computed, &x), run(&given, &x), "{computed:?}");
        }
    }

    #[test]
    fn inconsistent_tables_are_rejected() {
        assert!(AxisTaps::new(4, 2, 1, vec![0, 4], vec![1.0, 1.0]).is_none());
        assert!(AxisTaps::new(4, 2, 2, vec![0, -1, 1, 2], vec![1.0; 4]).is_none());
        assert!(AxisTaps::new(4, 2, 1, vec![0], vec![1.0]).is_none());
        assert!(AxisTaps::new(4, 2, 0, vec![], vec![]).is_none());
    }

    /// Corrupt rules of computed taps are refused.
    #[test]
    fn refuses_corrupt_rules() {
        let rule = Rule {
            filter: Filter::Cubic(-0.5),
            coord: Coord::HalfPixel,
            exclude_outside: false,
            antialias: true,
            scale: Scale::Given(0.5),
        };
        let g = ResizeGeometry {
            planes: 1,
            rows: AxisTaps::identity(3),
            cols: AxisTaps::computed(8, 4, rule).unwrap(),
            extrapolation: 0.0,
        };
        let (good, _) = g.encode();
        let d = ResizeParams::decode(&good).unwrap();
        assert_eq!((d.cols.taps, d.cols.rule), (8, Some(rule)));
        let with = |k: usize, v: i64| params::with_word(&good, k, v);
        let bits = |v: f64| v.to_bits() as i64;
        // Body: the 9 words, then the columns' rule (the rows have no table).
        let bad = [
            with(6, 4),
            with(9, 3),
            with(9 + 1, bits(f64::NAN)),
            with(9 + 2, 6),
            with(9 + 3, 2),
            with(9 + 4, -1),
            with(9 + 5, 2),
            with(9 + 6, bits(0.0)),
            with(9 + 6, bits(f64::INFINITY)),
            with(9 + 6, bits(-0.5)),
            with(9, 0),
        ];
        for (i, b) in bad.iter().enumerate() {
            assert!(ResizeParams::decode(b).is_err(), "case {i}");
        }
    }

    /// Corrupt blobs are refused by `decode` and by the entry point, which then writes
    /// nothing.
    #[test]
    fn refuses_corrupt_blobs() {
        let g = ResizeGeometry {
            planes: 2,
            rows: linear(3, 5, true),
            cols: AxisTaps::identity(4),
            extrapolation: 0.0,
        };
        let (good, f) = g.encode();
        assert!(ResizeParams::decode(&good).is_ok());
        let with = |k: usize, v: i64| params::with_word(&good, k, v);
        // Body: planes, h_in, w_in, h_out, w_out, taps_h, taps_w, kind_h, kind_w, then the
        // 5 × 2 row indices (the first output extrapolated).
        let bad = [
            params::short_blob(&good),
            params::long_blob(&good),
            with(0, -1),
            with(1, 0),
            with(2, 5),
            with(3, 4),
            with(3, 1 << 40),
            with(5, 0),
            with(6, 2),
            with(7, 3),
            with(8, 0),
            with(9 + 2, 3),
            with(9 + 3, -2),
            with(9 + 1, 0),
            with(9 + 2, -1),
        ];
        for (i, b) in bad.iter().enumerate() {
            assert!(ResizeParams::decode(b).is_err(), "case {i}");
        }
        let x = [1f32; 2 * 3 * 4];
        let mut y = [3f32; 2 * 5 * 4];
        let mut scratch = [0f32; 64];
        for b in &bad {
            // SAFETY: b is a sealed blob; the buffers are never touched (the blob is refused).
            let status = unsafe {
                onnxc_resize_f32(
                    b.as_ptr(),
                    f.as_ptr(),
                    x.as_ptr(),
                    y.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                )
            };
            assert_eq!(status, crate::abi::ONNXC_ERR_PARAMS);
        }
        assert!(y.iter().all(|&v| v == 3.0), "the output was written");
    }
}
