//! RoiAlign (ONNX opsets 10, 16, 22), float32: for each region of interest `(x1, y1, x2,
//! y2)·spatial_scale` of an image of `x [n, c, h, w]`, an `oh × ow` grid of bins, each the
//! average (or the peculiar maximum below) of a grid of bilinearly interpolated samples —
//! onnx's reference evaluator (`op_roi_align.py`, after onnxruntime's CPU kernel) in its
//! float32 arithmetic and order of operations, so with its bits (under numpy 2):
//!
//! - coordinates: `start = x1·scale − offset`, `end = x2·scale − offset` with `offset` 0.5
//!   (`half_pixel`) or 0 (`output_half_pixel`, opset 10's only mode, where an extent below
//!   1 becomes 1); a bin is `extent / oh` (`/ ow`) long;
//! - samples: `sampling_ratio²` per bin, or adaptively `⌈bin⌉` per axis (about one per input
//!   pixel), at `start + p·bin + (i + 0.5)·bin / grid`;
//! - a sample outside `[−1, h] × [−1, w]` reads nothing: its four weights are 0 at position
//!   0 (so it contributes `0·x[0]`, which is NaN when that pixel is not finite, as in the
//!   reference); inside, it is clamped into the map and interpolated between its four
//!   neighbours with weights `hy·hx, hy·lx, ly·hx, ly·lx`;
//! - `avg`: the sum of the samples `w1·x1 + w2·x2 + w3·x3 + w4·x4`, divided by the sample
//!   count; `max`: the maximum over samples of the largest *weighted corner* `wi·xi` (not
//!   of the interpolated value), the first of equal values kept (`v > m` replaces `m`).
//!   A bin without samples is 0.
//!
//! Hostile data: a batch index outside `[0, n)` makes that roi's outputs zero and the call
//! return `ONNXC_ERR_INDEX`. A NaN sample coordinate counts as outside the map (the
//! reference fails on it), a NaN adaptive grid as empty. Every read is bounds-checked, and
//! the adaptive grid is capped (`RoiAlignParams::max_grid`), so no coordinate makes a call
//! take longer than a roi `GRID_MARGIN` times the map's size.
//!
//! The (roi, channel) planes of the output are split over the run's threads; a task takes
//! its channels of a roi in blocks of `BLOCK`, computing each sample's taps once for the
//! block. Every output is one plane's fold in sample order, so results are bit-identical
//! for any worker count.

use crate::abi::{ONNXC_ERR_INDEX, ONNXC_ERR_PARAMS, ONNXC_OK, elements, elements_mut};
use crate::kernels::Status;
use crate::par::{Par, Threads};
use crate::params;

/// Words of `onnxc_roi_align_f32`'s parameters (its blob's body).
pub const PARAMS: usize = 10;

/// The adaptive grid is exact for rois up to `GRID_MARGIN · (h + 1)` pixels tall (and
/// `· (w + 1)` wide): see `RoiAlignParams::max_grid`.
pub const GRID_MARGIN: usize = 4;

/// Channels whose samples a task computes together.
const BLOCK: usize = 8;

/// `onnxc_roi_align_f32`'s parameters, decoded and validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoiAlignParams {
    /// Images of `x [n, c, h, w]`.
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    /// Regions of interest: `rois [r, 4]`, `batch [r]`, `y [r, c, oh, ow]`.
    pub r: usize,
    /// `output_height`, `output_width`.
    pub oh: usize,
    pub ow: usize,
    /// Samples per bin and axis; 0: adaptive, `⌈bin⌉` capped by `max_grid`.
    pub sampling_ratio: usize,
    /// `mode` `"max"` (else `"avg"`).
    pub max: bool,
    /// `coordinate_transformation_mode` `"half_pixel"` (else `"output_half_pixel"`).
    pub half_pixel: bool,
}

impl RoiAlignParams {
    /// The sealed blob (`params::seal`) of `[n, c, h, w, r, oh, ow, sampling_ratio, max,
    /// half_pixel]`.
    pub fn encode(&self) -> Vec<i64> {
        params::seal([
            self.n as i64,
            self.c as i64,
            self.h as i64,
            self.w as i64,
            self.r as i64,
            self.oh as i64,
            self.ow as i64,
            self.sampling_ratio as i64,
            self.max as i64,
            self.half_pixel as i64,
        ])
    }

    /// Decodes and checks `blob`: `n`, `c` and `r` not negative, the map and output extents
    /// in `1..=MAX_EXTENT`, `sampling_ratio` in `0..=MAX_EXTENT`, flags 0 or 1, and every
    /// tensor of a size that fits in memory.
    pub fn decode(blob: &[i64]) -> params::Result<RoiAlignParams> {
        use params::{MAX_EXTENT, flag, in_range, product};
        let mut rd = params::Reader::new(blob)?;
        let [n, c, h, w, r, oh, ow, ratio, max, half_pixel] = rd.array()?;
        rd.finish()?;
        for v in [n, c, r] {
            in_range(v, 0, params::MAX_WORDS, "a count is out of range")?;
        }
        for v in [h, w, oh, ow] {
            in_range(v, 1, MAX_EXTENT, "a spatial extent is out of range")?;
        }
        in_range(ratio, 0, MAX_EXTENT, "sampling_ratio is out of range")?;
        let too_big = "a tensor is too large";
        product([n, c, h, w, 4], too_big)?;
        product([r, c, oh, ow, 4], too_big)?;
        product([r, 4, 4], too_big)?;
        Ok(RoiAlignParams {
            n: n as usize,
            c: c as usize,
            h: h as usize,
            w: w as usize,
            r: r as usize,
            oh: oh as usize,
            ow: ow as usize,
            sampling_ratio: ratio as usize,
            max: flag(max, "max is not 0 or 1")?,
            half_pixel: flag(half_pixel, "half_pixel is not 0 or 1")?,
        })
    }

    /// Floats of `x`.
    pub fn x_len(&self) -> usize {
        self.n * self.c * self.h * self.w
    }

    /// Floats of `y`.
    pub fn y_len(&self) -> usize {
        self.r * self.c * self.oh * self.ow
    }

    /// The most adaptive samples per bin along an axis of `extent` input pixels split into
    /// `bins` bins: `⌈GRID_MARGIN · (extent + 1) / bins⌉`.
    ///
    /// Uncapped, the count is `⌈roi / bins⌉` for a roi `roi` pixels long: unbounded for
    /// huge, infinite or NaN coordinates, and the samples are about a pixel apart whatever
    /// it is. A roi inside the map — the region samples read, `[−1, extent]` — is at most
    /// `extent + 1` long, so the cap keeps the reference's count (and results) for every
    /// roi up to `GRID_MARGIN` times that, three quarters of whose samples would fall
    /// outside the map; only longer rois get fewer, more widely spaced samples per bin
    /// (their sample count still divides the average). A call then costs at most
    /// `(GRID_MARGIN·(h + 1) + oh) · (GRID_MARGIN·(w + 1) + ow)` samples per plane, a
    /// `GRID_MARGIN²` multiple of a roi covering the map.
    pub fn max_grid(extent: usize, bins: usize) -> usize {
        (GRID_MARGIN * (extent + 1)).div_ceil(bins)
    }

    /// The sampling geometry of `roi` (`[x1, y1, x2, y2]`).
    fn roi(&self, spatial_scale: f32, roi: &[f32]) -> Roi {
        let offset = if self.half_pixel { 0.5 } else { 0.0 };
        let [x1, y1, x2, y2] = [0, 1, 2, 3].map(|i| roi[i] * spatial_scale - offset);
        let (mut width, mut height) = (x2 - x1, y2 - y1);
        if !self.half_pixel {
            // Malformed rois become 1 × 1 (NaN stays NaN).
            width = py_max(width, 1.0);
            height = py_max(height, 1.0);
        }
        let bin = [height / self.oh as f32, width / self.ow as f32];
        let grid = |bin: f32, cap: usize| match self.sampling_ratio {
            0 => {
                let g = bin.ceil();
                // `as` saturates (an infinite grid becomes the cap); NaN and non-positive
                // grids have no samples.
                if g > 0.0 { (g as usize).min(cap) } else { 0 }
            }
            s => s,
        };
        let grid = [
            grid(bin[0], Self::max_grid(self.h, self.oh)),
            grid(bin[1], Self::max_grid(self.w, self.ow)),
        ];
        Roi {
            start: [y1, x1],
            bin,
            grid,
            count: (grid[0] as u128 * grid[1] as u128).max(1) as f32,
        }
    }

    /// Output planes `planes` (`roi·c + channel`) into `y` (those planes), the batch
    /// indices checked.
    fn planes(
        &self,
        spatial_scale: f32,
        x: &[f32],
        rois: &[f32],
        batch: &[i64],
        planes: std::ops::Range<usize>,
        y: &mut [f32],
    ) {
        let (hw, ohw) = (self.h * self.w, self.oh * self.ow);
        let mut y = y;
        let mut i = planes.start;
        while i < planes.end {
            let (roi, c0) = (i / self.c, i % self.c);
            let c1 = self.c.min(c0 + planes.end - i);
            let (out, rest) = std::mem::take(&mut y).split_at_mut((c1 - c0) * ohw);
            y = rest;
            i += c1 - c0;
            let b = batch[roi];
            if !(0..self.n as i64).contains(&b) {
                out.fill(0.0);
                continue;
            }
            let g = self.roi(spatial_scale, &rois[roi * 4..][..4]);
            let image = &x[b as usize * self.c * hw..][..self.c * hw];
            for (k, out) in out.chunks_mut(BLOCK * ohw).enumerate() {
                let first = c0 + k * BLOCK;
                let chans = out.len() / ohw;
                self.block(&g, &image[first * hw..][..chans * hw], out);
            }
        }
    }

    /// The outputs `y` `[chans, oh, ow]` of one roi for the planes `x` `[chans, h, w]`,
    /// `chans ≤ BLOCK`.
    fn block(&self, g: &Roi, x: &[f32], y: &mut [f32]) {
        let (hw, ohw) = (self.h * self.w, self.oh * self.ow);
        let chans = y.len() / ohw;
        let [gh, gw] = g.grid;
        for ph in 0..self.oh {
            for pw in 0..self.ow {
                let mut acc = [0f32; BLOCK];
                let acc = &mut acc[..chans];
                let mut first = true;
                for iy in 0..gh {
                    let ty = tap(g.coordinate(0, ph, iy), self.h);
                    for ix in 0..gw {
                        let tx = tap(g.coordinate(1, pw, ix), self.w);
                        let Sample { pos, w } = sample(ty, tx, self.w);
                        for (a, x) in acc.iter_mut().zip(x.chunks_exact(hw)) {
                            let t = [
                                w[0] * x[pos[0]],
                                w[1] * x[pos[1]],
                                w[2] * x[pos[2]],
                                w[3] * x[pos[3]],
                            ];
                            if self.max {
                                let v = py_max(py_max(py_max(t[0], t[1]), t[2]), t[3]);
                                *a = if first { v } else { py_max(*a, v) };
                            } else {
                                *a += t[0] + t[1] + t[2] + t[3];
                            }
                        }
                        first = false;
                    }
                }
                for (a, y) in acc.iter().zip(y.chunks_exact_mut(ohw)) {
                    y[ph * self.ow + pw] = if self.max { *a } else { *a / g.count };
                }
            }
        }
    }
}

/// A roi's sampling geometry, `[y, x]` per axis.
struct Roi {
    start: [f32; 2],
    bin: [f32; 2],
    /// Samples per bin along each axis.
    grid: [usize; 2],
    /// `max(grid[0]·grid[1], 1)`, the divisor of an average.
    count: f32,
}

impl Roi {
    /// Sample `i` of bin `p` along `axis` (0: y, 1: x): `start + p·bin + (i + 0.5)·bin /
    /// grid` in float32, `i + 0.5` rounded from float64 as the reference's Python does.
    fn coordinate(&self, axis: usize, p: usize, i: usize) -> f32 {
        let (bin, grid) = (self.bin[axis], self.grid[axis] as f32);
        self.start[axis] + p as f32 * bin + (i as f64 + 0.5) as f32 * bin / grid
    }
}

/// Python's `max(a, b)`: `a` unless `b > a` (the first of equal values, and of a NaN and a
/// number).
fn py_max(a: f32, b: f32) -> f32 {
    if b > a { b } else { a }
}

/// A sample's neighbours along one axis and their weights (the reference's `hy` for `lo`,
/// `ly` for `hi`).
#[derive(Clone, Copy)]
struct Tap {
    lo: usize,
    hi: usize,
    w_lo: f32,
    w_hi: f32,
}

/// The tap of coordinate `v` on an axis of `size` pixels; None outside `[−1, size]`
/// (NaN included).
fn tap(v: f32, size: usize) -> Option<Tap> {
    if !(v >= -1.0 && v <= size as f32) {
        return None;
    }
    // `max(v, 0)` (keeping −0), then clamped into the map.
    let v = py_max(v, 0.0);
    let lo = v as usize;
    let (lo, hi, v) = if lo + 1 >= size {
        (size - 1, size - 1, (size - 1) as f32)
    } else {
        (lo, lo + 1, v)
    };
    let l = v - lo as f32;
    Some(Tap {
        lo,
        hi,
        w_lo: 1.0 - l,
        w_hi: l,
    })
}

/// A sample's four positions in a plane and their weights (zero weights at position 0
/// outside the map).
struct Sample {
    pos: [usize; 4],
    w: [f32; 4],
}

fn sample(y: Option<Tap>, x: Option<Tap>, width: usize) -> Sample {
    match (y, x) {
        (Some(y), Some(x)) => Sample {
            pos: [
                y.lo * width + x.lo,
                y.lo * width + x.hi,
                y.hi * width + x.lo,
                y.hi * width + x.hi,
            ],
            w: [
                y.w_lo * x.w_lo,
                y.w_lo * x.w_hi,
                y.w_hi * x.w_lo,
                y.w_hi * x.w_hi,
            ],
        },
        _ => Sample {
            pos: [0; 4],
            w: [0.0; 4],
        },
    }
}

/// RoiAlign of `p` (the module's definition) into `y`, the output planes split over
/// `par`. Returns `ONNXC_OK`, or `ONNXC_ERR_INDEX` when a batch index lies outside
/// `[0, n)` (those rois' outputs are zeros, the others computed).
///
/// # Panics
/// When a slice's length is not the one `p` gives it (`x_len()`, `4·r`, `r`, `y_len()`).
pub fn roi_align_f32(
    p: &RoiAlignParams,
    spatial_scale: f32,
    x: &[f32],
    rois: &[f32],
    batch: &[i64],
    y: &mut [f32],
    par: Par,
) -> Status {
    assert_eq!(x.len(), p.x_len(), "x");
    assert_eq!(rois.len(), 4 * p.r, "rois");
    assert_eq!(batch.len(), p.r, "batch");
    assert_eq!(y.len(), p.y_len(), "y");
    let ohw = p.oh * p.ow;
    let ya = y.as_mut_ptr();
    let ratio = p.sampling_ratio.clamp(1, 2);
    let cost = ohw.saturating_mul(4 * ratio * ratio);
    let job = |planes: std::ops::Range<usize>, _: usize| {
        // SAFETY: these planes' outputs lie inside `y` (`planes.end ≤ r·c`) and are this
        // task's alone.
        let y = unsafe {
            std::slice::from_raw_parts_mut(ya.add(planes.start * ohw), planes.len() * ohw)
        };
        p.planes(spatial_scale, x, rois, batch, planes, y);
    };
    // SAFETY: the tasks write disjoint planes of `y`; the inputs are shared read-only.
    unsafe { par.for_ranges(p.r * p.c, cost, &job) };
    if batch.iter().all(|b| (0..p.n as i64).contains(b)) {
        ONNXC_OK
    } else {
        ONNXC_ERR_INDEX
    }
}

/// `params`: `RoiAlignParams::encode`'s blob; `spatial_scale`: one float; `x` `[n, c, h,
/// w]`, `rois` `[r, 4]` (`x1, y1, x2, y2`), `batch` `[r]` int64, `y` `[r, c, oh, ow]`.
/// Returns `ONNXC_ERR_PARAMS`, touching nothing, when the blob is not valid or a pointer
/// null; `ONNXC_ERR_INDEX` when a batch index lies outside `[0, n)` (those rois' outputs
/// are zeros).
///
/// # Safety
/// `params` points to a sealed blob (`params::blob`); the other pointers are null or hold
/// the elements it describes; `y` overlaps no input; `threads` as `Par::from_raw`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_roi_align_f32(
    params: *const i64,
    spatial_scale: *const f32,
    x: *const f32,
    rois: *const f32,
    batch: *const i64,
    y: *mut f32,
    threads: *const Threads,
) -> Status {
    let p = params::decode_blob!(params, RoiAlignParams::decode);
    // SAFETY: (each) a non-null pointer holds the elements the parameters give it
    // (contract).
    let (Some(scale), Some(x), Some(rois), Some(batch)) = (unsafe {
        (
            elements(spatial_scale, 1),
            elements(x, p.x_len()),
            elements(rois, 4 * p.r),
            elements(batch, p.r),
        )
    }) else {
        return ONNXC_ERR_PARAMS;
    };
    // SAFETY: a non-null y holds the output (contract).
    let Some(y) = (unsafe { elements_mut(y, p.y_len()) }) else {
        return ONNXC_ERR_PARAMS;
    };
    // SAFETY: the caller's contract.
    let par = unsafe { Par::from_raw(threads) };
    roi_align_f32(&p, scale[0], x, rois, batch, y, par)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::par::same_bits_on_every_pool;

    /// onnx's `op_roi_align.py` transliterated: a table of samples per roi (`pre_calc`),
    /// then each channel's bins, in float32 with Python's `max` (the first of equal values);
    /// the adaptive grid capped by `max_grid`.
    fn reference(
        p: &RoiAlignParams,
        scale: f32,
        x: &[f32],
        rois: &[f32],
        batch: &[i64],
    ) -> Vec<f32> {
        let (h, w, oh, ow) = (p.h, p.w, p.oh, p.ow);
        let pymax = |a: f32, b: f32| if b > a { b } else { a };
        let mut y = vec![0f32; p.y_len()];
        for n in 0..p.r {
            let off = if p.half_pixel { 0.5 } else { 0.0 };
            let r = &rois[n * 4..][..4];
            let (sw, sh) = (r[0] * scale - off, r[1] * scale - off);
            let (ew, eh) = (r[2] * scale - off, r[3] * scale - off);
            let (mut rw, mut rh) = (ew - sw, eh - sh);
            if !p.half_pixel {
                rw = pymax(rw, 1.0);
                rh = pymax(rh, 1.0);
            }
            let (bh, bw) = (rh / oh as f32, rw / ow as f32);
            // The adaptive grid with the kernel's cap (which binds for `ROIS[5]` only).
            let grid = |b: f32, cap: usize| match p.sampling_ratio {
                0 => (b.ceil() as i64).clamp(0, cap as i64) as usize,
                s => s,
            };
            let gh = grid(bh, RoiAlignParams::max_grid(h, oh));
            let gw = grid(bw, RoiAlignParams::max_grid(w, ow));
            let count = (gh * gw).max(1) as f32;
            // (positions, weights) per sample, in loop order.
            let mut pre = Vec::new();
            for ph in 0..oh {
                for pw in 0..ow {
                    for iy in 0..gh {
                        let yy = sh + ph as f32 * bh + (iy as f32 + 0.5) * bh / gh as f32;
                        for ix in 0..gw {
                            let xx = sw + pw as f32 * bw + (ix as f32 + 0.5) * bw / gw as f32;
                            let (mut y, mut x) = (yy, xx);
                            if y < -1.0 || y > h as f32 || x < -1.0 || x > w as f32 {
                                pre.push(([0; 4], [0.0; 4]));
                                continue;
                            }
                            y = pymax(y, 0.0);
                            x = pymax(x, 0.0);
                            let (mut yl, mut xl) = (y as usize, x as usize);
                            let (yh, xh);
                            if yl >= h - 1 {
                                (yl, yh, y) = (h - 1, h - 1, (h - 1) as f32);
                            } else {
                                yh = yl + 1;
                            }
                            if xl >= w - 1 {
                                (xl, xh, x) = (w - 1, w - 1, (w - 1) as f32);
                            } else {
                                xh = xl + 1;
                            }
                            let (ly, lx) = (y - yl as f32, x - xl as f32);
                            let (hy, hx) = (1.0 - ly, 1.0 - lx);
                            pre.push((
                                [yl * w + xl, yl * w + xh, yh * w + xl, yh * w + xh],
                                [hy * hx, hy * lx, ly * hx, ly * lx],
                            ));
                        }
                    }
                }
            }
            for c in 0..p.c {
                let plane = &x[(batch[n] as usize * p.c + c) * h * w..][..h * w];
                let mut samples = pre.iter();
                for ph in 0..oh {
                    for pw in 0..ow {
                        let mut v = 0f32;
                        let mut first = true;
                        for _ in 0..gh * gw {
                            let (pos, wt) = samples.next().unwrap();
                            let t = [0, 1, 2, 3].map(|i| wt[i] * plane[pos[i]]);
                            if p.max {
                                let m = pymax(pymax(pymax(t[0], t[1]), t[2]), t[3]);
                                v = if first { m } else { pymax(v, m) };
                                first = false;
                            } else {
                                v += t[0] + t[1] + t[2] + t[3];
                            }
                        }
                        if !p.max {
                            v /= count;
                        }
                        y[((n * p.c + c) * oh + ph) * ow + pw] = v;
                    }
                }
            }
        }
        y
    }

    /// `onnxc_roi_align_f32` on `threads`: the output (NaN where not written) and status.
    fn run(
        p: &RoiAlignParams,
        scale: f32,
        x: &[f32],
        rois: &[f32],
        batch: &[i64],
        threads: *const Threads,
    ) -> (Vec<f32>, Status) {
        let mut y = vec![f32::NAN; p.y_len()];
        let blob = p.encode();
        // SAFETY: a sealed blob; the buffers hold what it describes; threads from the tests.
        let status = unsafe {
            onnxc_roi_align_f32(
                blob.as_ptr(),
                &scale,
                x.as_ptr(),
                rois.as_ptr(),
                batch.as_ptr(),
                y.as_mut_ptr(),
                threads,
            )
        };
        (y, status)
    }

    fn params(n: usize, c: usize, hw: [usize; 2], r: usize, out: [usize; 2]) -> RoiAlignParams {
        RoiAlignParams {
            n,
            c,
            h: hw[0],
            w: hw[1],
            r,
            oh: out[0],
            ow: out[1],
            sampling_ratio: 0,
            max: false,
            half_pixel: true,
        }
    }

    fn same_bits(what: &str, got: &[f32], want: &[f32]) {
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "{what} [{i}]: got {g}, want {w}");
        }
        assert_eq!(got.len(), want.len(), "{what}");
    }

    /// Rois inside, across and outside the map, tiny and reversed ones.
    const ROIS: [f32; 28] = [
        0.25, 0.5, 8.5, 7.75, -2.0, -1.5, 3.25, 8.0, 1.0, 1.0, 1.25, 1.5, 6.5, 4.0, 9.0, 12.0, 3.0,
        2.0, 0.5, 1.0, -30.0, -20.0, 40.0, 25.0, 2.7, 0.3, 7.9, 6.1,
    ];

    /// Every mode, coordinate transformation and sampling ratio, 1 to 11 channels (blocks
    /// and their tails), against the transliterated reference, bit for bit.
    #[test]
    fn matches_the_reference() {
        for (hw, out, c) in [
            ([6, 7], [3, 2], 2),
            ([5, 9], [2, 3], 11),
            ([1, 1], [2, 2], 1),
            ([4, 1], [1, 3], 9),
        ] {
            let x = crate::test_rand(2 * c * hw[0] * hw[1], (hw[0] * 31 + c) as u64);
            let batch = [0, 1, 1, 0, 0, 1, 0];
            for max in [false, true] {
                for half_pixel in [false, true] {
                    for ratio in [0, 1, 2, 3] {
                        for scale in [0.75, 1.0, 0.125] {
                            let p = RoiAlignParams {
                                sampling_ratio: ratio,
                                max,
                                half_pixel,
                                ..params(2, c, hw, 7, out)
                            };
                            let (y, status) = run(&p, scale, &x, &ROIS, &batch, std::ptr::null());
                            assert_eq!(status, ONNXC_OK);
                            let want = reference(&p, scale, &x, &ROIS, &batch);
                            same_bits(&format!("{p:?} scale {scale}"), &y, &want);
                        }
                    }
                }
            }
        }
    }

    /// onnx's reference evaluator (numpy 2, float32) on `x[i] = (37·i mod 101)/16 − 3`
    /// `[2, 2, 6, 7]`, the first five `ROIS` with batch indices `[0, 1, 1, 0, 0]`, scale 0.75,
    /// 3 × 2 bins: the FNV-1a hash of the output's bits (little-endian) for each
    /// `(max, half_pixel, sampling_ratio)`.
    #[test]
    fn matches_onnx_reference_bits() {
        let (n, c, h, w) = (2, 2, 6, 7);
        let x: Vec<f32> = (0..n * c * h * w)
            .map(|i| ((i * 37) % 101) as f32 * 0.0625 - 3.0)
            .collect();
        let batch = [0, 1, 1, 0, 0];
        for (max, half_pixel, ratio, hash) in [
            (false, true, 0, 0xa140bb963c97ce72u64),
            (false, true, 2, 0x21995af6981f44bf),
            (false, false, 0, 0x50006b7accac3ba5),
            (false, false, 2, 0x7488d771b06db661),
            (true, true, 0, 0x60ca0f949182b04d),
            (true, true, 2, 0x0ea3a7c507187bfb),
            (true, false, 0, 0x77ba0c55b6d6281a),
            (true, false, 2, 0x20101c29d347fd76),
        ] {
            let p = RoiAlignParams {
                sampling_ratio: ratio,
                max,
                half_pixel,
                ..params(n, c, [h, w], 5, [3, 2])
            };
            let (y, status) = run(&p, 0.75, &x, &ROIS[..20], &batch, std::ptr::null());
            assert_eq!(status, ONNXC_OK);
            let fnv = y
                .iter()
                .flat_map(|v| v.to_bits().to_le_bytes())
                .fold(0xcbf29ce484222325u64, |h, b| {
                    (h ^ b as u64).wrapping_mul(0x100000001b3)
                });
            assert_eq!(fnv, hash, "{p:?}");
        }
    }

    /// The ONNX backend tests `test_roialign_aligned_false`, `_aligned_true` and
    /// `_mode_max` (their expected averages are rounded to 4 decimals).
    #[test]
    fn onnx_backend_cases() {
        #[rustfmt::skip]
        let x = [
            0.2764, 0.715, 0.1958, 0.3416, 0.4638, 0.0259, 0.2963, 0.6518, 0.4856, 0.725,
            0.9637, 0.0895, 0.2919, 0.6753, 0.0234, 0.6132, 0.8085, 0.5324, 0.8992, 0.4467,
            0.3265, 0.8479, 0.9698, 0.2471, 0.9336, 0.1878, 0.4766, 0.4308, 0.34, 0.2162,
            0.0206, 0.172, 0.2155, 0.4394, 0.0653, 0.3406, 0.7724, 0.3921, 0.2541, 0.5799,
            0.4062, 0.2194, 0.4473, 0.4687, 0.7109, 0.9327, 0.9815, 0.632, 0.1728, 0.6119,
            0.3097, 0.1283, 0.4984, 0.5068, 0.4279, 0.0173, 0.4388, 0.043, 0.4671, 0.7119,
            0.1011, 0.8477, 0.4726, 0.1777, 0.9923, 0.4042, 0.1869, 0.7795, 0.9946, 0.9689,
            0.1366, 0.3671, 0.7011, 0.6234, 0.9867, 0.5585, 0.6985, 0.5609, 0.8788, 0.9928,
            0.5697, 0.8511, 0.6711, 0.9406, 0.8751, 0.7496, 0.165, 0.1049, 0.1559, 0.2514,
            0.7012, 0.4056, 0.7879, 0.3461, 0.0415, 0.2998, 0.5094, 0.3727, 0.5482, 0.0502,
        ];
        let rois = [0.0, 0.0, 9.0, 9.0, 0.0, 5.0, 4.0, 9.0, 5.0, 5.0, 9.0, 9.0];
        #[rustfmt::skip]
        let aligned_false = [
            0.4664, 0.4466, 0.3405, 0.5688, 0.6068, 0.3714, 0.4296, 0.3835, 0.5562, 0.351,
            0.2768, 0.4883, 0.5222, 0.5528, 0.4171, 0.4713, 0.4844, 0.6904, 0.492, 0.8774,
            0.6239, 0.7125, 0.6289, 0.3355, 0.3495, 0.3022, 0.4305, 0.4696, 0.3978, 0.5423,
            0.3656, 0.705, 0.5165, 0.3172, 0.7015, 0.2912, 0.5059, 0.6476, 0.6235, 0.8299,
            0.5916, 0.7389, 0.7048, 0.8372, 0.8893, 0.6227, 0.6153, 0.7097, 0.6154, 0.4585,
            0.2384, 0.3379, 0.3717, 0.61, 0.7601, 0.3767, 0.3785, 0.7147, 0.9243, 0.9727,
            0.5749, 0.5826, 0.5709, 0.7619, 0.877, 0.5355, 0.2566, 0.2141, 0.2796, 0.36,
            0.4365, 0.3504, 0.2887, 0.3661, 0.2349,
        ];
        #[rustfmt::skip]
        let aligned_true = [
            0.5178, 0.3434, 0.3229, 0.4474, 0.6344, 0.4031, 0.5366, 0.4428, 0.4861, 0.4023,
            0.2512, 0.4002, 0.5155, 0.6954, 0.3465, 0.335, 0.4601, 0.5881, 0.3439, 0.6849,
            0.4932, 0.7141, 0.8217, 0.4719, 0.4039, 0.307, 0.2187, 0.3337, 0.488, 0.487,
            0.1871, 0.4914, 0.5561, 0.4192, 0.3686, 0.1433, 0.4608, 0.5971, 0.531, 0.4982,
            0.2788, 0.4386, 0.6022, 0.7, 0.7524, 0.5774, 0.7024, 0.7251, 0.7338, 0.8163,
            0.2393, 0.4075, 0.3379, 0.2525, 0.4743, 0.3671, 0.2702, 0.4105, 0.6419, 0.8308,
            0.5556, 0.4543, 0.5564, 0.7502, 0.93, 0.6626, 0.5617, 0.4813, 0.4954, 0.6663,
            0.6636, 0.3721, 0.2056, 0.1928, 0.2478,
        ];
        #[rustfmt::skip]
        let mode_max = [
            0.3445228, 0.37310338, 0.37865096, 0.446696, 0.37991184, 0.4133513, 0.5455125,
            0.6651902, 0.55805874, 0.27110294, 0.21223956, 0.40924096, 0.8417618, 0.792561,
            0.37196714, 0.46835402, 0.39741728, 0.8012819, 0.4969306, 0.5495158, 0.3595896,
            0.5196813, 0.5403741, 0.23814403, 0.19992709, 0.30517197, 0.5086199, 0.3189761,
            0.4054401, 0.47630402, 0.50862, 0.8477, 0.37808004, 0.24936005, 0.79384017,
            0.17620805, 0.29368007, 0.44870415, 0.4987201, 0.63148826, 0.51066005, 0.8511,
            0.5368801, 0.9406, 0.70008016, 0.4487681, 0.51066035, 0.5042561, 0.5643603,
            0.42004836, 0.21062402, 0.3510401, 0.37416005, 0.5967599, 0.46507207, 0.32336006,
            0.31180006, 0.6236001, 0.9946, 0.7751202, 0.35744014, 0.5588001, 0.35897616,
            0.7030401, 0.6353923, 0.5996801, 0.27940005, 0.17948808, 0.35152006, 0.31769615,
            0.3598083, 0.40752012, 0.2385281, 0.43856013, 0.26313624,
        ];
        for (max, half_pixel, want, tol) in [
            (false, false, &aligned_false, 1e-4),
            (false, true, &aligned_true, 1e-4),
            (true, false, &mode_max, 1e-6),
        ] {
            let p = RoiAlignParams {
                sampling_ratio: 2,
                max,
                half_pixel,
                ..params(1, 1, [10, 10], 3, [5, 5])
            };
            let (y, status) = run(&p, 1.0, &x, &rois, &[0, 0, 0], std::ptr::null());
            assert_eq!(status, ONNXC_OK);
            for (i, (g, w)) in y.iter().zip(want).enumerate() {
                assert!(
                    (g - w).abs() <= tol,
                    "max {max} half_pixel {half_pixel} [{i}]: {g} vs {w}"
                );
            }
        }
    }

    /// A batch index outside `[0, n)` zeroes that roi's outputs and fails the call with
    /// `ONNXC_ERR_INDEX`; the other rois are computed.
    #[test]
    fn batch_index_out_of_range() {
        let p = params(2, 3, [6, 7], 7, [2, 3]);
        let x = crate::test_rand(p.x_len(), 5);
        for bad in [2, -1, i64::MIN, i64::MAX] {
            let batch = [0, 1, bad, 0, 1, 1, bad];
            let (y, status) = run(&p, 0.75, &x, &ROIS, &batch, std::ptr::null());
            assert_eq!(status, ONNXC_ERR_INDEX);
            let ok = batch.map(|b| if b == bad { 0 } else { b });
            let want = reference(&p, 0.75, &x, &ROIS, &ok);
            let plane = p.c * p.oh * p.ow;
            for (r, (got, want)) in y.chunks(plane).zip(want.chunks(plane)).enumerate() {
                if batch[r] == bad {
                    assert!(got.iter().all(|v| v.to_bits() == 0), "roi {r}: {got:?}");
                } else {
                    same_bits(&format!("roi {r}"), got, want);
                }
            }
        }
        // No images at all.
        let p = params(0, 2, [3, 3], 1, [1, 1]);
        let (y, status) = run(&p, 1.0, &[], &ROIS[..4], &[0], std::ptr::null());
        assert_eq!((y, status), (vec![0.0; 2], ONNXC_ERR_INDEX));
    }

    /// NaN, infinite and huge coordinates read inside the map and end promptly: the
    /// adaptive grid stops at `max_grid`.
    #[test]
    fn hostile_rois() {
        let big = 1e30f32;
        let (nan, inf) = (f32::NAN, f32::INFINITY);
        #[rustfmt::skip]
        let rois = [
            nan, 0.0, 3.0, 3.0,  0.0, nan, nan, 3.0,  -inf, -inf, inf, inf,
            -big, -big, big, big,  0.0, 0.0, inf, 2.0,  -big, 1.0, -big + 1e24, 2.0,
            -3e9, -2e9, 3e9, 2e9,
        ];
        for (hw, out) in [([64, 48], [7, 7]), ([1, 1], [1, 1])] {
            let x = crate::test_rand(2 * 3 * hw[0] * hw[1], 9);
            for max in [false, true] {
                for half_pixel in [false, true] {
                    for ratio in [0, 2] {
                        let p = RoiAlignParams {
                            sampling_ratio: ratio,
                            max,
                            half_pixel,
                            ..params(2, 3, hw, 7, out)
                        };
                        let t0 = std::time::Instant::now();
                        let (y, status) = run(&p, 0.5, &x, &rois, &[1; 7], std::ptr::null());
                        assert_eq!(status, ONNXC_OK);
                        assert!(y.iter().all(|v| v.is_finite()), "{p:?}: {y:?}");
                        assert!(t0.elapsed().as_secs() < 5, "{p:?}");
                        // The NaN rois sample nothing, or only outside the map.
                        let plane = p.c * p.oh * p.ow;
                        assert!(y[..2 * plane].iter().all(|&v| v == 0.0), "{p:?}");
                    }
                }
            }
        }
        // The cap binds only beyond GRID_MARGIN times the map.
        let p = params(1, 1, [10, 20], 1, [2, 3]);
        let g = p.roi(1.0, &[0.0, 0.0, 84.0, 44.0]);
        assert_eq!(g.grid, [22, 28]);
        let g = p.roi(1.0, &[0.0, 0.0, 1e6, 1e6]);
        assert_eq!(g.grid, [22, 28]);
        let g = p.roi(1.0, &[0.0, 0.0, 83.0, 43.0]);
        assert_eq!(g.grid, [22, 28]);
        let g = p.roi(1.0, &[0.0, 0.0, 70.0, 40.0]);
        assert_eq!(g.grid, [20, 24]);
    }

    /// A sample outside the map reads `0·x[0]` as the reference does: NaN when the plane's
    /// first pixel is infinite.
    #[test]
    fn outside_samples_read_the_first_pixel() {
        let mut x = vec![1.0f32; 2 * 2 * 3 * 3];
        x[9] = f32::INFINITY;
        let rois = [10.0, 10.0, 12.0, 12.0];
        for max in [false, true] {
            let p = RoiAlignParams {
                max,
                ..params(2, 2, [3, 3], 1, [1, 1])
            };
            let (y, _) = run(&p, 1.0, &x, &rois, &[0], std::ptr::null());
            assert_eq!(y[0], 0.0);
            assert!(y[1].is_nan());
            let (y, _) = run(&p, 1.0, &x, &rois, &[1], std::ptr::null());
            assert_eq!(y, [0.0, 0.0]);
        }
    }

    #[test]
    fn threads_give_the_same_bits() {
        for (c, r) in [(1, 7), (11, 7), (40, 3)] {
            let mut p = params(2, c, [9, 8], r, [3, 4]);
            let x = crate::test_rand(p.x_len(), c as u64);
            let batch: Vec<i64> = (0..r as i64).map(|i| i % 2).collect();
            for max in [false, true] {
                p.max = max;
                same_bits_on_every_pool(&format!("{p:?}"), |_, threads| {
                    let (y, status) = run(&p, 0.6, &x, &ROIS[..4 * r], &batch, threads);
                    assert_eq!(status, ONNXC_OK);
                    y
                });
            }
        }
    }

    #[test]
    fn calls_do_not_allocate() {
        let p = params(2, 11, [9, 8], 7, [3, 4]);
        let x = crate::test_rand(p.x_len(), 3);
        let mut y = vec![0f32; p.y_len()];
        let (status, allocations) = crate::allocations_during(|| {
            roi_align_f32(&p, 0.5, &x, &ROIS, &[0, 1, 0, 1, 0, 1, 0], &mut y, Par::SEQ)
        });
        assert_eq!((status, allocations), (ONNXC_OK, 0));
    }

    /// Corrupt blobs are refused by `decode` and by the entry point, which then writes
    /// nothing; so are null inputs.
    #[test]
    fn refuses_corrupt_blobs() {
        let good = params(1, 1, [3, 3], 1, [1, 1]);
        assert_eq!(RoiAlignParams::decode(&good.encode()), Ok(good));
        let words = good.encode();
        let with = |k: usize, v: i64| params::with_word(&words, k, v);
        let bad = [
            params::short_blob(&words),
            params::long_blob(&words),
            with(0, -1),
            with(1, -1),
            with(2, 0),
            with(3, 0),
            with(4, -1),
            with(5, 0),
            with(6, 0),
            with(7, -1),
            with(8, 2),
            with(9, -1),
            with(2, 1 << 40),
            {
                let mut b = with(0, 1 << 20);
                (b[2], b[3], b[4]) = (1 << 20, 1 << 20, 1 << 20);
                b
            },
        ];
        let x = [0f32; 9];
        let rois = [0.0f32, 0.0, 1.0, 1.0];
        let mut y = [-9f32; 4];
        for (i, b) in bad.iter().enumerate() {
            assert!(RoiAlignParams::decode(b).is_err(), "case {i}");
            // SAFETY: b is a sealed blob; the buffers are never touched (it is refused).
            let status = unsafe {
                onnxc_roi_align_f32(
                    b.as_ptr(),
                    &1.0,
                    x.as_ptr(),
                    rois.as_ptr(),
                    [0i64].as_ptr(),
                    y.as_mut_ptr(),
                    std::ptr::null(),
                )
            };
            assert_eq!(status, ONNXC_ERR_PARAMS, "case {i}");
        }
        // SAFETY: a valid blob; a null scale is refused before anything is read.
        let status = unsafe {
            onnxc_roi_align_f32(
                words.as_ptr(),
                std::ptr::null(),
                x.as_ptr(),
                rois.as_ptr(),
                [0i64].as_ptr(),
                y.as_mut_ptr(),
                std::ptr::null(),
            )
        };
        assert_eq!(status, ONNXC_ERR_PARAMS);
        assert!(y.iter().all(|&v| v == -9.0), "the output was written");
    }
}
