//! 2-D pooling (f32, NCHW): max, average (with or without padding in the divisor) and Lp.
//! Separable, a plane at a time: the plane is copied into a buffer padded with the
//! reduction's identity, reduced over the kernel rows (one contiguous pass per tap over the
//! whole plane at stride 1), then over the kernel columns (one contiguous pass per tap), and
//! every output row picks its columns. Whole-plane passes keep small planes (7×7…28×28)
//! from paying loop overhead per row. All scratch comes from the caller (the model's
//! workspace).

use crate::abi::ONNXC_OK;
use crate::kernels::Status;
use crate::par::{Par, ScratchNeed, Threads};
use crate::params;
use crate::simd::{self, Simd, Walk};

pub mod int8;

/// Largest exponent of an Lp pool (`powi` takes an i32; ONNX models use 1 to 3).
pub const MAX_LP: i64 = 1 << 16;

/// Pool geometry and kind, shared with the compiler.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolGeometry {
    /// 0 max, 1 average, 2 Lp.
    pub kind: i64,
    pub count_include_pad: bool,
    pub p: i64,
    /// Number of planes (N·C).
    pub planes: i64,
    pub input: [i64; 2],
    pub output: [i64; 2],
    pub kernel: [i64; 2],
    pub strides: [i64; 2],
    pub dilations: [i64; 2],
    pub pads_begin: [i64; 2],
    pub pads_end: [i64; 2],
}

impl PoolGeometry {
    /// The sealed blob (`params::seal`) `[len, kind, count_include_pad, p, planes, input×2,
    /// output×2, kernel×2, strides×2, dilations×2, pads_begin×2, pads_end×2]`.
    pub fn encode(&self) -> Vec<i64> {
        let mut v = vec![
            self.kind,
            self.count_include_pad as i64,
            self.p,
            self.planes,
        ];
        for a in self.window().into_iter().chain([self.pads_end]) {
            v.extend_from_slice(&a);
        }
        params::seal(v)
    }

    /// The geometry `encode` wrote into `blob`, validated (`validate`).
    pub fn decode(blob: &[i64]) -> params::Result<PoolGeometry> {
        let mut r = params::Reader::new(blob)?;
        let [kind, count_include_pad, p, planes] = r.array()?;
        let mut pair = || r.array::<2>();
        let (input, output, kernel) = (pair()?, pair()?, pair()?);
        let (strides, dilations, pads_begin, pads_end) = (pair()?, pair()?, pair()?, pair()?);
        r.finish()?;
        let g = PoolGeometry {
            kind,
            count_include_pad: params::flag(count_include_pad, "count_include_pad is not 0 or 1")?,
            p,
            planes,
            input,
            output,
            kernel,
            strides,
            dilations,
            pads_begin,
            pads_end,
        };
        g.validate()?;
        Ok(g)
    }

    /// Checks what the kernels rely on: a known kind (0 max, 1 average, 2 Lp with `p` in
    /// `1..=MAX_LP`; `p` 0 for the others), each spatial dim consistent (`params::pool_dim`),
    /// planes not negative, the input and output planes and the padded plane of every tap
    /// sizes that fit in memory.
    pub fn validate(&self) -> params::Result<()> {
        use params::{ensure, in_range, product};
        in_range(self.kind, 0, 2, "unknown pool kind")?;
        if self.kind == 2 {
            in_range(self.p, 1, MAX_LP, "Lp pool exponent out of range")?;
        } else {
            ensure(self.p == 0, "an exponent for a pool that is not Lp")?;
        }
        for d in 0..2 {
            params::pool_dim(
                self.input[d],
                self.kernel[d],
                self.output[d],
                self.strides[d],
                self.dilations[d],
                [self.pads_begin[d], self.pads_end[d]],
            )?;
        }
        in_range(
            self.planes,
            0,
            params::MAX_WORDS,
            "plane count out of range",
        )?;
        let too_big = "a tensor is too large";
        product([self.planes, self.input[0], self.input[1]], too_big)?;
        product([self.planes, self.output[0], self.output[1]], too_big)?;
        let reach = |d: usize| {
            ((self.output[d] - 1) * self.strides[d]
                + params::window_span(self.kernel[d], self.dilations[d]))
            .max(self.pads_begin[d] + self.input[d])
            .max(1)
        };
        // The padded plane and its reductions (`scratch_floats`), with room to spare.
        product([reach(0) + 16, reach(1) + 32, 4], too_big)?;
        Ok(())
    }
}

impl PoolGeometry {
    /// The window's 2-D extents, each `[h, w]`: input, output, kernel, strides, dilations
    /// and pads at the start.
    pub(crate) fn window(&self) -> [[i64; 2]; 6] {
        [
            self.input,
            self.output,
            self.kernel,
            self.strides,
            self.dilations,
            self.pads_begin,
        ]
    }

    /// Padded plane extents (rows, pitch): every tap of every output lies inside.
    fn padded_dims(&self) -> (usize, usize) {
        let span = |d: usize| {
            ((self.output[d] - 1) * self.strides[d] + (self.kernel[d] - 1) * self.dilations[d] + 1)
                .max(1) as usize
        };
        (span(0), span(1))
    }

    /// Length of the padded row of `pool2d_rows`: every tap of every output column, and the
    /// input row at offset `pads_begin[1]`.
    fn padded_row_len(&self) -> usize {
        let span =
            (self.output[1] - 1) * self.strides[1] + (self.kernel[1] - 1) * self.dilations[1] + 1;
        span.max(self.pads_begin[1] + self.input[1]).max(1) as usize
    }

    /// Floats of each row buffer of the row path: the padded row, plus the slack of whole
    /// 16-float vectors.
    fn row_buf_len(&self) -> usize {
        let v16 = |n: i64| (n.max(0) as usize).next_multiple_of(16);
        let vector_reach = (self.pads_begin[1].max(0) as usize + v16(self.input[1]))
            .max(self.strides[1].max(1) as usize * v16(self.output[1]) + 16)
            + (self.kernel[1] * self.dilations[1]).max(0) as usize;
        self.padded_row_len().max(vector_reach) + 16
    }

    /// Scratch layout of the SIMD row kernels: offsets of the y divisors (after the x
    /// divisors, one per output column rounded up to 16) and of the identity row (which
    /// stands in for window rows in the padding, so every output row reduces exactly kh
    /// rows), and the total floats.
    fn row_kernel_scratch(&self) -> (usize, usize, usize, usize) {
        let ow16 = (self.output[1].max(1) as usize).next_multiple_of(16);
        let oh = (self.output[0].max(1) as usize).next_multiple_of(16);
        let iw = self.input[1].max(1) as usize + 16;
        (ow16, ow16 + oh, iw, ow16 + oh + iw)
    }

    /// Row-by-row reduction for vertically strided pools (measured: 3×3/2 max pools on
    /// 112×112 and 56×56 planes 15-25% slower through the padded plane, whose copy costs more
    /// than the per-row overhead it saves); whole planes otherwise (stride-1 3×3 average pools
    /// on 28×28 planes 6× faster than row by row).
    fn by_rows(&self) -> bool {
        self.strides[0] > 1
    }

    /// Scratch floats `pool2d_f32` needs. By rows: the x divisors, the padded row and its
    /// reduction over the kernel's columns. By planes: the padded plane, its reduction over
    /// the kernel rows (with slack for the column taps of the last row), that over the kernel
    /// columns, the per-output divisors.
    pub fn scratch_floats(&self) -> usize {
        // By rows: the portable path's x divisors and two row buffers, or the SIMD row
        // kernels' x and y divisors and identity row (`row_kernel_scratch`).
        let rows = (self.output[1].max(1) as usize + 2 * self.row_buf_len())
            .max(self.row_kernel_scratch().3);
        if self.by_rows() {
            return rows;
        }
        // The row walk may take this pool on the CPU that runs it.
        let avx_rows = if self.rows_kernel_applies() { rows } else { 0 };
        let (hp, pitch) = self.padded_dims();
        let (oh, ow) = (
            self.output[0].max(0) as usize,
            self.output[1].max(0) as usize,
        );
        (hp * pitch
            + 2 * oh * pitch
            + pitch
            + (self.kernel[1] * self.dilations[1]) as usize
            + oh * ow)
            .max(avx_rows)
    }

    /// Whether the row walk (`PoolRows`) computes this pool on native vectors: max and average
    /// pools, undilated horizontally with stride 1 or 2, at most MAX_ROWS_KH kernel rows.
    /// Measured against the plane path on stride-1 pools too: Inception's 3×3/1 average
    /// pools (28×28 … 7×7 planes) ran 3.6× slower than onnxruntime's through whole-plane
    /// passes whose rows end in scalar tails.
    fn rows_kernel_applies(&self) -> bool {
        self.kind != 2
            && self.dilations[1] == 1
            && (1..=2).contains(&self.strides[1])
            && self.kernel[0] <= MAX_ROWS_KH as i64
            // Taps are lane shifts of two adjacent 8-lane vectors (AVX2), or of their
            // even/odd halves at stride 2.
            && self.kernel[1] <= 8 * self.strides[1] + 1
    }
}

/// The scratch `onnxc_pool2d_f32` needs (bytes): `scratch_floats` per worker.
impl PoolGeometry {
    pub fn scratch(&self) -> ScratchNeed {
        ScratchNeed {
            shared: 0,
            per_worker: self.scratch_floats() * 4,
        }
    }
}

/// The pool over `par`'s workers, a range of planes each.
///
/// # Safety
/// `x` holds `planes · IH · IW` floats, `y` `planes · OH · OW`, `scratch` `g.scratch()`
/// for `par`'s workers; the geometry is consistent (as `Pool` lowering builds it: positive
/// kernel, strides and dilations, non-negative pads, output extents from the ONNX shape
/// rules).
pub unsafe fn pool2d_f32(
    par: Par,
    g: &PoolGeometry,
    x: *const f32,
    y: *mut f32,
    scratch: *mut f32,
) {
    let (_, slots) = g.scratch().layout(scratch);
    let isz = (g.input[0] * g.input[1]).max(0) as usize;
    let osz = (g.output[0] * g.output[1]).max(0) as usize;
    let cost = osz * (g.kernel[0] * g.kernel[1]).max(1) as usize + isz;
    // SAFETY: each task reads and writes its own planes, in its worker's scratch.
    unsafe {
        par.for_ranges(g.planes.max(0) as usize, cost, &|p, w| {
            let gp = PoolGeometry {
                planes: p.len() as i64,
                ..g.clone()
            };
            pool2d_planes_of(&gp, x.add(p.start * isz), y.add(p.start * osz), slots.at(w))
        })
    };
}

/// `pool2d_f32` on one thread, `scratch` holding `scratch_floats()`.
///
/// # Safety
/// As `pool2d_f32`.
unsafe fn pool2d_planes_of(g: &PoolGeometry, x: *const f32, y: *mut f32, scratch: *mut f32) {
    // The row kernels specialized for 2×2 and 3×3 windows (constant tap loops, unrolled),
    // and for any window up to the limits of `rows_kernel_applies`; native vectors only.
    if g.rows_kernel_applies() {
        // SAFETY: x, y and scratch hold the sizes this function's contract states, which
        // `PoolRows` requires; `rows_kernel_applies()` was checked above; `dispatch_native`
        // runs the walk only on an ISA it detected.
        let done = unsafe {
            match g.kernel {
                [3, 3] => simd::dispatch_native(PoolRows::<3, 3> { g, x, y, scratch }),
                [2, 2] => simd::dispatch_native(PoolRows::<2, 2> { g, x, y, scratch }),
                _ => simd::dispatch_native(PoolRows::<0, 0> { g, x, y, scratch }),
            }
        };
        if done.is_some() {
            return;
        }
    }
    // SAFETY: forwarded contract.
    crate::multiversion!(pool2d_body(g, x, y, scratch))
}

/// Tallest kernel the row walk takes (its window rows live in a fixed array).
const MAX_ROWS_KH: usize = 16;

/// The row walk for max and average pools with horizontal stride 1 or 2 (undilated), in
/// whole vectors kept in registers: per output row, each vector of padded columns of the
/// window's input rows is reduced vertically (masked loads at the row's edges, identity
/// lanes in the padding), and the kw taps of a vector of outputs are lane shifts of two
/// such vectors (stride 1) or of their even/odd halves (stride 2), so nothing goes through
/// memory but the input and the output. (A padded scratch row written by the vertical pass
/// and read back at offsets straddling its vector stores made each load wait for the
/// stores it overlapped to commit: 2-3× slower.) `KH`, `KW` > 0: the window is KH × KW,
/// so the tap loops have constant trip counts.
#[derive(Clone, Copy)]
struct PoolRows<'a, const KH: usize, const KW: usize> {
    g: &'a PoolGeometry,
    x: *const f32,
    y: *mut f32,
    scratch: *mut f32,
}

impl<const KH: usize, const KW: usize> Walk for PoolRows<'_, KH, KW> {
    type Out = ();
    /// # Safety
    /// As `pool2d_f32`; `g.rows_kernel_applies()` and `S::LANES` ≥ 8 (the taps reach
    /// `kernel[1] − 1 ≤ 8·stride` columns past a vector's first: within the next vector).
    #[inline(always)]
    unsafe fn run<S: Simd>(self, s: S) {
        let PoolRows { g, x, y, scratch } = self;
        let l = S::LANES;
        let [ih, iw] = g.input;
        let [oh, ow] = g.output;
        let kh = if KH > 0 { KH as i64 } else { g.kernel[0] };
        let kw = if KW > 0 { KW as i64 } else { g.kernel[1] };
        let [sh, sw] = g.strides;
        let dh = g.dilations[0];
        let [ph, pw] = g.pads_begin;
        if oh <= 0 || ow <= 0 || g.planes <= 0 {
            return;
        }
        let (ow_u, kw_u, kh_u) = (ow as usize, kw as usize, kh as usize);
        let owl = ow_u.next_multiple_of(l);
        let max = g.kind == 0;
        let init = if max { f32::NEG_INFINITY } else { 0.0 };
        // SAFETY: forwarded scratch contract (its tables are sized for 16-lane rounding).
        let (inv_x, inv_y, ident) = unsafe { row_kernel_tables(g, kh, kw, owl, init, scratch) };
        let init_v = s.splat(init);
        let op = {
            #[inline(always)]
            |a, b| if max { s.max_nan(a, b) } else { s.add(a, b) }
        };
        // Lanes n.. of (lo, hi), n ≤ 16.
        let shifts: [S::Shift; 17] = std::array::from_fn(|n| s.shifter(n));
        let tail_out = s.lanes(0, if ow_u % l == 0 { l } else { ow_u % l });
        let mut rows = [std::ptr::null::<f32>(); MAX_ROWS_KH];
        // Vector k covers padded columns l·k.., input columns c = l·k − pw..; lanes outside
        // 0..iw are masked out of the loads (and not accessed).
        let vertical = {
            #[inline(always)]
            |rows: &[*const f32], k: usize| {
                let c = (l * k) as i64 - pw;
                let mut acc = init_v;
                if c >= 0 && c + l as i64 <= iw {
                    for &r in rows {
                        // SAFETY: columns c..c+l of an input row (or the identity row).
                        acc = op(acc, unsafe { s.load(r.add(c as usize)) });
                    }
                    return acc;
                }
                let (lo, hi) = ((-c).clamp(0, l as i64), (iw - c).clamp(0, l as i64));
                if hi <= lo {
                    return init_v;
                }
                let m = s.lanes(lo as usize, hi as usize);
                for &r in rows {
                    // SAFETY: the lanes in m are columns inside the row.
                    acc = op(acc, unsafe {
                        s.load_masked(r.wrapping_offset(c as isize), m, init_v)
                    });
                }
                acc
            }
        };
        // SAFETY: plane and row offsets inside x and y; output stores inside row oy (the last
        // vector masked).
        unsafe {
            for plane in 0..g.planes as usize {
                let xp = x.add(plane * (ih * iw) as usize);
                let yp = y.add(plane * ow_u * oh as usize);
                for oy in 0..oh {
                    for (ky, r) in rows.iter_mut().enumerate().take(kh_u) {
                        let iy = oy * sh + ky as i64 * dh - ph;
                        *r = if iy >= 0 && iy < ih {
                            xp.add((iy * iw) as usize)
                        } else {
                            ident.as_ptr()
                        };
                    }
                    let rows = &rows[..kh_u];
                    let scale_v = s.splat(inv_y[oy as usize]);
                    let out = yp.add(oy as usize * ow_u);
                    let finish = {
                        #[inline(always)]
                        |acc, c: usize| {
                            let acc = if max {
                                acc
                            } else {
                                s.mul(acc, s.mul(scale_v, s.load(inv_x.as_ptr().add(c))))
                            };
                            if c + l <= ow_u {
                                s.store(out.add(c), acc);
                            } else {
                                s.store_masked(out.add(c), tail_out, acc);
                            }
                        }
                    };
                    if sw == 1 {
                        // Output vector c: tap kx is lanes kx.. of (V_c, V_c+1).
                        let mut cur = vertical(rows, 0);
                        for cv in 0..owl / l {
                            let next = vertical(rows, cv + 1);
                            let mut acc = cur;
                            for sh in &shifts[1..kw_u] {
                                acc = op(acc, s.shift(cur, next, *sh));
                            }
                            finish(acc, l * cv);
                            cur = next;
                        }
                    } else {
                        // E_j / O_j: even / odd padded columns 2l·j.. (V_2j, V_2j+1); tap kx
                        // of output vector c is lanes kx/2.. of (E_c, E_c+1) or (O_c, O_c+1).
                        let (mut e0, mut o0) = s.deinterleave(vertical(rows, 0), vertical(rows, 1));
                        for cv in 0..owl / l {
                            let (e1, o1) = s.deinterleave(
                                vertical(rows, 2 * cv + 2),
                                vertical(rows, 2 * cv + 3),
                            );
                            let mut acc = e0;
                            if kw_u > 1 {
                                acc = op(acc, o0);
                            }
                            for kx in 2..kw_u {
                                let (a, b) = if kx % 2 == 0 { (e0, e1) } else { (o0, o1) };
                                acc = op(acc, s.shift(a, b, shifts[kx / 2]));
                            }
                            finish(acc, l * cv);
                            (e0, o0) = (e1, o1);
                        }
                    }
                }
            }
        }
    }
}

/// The tables the register row kernels read, written into their scratch
/// (`row_kernel_scratch`): 1 / (columns counted) for `padded_ow` output columns (1 past the
/// row), 1 / (rows counted) per output row (average pools), and the identity row (`init`)
/// that stands in for window rows in the padding. `kh` × `kw` is the window.
///
/// # Safety
/// `scratch` holds `g.scratch_floats()` floats and outlives the returned slices;
/// `padded_ow` ≤ the x divisors' room (`row_kernel_scratch`: the width rounded to 16).
unsafe fn row_kernel_tables<'a>(
    g: &PoolGeometry,
    kh: i64,
    kw: i64,
    padded_ow: usize,
    init: f32,
    scratch: *mut f32,
) -> (&'a [f32], &'a [f32], &'a [f32]) {
    let [ih, iw] = g.input;
    let [oh, ow] = g.output;
    let [sh, sw] = g.strides;
    let dh = g.dilations[0];
    let [ph, pw] = g.pads_begin;
    let [peh, pew] = g.pads_end;
    let (y_at, ident_at, ident_len, _) = g.row_kernel_scratch();
    // SAFETY: the three regions of row_kernel_scratch() are disjoint and inside scratch.
    let (inv_x, inv_y, ident) = unsafe {
        (
            std::slice::from_raw_parts_mut(scratch, padded_ow),
            std::slice::from_raw_parts_mut(scratch.add(y_at), oh as usize),
            std::slice::from_raw_parts_mut(scratch.add(ident_at), ident_len),
        )
    };
    for (ox, c) in inv_x.iter_mut().enumerate() {
        *c = if (ox as i64) < ow {
            1.0 / taps_counted(g.count_include_pad, ox as i64, kw, sw, 1, pw, iw, pew) as f32
        } else {
            1.0
        };
    }
    for (oy, v) in inv_y.iter_mut().enumerate() {
        *v = 1.0 / taps_counted(g.count_include_pad, oy as i64, kh, sh, dh, ph, ih, peh) as f32;
    }
    ident.fill(init);
    (inv_x, inv_y, ident)
}

/// `dst[j] = src[2·j]` (`src` holds `2·dst.len() - 1` floats or more): the stride-2 pick
/// that compilers leave scalar, as vector de-interleaves.
pub(crate) fn pick_even(src: &[f32], dst: &mut [f32]) {
    let n = dst.len();
    assert!(
        n == 0 || src.len() > 2 * (n - 1),
        "pick_even: source too short"
    );
    // SAFETY: src holds 2(n-1)+1 floats or more (asserted above), dst n.
    unsafe {
        simd::dispatch(PickEven {
            src: src.as_ptr(),
            dst: dst.as_mut_ptr(),
            n,
        })
    }
}

#[derive(Clone, Copy)]
struct PickEven {
    src: *const f32,
    dst: *mut f32,
    n: usize,
}

impl Walk for PickEven {
    type Out = ();
    /// # Safety
    /// `src` holds `2(n − 1) + 1` floats, `dst` `n`.
    #[inline(always)]
    unsafe fn run<S: Simd>(self, s: S) {
        let PickEven { src, dst, n } = self;
        let l = S::LANES;
        let mut j = 0;
        // SAFETY: full vectors read src[2j .. 2j + 2l) (checked against 2n − 1), the masked
        // ones only src[..2(n-1)+1] and dst[..n].
        unsafe {
            while j + l <= n && 2 * j + 2 * l < 2 * n {
                let (e, _) = s.deinterleave(s.load(src.add(2 * j)), s.load(src.add(2 * j + l)));
                s.store(dst.add(j), e);
                j += l;
            }
            while j < n {
                let r = (n - j).min(l);
                let need = 2 * (r - 1) + 1;
                let a = s.load_masked(src.add(2 * j), s.lanes(0, need), s.zero());
                let b = s.load_masked(
                    src.wrapping_add(2 * j + l),
                    s.lanes(0, need.saturating_sub(l)),
                    s.zero(),
                );
                s.store_masked(dst.add(j), s.lanes(0, r), s.deinterleave(a, b).0);
                j += r;
            }
        }
    }
}

/// |v|^p, what an Lp pool sums.
#[inline(always)]
fn lp_pow(p: i64, v: f32) -> f32 {
    let a = v.abs();
    match p {
        1 => a,
        2 => a * a,
        p => a.powi(p as i32),
    }
}

/// The p-th root that finishes an Lp pool.
#[inline(always)]
fn lp_root(p: i64, v: f32) -> f32 {
    match p {
        1 => v,
        2 => v.sqrt(),
        p => v.powf(1.0 / p as f32),
    }
}

/// dst = max(dst, src) or dst += src, elementwise (contiguous, vectorized). The max
/// propagates NaN (`f32::max` would drop it).
#[inline(always)]
fn fold(max: bool, dst: &mut [f32], src: &[f32]) {
    if max {
        dst.iter_mut().zip(src).for_each(|(a, b)| {
            if *b > *a || b.is_nan() {
                *a = *b
            }
        });
    } else {
        dst.iter_mut().zip(src).for_each(|(a, b)| *a += *b);
    }
}

/// out[j] = h[j·sw].
#[inline(always)]
fn pick_columns(h: &[f32], out: &mut [f32], sw: usize) {
    match sw {
        1 => out.copy_from_slice(&h[..out.len()]),
        2 => pick_even(h, out),
        _ => out
            .iter_mut()
            .zip(h.iter().step_by(sw))
            .for_each(|(o, v)| *o = *v),
    }
}

/// How many of the k taps of output position o (stride s, dilation d, begin/end pads p/pe,
/// input extent n) an average pool counts in its divisor.
#[inline(always)]
#[allow(clippy::too_many_arguments, reason = "one dimension's geometry")]
fn taps_counted(
    include_pad: bool,
    o: i64,
    k: i64,
    s: i64,
    d: i64,
    p: i64,
    n: i64,
    pe: i64,
) -> usize {
    (0..k)
        .filter(|t| {
            let q = o * s + t * d - p;
            if include_pad {
                q >= -p && q < n + pe
            } else {
                q >= 0 && q < n
            }
        })
        .count()
}

#[inline(always)]
fn pool2d_body(g: &PoolGeometry, x: *const f32, y: *mut f32, scratch: *mut f32) {
    if g.output[0] <= 0 || g.output[1] <= 0 || g.planes <= 0 {
        return;
    }
    if g.by_rows() {
        pool2d_rows(g, x, y, scratch)
    } else {
        pool2d_planes(g, x, y, scratch)
    }
}

/// Row by row (large strided pools: a plane copy would cost more than it saves): the
/// window's input rows are reduced column by column into a row padded with the identity,
/// then each output column reduces its kw taps of that row.
#[inline(always)]
fn pool2d_rows(g: &PoolGeometry, x: *const f32, y: *mut f32, scratch: *mut f32) {
    let [[ih, iw], [oh, ow], [kh, kw]] = [g.input, g.output, g.kernel];
    let [[sh, sw], [dh, dw]] = [g.strides, g.dilations];
    let [[ph, pw], [peh, pew]] = [g.pads_begin, g.pads_end];
    let (ow_u, iw_u, sw_u, dw_u, pw_u) = (
        ow as usize,
        iw as usize,
        sw as usize,
        dw as usize,
        pw as usize,
    );
    let plen = g.padded_row_len();
    // SAFETY: scratch holds scratch_floats() floats, split into disjoint parts.
    let (count_x, padded, h) = unsafe {
        (
            std::slice::from_raw_parts_mut(scratch, ow_u),
            std::slice::from_raw_parts_mut(scratch.add(ow_u), plen),
            std::slice::from_raw_parts_mut(scratch.add(ow_u + plen), plen),
        )
    };
    // Divisor counts along x (the y count is found per row).
    for (ox, c) in count_x.iter_mut().enumerate() {
        *c = taps_counted(g.count_include_pad, ox as i64, kw, sw, dw, pw, iw, pew) as f32;
    }
    let max = g.kind == 0;
    let init = if max { f32::NEG_INFINITY } else { 0.0 };
    // Columns outside the input read the reduction's identity.
    padded.fill(init);
    for plane in 0..g.planes as usize {
        // SAFETY: plane offsets inside x and y.
        let (xp, yp) = unsafe {
            (
                x.add(plane * (ih * iw) as usize),
                y.add(plane * ow_u * oh as usize),
            )
        };
        for oy in 0..oh {
            // Reduce the window's input rows column by column (contiguous, vectorized) into
            // the padded row (whose padding keeps the identity).
            let v = &mut padded[pw_u..pw_u + iw_u];
            v.fill(init);
            let cy = taps_counted(g.count_include_pad, oy, kh, sh, dh, ph, ih, peh);
            for ky in 0..kh {
                let iy = oy * sh + ky * dh - ph;
                if iy < 0 || iy >= ih {
                    continue;
                }
                // SAFETY: row iy of the plane.
                let row = unsafe { std::slice::from_raw_parts(xp.add(iy as usize * iw_u), iw_u) };
                match g.kind {
                    2 => v
                        .iter_mut()
                        .zip(row)
                        .for_each(|(a, r)| *a += lp_pow(g.p, *r)),
                    _ => fold(max, v, row),
                }
            }
            // Reduce kw taps at every padded column: one contiguous (vectorized) pass per tap.
            let hlen = (ow_u - 1) * sw_u + 1;
            let h = &mut h[..hlen];
            h.copy_from_slice(&padded[..hlen]);
            for kx in 1..kw as usize {
                fold(max, h, &padded[kx * dw_u..kx * dw_u + hlen]);
            }
            // SAFETY: output row oy.
            let out = unsafe { std::slice::from_raw_parts_mut(yp.add(oy as usize * ow_u), ow_u) };
            pick_columns(h, out, sw_u);
            match g.kind {
                0 => {}
                1 => {
                    for (o, cx) in out.iter_mut().zip(count_x.iter()) {
                        *o /= cx * cy as f32;
                    }
                }
                _ => out.iter_mut().for_each(|o| *o = lp_root(g.p, *o)),
            }
        }
    }
}

/// A plane at a time (see the module docs); vertical stride 1 (`by_rows` takes the others).
#[inline(always)]
fn pool2d_planes(g: &PoolGeometry, x: *const f32, y: *mut f32, scratch: *mut f32) {
    debug_assert_eq!(g.strides[0], 1, "strided pools go by rows");
    let [[ih, iw], [oh, ow], [kh, kw]] = [g.input, g.output, g.kernel];
    let [[sh, sw], [dh, dw]] = [g.strides, g.dilations];
    let [[ph, pw], [peh, pew]] = [g.pads_begin, g.pads_end];
    let (oh_u, ow_u) = (oh as usize, ow as usize);
    let (hp, pitch) = g.padded_dims();
    let vlen = oh_u * pitch + pitch + (kw * dw) as usize;
    // SAFETY: scratch holds scratch_floats() floats, split into disjoint parts.
    let (xp, v, hbuf, div) = unsafe {
        (
            std::slice::from_raw_parts_mut(scratch, hp * pitch),
            std::slice::from_raw_parts_mut(scratch.add(hp * pitch), vlen),
            std::slice::from_raw_parts_mut(scratch.add(hp * pitch + vlen), oh_u * pitch),
            std::slice::from_raw_parts_mut(
                scratch.add(hp * pitch + vlen + oh_u * pitch),
                oh_u * ow_u,
            ),
        )
    };
    let max = g.kind == 0;
    let init = if max { f32::NEG_INFINITY } else { 0.0 };
    // Average pooling divides by the cells counted per output: (rows counted) × (columns).
    if g.kind == 1 {
        let incl = g.count_include_pad;
        for oy in 0..oh {
            let cy = taps_counted(incl, oy, kh, sh, dh, ph, ih, peh) as f32;
            for ox in 0..ow {
                div[oy as usize * ow_u + ox as usize] =
                    1.0 / (cy * taps_counted(incl, ox, kw, sw, dw, pw, iw, pew) as f32);
            }
        }
    }
    // Input rows and columns that land inside the padded plane.
    let rows = (0..ih).filter(|&r| r + ph < hp as i64);
    let direct = g.kind != 2
        && [ph, pw, peh, pew] == [0, 0, 0, 0]
        && pitch == iw as usize
        && hp <= ih as usize;
    let cols = (iw.min(pitch as i64 - pw)).max(0) as usize;
    // The identity everywhere (including the slack the last row's column taps read);
    // input cells overwrite their part of xp for every plane.
    xp.fill(init);
    v.fill(init);
    for plane in 0..g.planes as usize {
        // SAFETY: plane offsets inside x and y.
        let (xpl, ypl) = unsafe {
            (
                x.add(plane * (ih * iw) as usize),
                y.add(plane * ow_u * oh_u),
            )
        };
        // 1. The padded plane (Lp: |x|^p on the way in); an unpadded max/average pool whose
        //    windows tile the input rows exactly reads the input plane itself.
        let xp: &[f32] = if direct {
            // SAFETY: the input plane holds ih·iw ≥ hp·pitch floats (pitch == iw, hp ≤ ih).
            unsafe { std::slice::from_raw_parts(xpl, hp * pitch) }
        } else {
            for r in rows.clone() {
                // SAFETY: row r of the input plane.
                let src =
                    unsafe { std::slice::from_raw_parts(xpl.add(r as usize * iw as usize), cols) };
                let d = (r + ph) as usize * pitch + pw as usize;
                match g.kind {
                    2 => xp[d..d + cols]
                        .iter_mut()
                        .zip(src)
                        .for_each(|(o, v)| *o = lp_pow(g.p, *v)),
                    _ => xp[d..d + cols].copy_from_slice(src),
                }
            }
            xp
        };
        // 2. Reduce over the kernel rows, for every column of the padded pitch: one
        //    contiguous pass per tap over the whole plane (vertical stride 1: strided pools
        //    go by rows).
        let n = oh_u * pitch;
        let vr = &mut v[..n];
        vr.copy_from_slice(&xp[..n]);
        for ky in 1..kh as usize {
            let o = ky * dh as usize * pitch;
            fold(max, vr, &xp[o..o + n]);
        }
        // 3. Reduce over the kernel columns: one contiguous pass per tap over all rows.
        let hr = &mut hbuf[..n];
        hr.copy_from_slice(&v[..n]);
        for kx in 1..kw as usize {
            let o = kx * dw as usize;
            fold(max, hr, &v[o..o + n]);
        }
        // 4. Output rows: every sw-th column, then the divisor or the root.
        for oy in 0..oh_u {
            // SAFETY: output row oy of the plane.
            let out = unsafe { std::slice::from_raw_parts_mut(ypl.add(oy * ow_u), ow_u) };
            pick_columns(&hbuf[oy * pitch..oy * pitch + pitch], out, sw as usize);
            match g.kind {
                0 => {}
                1 => out
                    .iter_mut()
                    .zip(&div[oy * ow_u..(oy + 1) * ow_u])
                    .for_each(|(o, d)| *o *= d),
                _ => out.iter_mut().for_each(|o| *o = lp_root(g.p, *o)),
            }
        }
    }
}

/// C ABI entry point. Returns `ONNXC_ERR_PARAMS`, touching nothing, when `params` is not a
/// valid `PoolGeometry::encode` blob.
///
/// # Safety
/// `params` points to a sealed blob (`params::blob`); `threads` as `Par::from_raw`;
/// otherwise as `pool2d_f32`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_pool2d_f32(
    params: *const i64,
    x: *const f32,
    y: *mut f32,
    scratch: *mut f32,
    threads: *const Threads,
) -> Status {
    let g = params::decode_blob!(params, PoolGeometry::decode);
    // SAFETY: forwarded contract, the geometry validated.
    unsafe { pool2d_f32(Par::from_raw(threads), &g, x, y, scratch) };
    ONNXC_OK
}

#[cfg(test)]
pub(crate) mod tests;
