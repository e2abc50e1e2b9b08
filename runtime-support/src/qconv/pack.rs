//! Packing one panel of the im2col matrix: `NR` output positions × `K` (channel, tap) rows of
//! uint8 activations, laid out `[k/4][NR][4]` for the four-way dot products. Padding (and
//! lanes past the output) read the zero point; rows past `K` are zero (their weights are
//! zero). int8 activations are flipped to uint8 (`x ^ 0x80 = x + 128`).

use super::{Dims, NR, QConvParams};
use std::mem::MaybeUninit;

/// What a packer packs: the positions `p0 .. p0 + lanes` of the group whose first input
/// plane is at `x`, of the convolution `p` (its extents `d`).
#[derive(Copy, Clone)]
pub(super) struct Panel<'a> {
    pub p: &'a QConvParams<'a>,
    pub d: &'a Dims,
    pub x: *const u8,
    pub p0: usize,
    pub lanes: usize,
}

/// Fills `panel` (`k4 · 4 · NR` bytes) with the positions of `q`.
///
/// # Safety
/// `q.x` points to the group's `cg` input planes.
pub(super) unsafe fn pack_panel(q: Panel, panel: &mut [u8]) {
    let Panel { p, d, x, p0, lanes } = q;
    let g = &p.conv;
    let nsp = g.input.len();
    let zx = p.q.x_zp as u8;
    let flip = if p.q.x_signed { 0x80u8 } else { 0 };
    if in_place(p, lanes) {
        let zero = [0u8; NR];
        for k4 in 0..d.k4 {
            let src: [*const u8; 4] = std::array::from_fn(|j| {
                let k = k4 * 4 + j;
                if k < d.k {
                    // SAFETY: channel k's plane holds the panel's positions (the output
                    // positions are the input's).
                    unsafe { x.add(k * d.isize + p0) }
                } else {
                    zero.as_ptr()
                }
            });
            // Rows past K must stay zero: flip only real rows.
            let flips: [u8; 4] = std::array::from_fn(|j| if k4 * 4 + j < d.k { flip } else { 0 });
            // SAFETY: each source holds NR bytes.
            unsafe { interleave(src, flips, &mut panel[k4 * 4 * NR..(k4 + 1) * 4 * NR]) };
        }
        return;
    }
    // SAFETY: forwarded (caller).
    if unsafe { pack_panel_spans(q, panel) } {
        return;
    }
    let last = nsp - 1;
    let mut run_table = run_table();
    let runs = runs(p, p0, lanes, &mut run_table);
    let mut rows = [[0u8; NR]; 4];
    // Row k's channel and tap (its offset from tap 0 per dim, dilated), advanced as an
    // odometer from k = 0.
    let mut c = 0usize;
    let mut tapc = [0i64; crate::conv::MAX_SPATIAL];
    let mut toff = [0i64; crate::conv::MAX_SPATIAL];
    for k4 in 0..d.k4 {
        for (j, row) in rows.iter_mut().enumerate() {
            let k = k4 * 4 + j;
            if k >= d.k {
                *row = [0; NR];
                continue;
            }
            if k > 0 {
                let mut dd = nsp;
                loop {
                    if dd == 0 {
                        c += 1;
                        break;
                    }
                    dd -= 1;
                    tapc[dd] += 1;
                    if tapc[dd] < g.kernel[dd] {
                        toff[dd] = tapc[dd] * g.dilations[dd];
                        break;
                    }
                    tapc[dd] = 0;
                    toff[dd] = 0;
                }
            }
            row.fill(zx);
            // SAFETY: plane `c` of the group lies at `x`.
            let plane = unsafe { x.add(c * d.isize) };
            for &(l0, len, ref oc) in runs {
                // The input row this run reads: every dim but the last, inside the input.
                let mut off = 0usize;
                let mut inside = true;
                for dd in 0..last {
                    let i = oc[dd] + toff[dd];
                    if i < 0 || i >= g.input[dd] {
                        inside = false;
                        break;
                    }
                    off = off * g.input[dd] as usize + i as usize;
                }
                if !inside {
                    continue;
                }
                let iw = g.input[last];
                let (s, start) = (g.strides[last], oc[last] + toff[last]);
                // Lanes whose input column is inside: start + s·t in [0, iw).
                let t0 = if start < 0 { (-start + s - 1) / s } else { 0 };
                let t1 = if start >= iw {
                    0
                } else {
                    (((iw - 1 - start) / s) + 1).min(len as i64)
                };
                if t0 >= t1 {
                    continue;
                }
                let base = off * iw as usize;
                let dst = &mut row[l0 + t0 as usize..l0 + t1 as usize];
                if s == 1 {
                    let from = (base as i64 + start + t0) as usize;
                    // SAFETY: columns start + t0 .. start + t1 lie inside the input row.
                    let src = unsafe { std::slice::from_raw_parts(plane.add(from), dst.len()) };
                    copy_short(dst, src);
                } else {
                    for (t, v) in dst.iter_mut().enumerate() {
                        let col = start + (t0 + t as i64) * s;
                        // SAFETY: col lies inside the input row (t0 ≤ t < t1).
                        *v = unsafe { *plane.add(base + col as usize) };
                    }
                }
            }
        }
        let flips: [u8; 4] = std::array::from_fn(|j| if k4 * 4 + j < d.k { flip } else { 0 });
        let src: [*const u8; 4] = std::array::from_fn(|j| rows[j].as_ptr());
        // SAFETY: each row holds NR bytes.
        unsafe { interleave(src, flips, &mut panel[k4 * 4 * NR..(k4 + 1) * 4 * NR]) };
    }
}

/// Pointwise, unit strides, no padding, a whole panel: row k is channel k's input at the
/// panel's positions, read in place.
fn in_place(p: &QConvParams, lanes: usize) -> bool {
    let g = &p.conv;
    lanes == NR
        && g.kernel.iter().all(|&v| v == 1)
        && g.strides.iter().all(|&v| v == 1)
        && g.pads.iter().all(|&v| v == 0)
}

/// `out[l·4 + j] = rows[j][l] ^ flips[j]`.
///
/// # Safety
/// Each of `rows` points to `NR` readable bytes.
unsafe fn interleave(rows: [*const u8; 4], flips: [u8; 4], out: &mut [u8]) {
    assert!(out.len() == 4 * NR);
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of x86-64; the loads read the rows' NR bytes (caller), the
        // stores write inside `out` (NR = 32: two 16-byte halves, four 16-byte stores each).
        unsafe {
            for h in 0..NR / 16 {
                let ld = |j: usize| {
                    _mm_xor_si128(
                        _mm_loadu_si128(rows[j].add(h * 16) as *const __m128i),
                        _mm_set1_epi8(flips[j] as i8),
                    )
                };
                let (a, b, c, e) = (ld(0), ld(1), ld(2), ld(3));
                let ab_lo = _mm_unpacklo_epi8(a, b);
                let ab_hi = _mm_unpackhi_epi8(a, b);
                let ce_lo = _mm_unpacklo_epi8(c, e);
                let ce_hi = _mm_unpackhi_epi8(c, e);
                let o = out.as_mut_ptr().add(h * 64) as *mut __m128i;
                _mm_storeu_si128(o, _mm_unpacklo_epi16(ab_lo, ce_lo));
                _mm_storeu_si128(o.add(1), _mm_unpackhi_epi16(ab_lo, ce_lo));
                _mm_storeu_si128(o.add(2), _mm_unpacklo_epi16(ab_hi, ce_hi));
                _mm_storeu_si128(o.add(3), _mm_unpackhi_epi16(ab_hi, ce_hi));
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    for l in 0..NR {
        for j in 0..4 {
            // SAFETY: l < NR bytes of row j (caller).
            out[l * 4 + j] = unsafe { *rows[j].add(l) } ^ flips[j];
        }
    }
}

/// Most (tap, run) pairs the span packers tabulate per panel.
const MAX_TAP_RUNS: usize = 1024;

/// What one tap reads for one run of a panel: lanes `first .. first + count` read the
/// plane at `base + sw · lane` (`sw` the last dim's stride); the other lanes of the run are
/// padding. `base` is a plane offset taken with wrapping arithmetic: only the span's lanes
/// address the plane.
#[derive(Copy, Clone)]
struct Span {
    first: usize,
    count: usize,
    base: isize,
}

/// The spans of every tap (tap-major, `nruns` per tap) of the panel `p0 .. p0 + lanes`,
/// into `table`; the number of runs, or `None` when there are more than `MAX_TAP_RUNS`.
fn spans<'t>(
    p: &QConvParams,
    d: &Dims,
    p0: usize,
    lanes: usize,
    table: &'t mut SpanTable,
) -> Option<(usize, &'t [Span])> {
    let g = &p.conv;
    let nsp = g.input.len();
    let last = nsp - 1;
    let taps = d.k / d.cg.max(1);
    let sw = g.strides[last];
    let mut run_table = run_table();
    let runs = runs(p, p0, lanes, &mut run_table);
    let nruns = runs.len();
    if d.cg == 0 || taps * nruns > MAX_TAP_RUNS {
        return None;
    }
    let mut tapc = [0i64; crate::conv::MAX_SPATIAL];
    for t in 0..taps {
        if t > 0 {
            let mut dd = nsp;
            while dd > 0 {
                dd -= 1;
                tapc[dd] += 1;
                if tapc[dd] < g.kernel[dd] {
                    break;
                }
                tapc[dd] = 0;
            }
        }
        for (r, &(l0, len, ref oc)) in runs.iter().enumerate() {
            let mut off = 0i64;
            let mut inside = true;
            for dd in 0..last {
                let i = oc[dd] + tapc[dd] * g.dilations[dd];
                if i < 0 || i >= g.input[dd] {
                    inside = false;
                    break;
                }
                off = off * g.input[dd] + i;
            }
            let iw = g.input[last];
            let start = oc[last] + tapc[last] * g.dilations[last];
            // Lanes t0 .. t1 of the run read columns start + sw·t, inside [0, iw).
            let t0 = if start < 0 { (-start + sw - 1) / sw } else { 0 }.min(len as i64);
            let t1 = if iw - 1 - start < 0 {
                0
            } else {
                (iw - 1 - start) / sw + 1
            }
            .clamp(t0, len as i64);
            table[t * nruns + r].write(Span {
                first: l0 + t0 as usize,
                count: if inside { (t1 - t0) as usize } else { 0 },
                base: (off * iw + start - sw * l0 as i64) as isize,
            });
        }
    }
    // SAFETY: the loops above wrote entries t · nruns + r for every t < taps, r < nruns:
    // the first taps · nruns.
    let written = unsafe { assume_init(&table[..taps * nruns]) };
    Some((nruns, written))
}

/// The span table of one panel, left uninitialized (`spans` writes the entries it returns;
/// zeroing all `MAX_TAP_RUNS` of them cost more than packing a pointwise panel).
type SpanTable = [MaybeUninit<Span>; MAX_TAP_RUNS];

impl Panel<'_> {
    /// The panel's spans (`spans`), written into `table`.
    #[inline(always)]
    fn spans<'t>(&self, table: &'t mut SpanTable) -> Option<(usize, &'t [Span])> {
        spans(self.p, self.d, self.p0, self.lanes, table)
    }
}

const fn span_table() -> SpanTable {
    [const { MaybeUninit::uninit() }; MAX_TAP_RUNS]
}

/// `slice` as initialized values.
///
/// # Safety
/// Every element of `slice` was written.
unsafe fn assume_init<T>(slice: &[MaybeUninit<T>]) -> &[T] {
    // SAFETY: `MaybeUninit<T>` has `T`'s layout; the elements are initialized (caller).
    unsafe { std::slice::from_raw_parts(slice.as_ptr() as *const T, slice.len()) }
}

/// Builds the panel row by row: `row(buf, c, t)` writes the unflipped row of channel `c`
/// and tap `t` of the group into `buf`; rows are flipped (int8 activations) and
/// interleaved here, rows past K are zero.
#[inline(always)]
fn build_rows(
    p: &QConvParams,
    d: &Dims,
    panel: &mut [u8],
    mut row: impl FnMut(&mut [u8; NR], usize, usize),
) {
    let taps = d.k / d.cg;
    let flip = if p.q.x_signed { 0x80u8 } else { 0 };
    let mut rows = [[0u8; NR]; 4];
    let (mut c, mut t) = (0usize, 0usize);
    for k4 in 0..d.k4 {
        for (j, buf) in rows.iter_mut().enumerate() {
            if k4 * 4 + j >= d.k {
                *buf = [0; NR];
                continue;
            }
            row(buf, c, t);
            t += 1;
            if t == taps {
                t = 0;
                c += 1;
            }
        }
        let flips: [u8; 4] = std::array::from_fn(|j| if k4 * 4 + j < d.k { flip } else { 0 });
        let src: [*const u8; 4] = std::array::from_fn(|j| rows[j].as_ptr());
        // SAFETY: each row holds NR bytes.
        unsafe { interleave(src, flips, &mut panel[k4 * 4 * NR..(k4 + 1) * 4 * NR]) };
    }
}

/// `pack_panel` from the panel's span table: each row is the zero point with one copy per
/// span over it. Returns false (nothing written) when the table does not fit.
///
/// # Safety
/// As `pack_panel`.
unsafe fn pack_panel_spans(q: Panel, panel: &mut [u8]) -> bool {
    let Panel { p, d, x, .. } = q;
    let mut spans_of = span_table();
    let Some((nruns, table)) = q.spans(&mut spans_of) else {
        return false;
    };
    let sw = p.conv.strides[p.conv.input.len() - 1] as isize;
    let zx = p.q.x_zp as u8;
    build_rows(p, d, panel, |row, c, t| {
        row.fill(zx);
        let plane = x.wrapping_add(c * d.isize);
        for s in &table[t * nruns..(t + 1) * nruns] {
            if s.count == 0 {
                continue;
            }
            let dst = &mut row[s.first..s.first + s.count];
            let at = plane.wrapping_offset(s.base + sw * s.first as isize);
            if sw == 1 {
                // SAFETY: the span's columns lie inside an input row of the plane
                // (tabulated by `spans`).
                copy_short(dst, unsafe { std::slice::from_raw_parts(at, s.count) });
            } else {
                for (i, v) in dst.iter_mut().enumerate() {
                    // SAFETY: as above, lane by lane.
                    *v = unsafe { *at.wrapping_offset(sw * i as isize) };
                }
            }
        }
    });
    true
}

/// `pack_panel` with AVX2, for convolutions with unit stride along the last dim: a span is
/// one 32-byte load from its lane 0's address, blended into the row over the span's lanes,
/// when those 32 bytes lie inside the input tensor `tensor` (an address range); spans at
/// the tensor's ends are copied. Returns false (nothing written) for other convolutions,
/// and for panels `pack_panel` reads in place.
///
/// # Safety
/// As `pack_panel`; the CPU has AVX2; `tensor` lies inside the input tensor's allocation.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn pack_panel_avx2(
    q: Panel,
    panel: &mut [u8],
    tensor: std::ops::Range<usize>,
) -> bool {
    use std::arch::x86_64::*;
    let Panel { p, d, x, lanes, .. } = q;
    if p.conv.strides[p.conv.input.len() - 1] != 1 || in_place(p, lanes) {
        return false;
    }
    let mut spans_of = span_table();
    let Some((nruns, table)) = q.spans(&mut spans_of) else {
        return false;
    };
    let zxv = _mm256_set1_epi8(p.q.x_zp as u8 as i8);
    let lane = _mm256_setr_epi8(
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
        25, 26, 27, 28, 29, 30, 31,
    );
    build_rows(p, d, panel, |row, c, t| {
        let plane = x.wrapping_add(c * d.isize);
        let mut v = zxv;
        for s in &table[t * nruns..(t + 1) * nruns] {
            if s.count == 0 {
                continue;
            }
            let at = plane.wrapping_offset(s.base);
            let addr = at as usize;
            if addr >= tensor.start && addr.wrapping_add(32) <= tensor.end {
                // Lanes first .. first + count (≤ 32, so the byte compares are exact).
                let inside = _mm256_andnot_si256(
                    _mm256_cmpgt_epi8(_mm256_set1_epi8(s.first as i8), lane),
                    _mm256_cmpgt_epi8(_mm256_set1_epi8((s.first + s.count) as i8), lane),
                );
                // SAFETY: the 32 bytes from `at` lie inside the input tensor (checked).
                let ld = unsafe { _mm256_loadu_si256(at as *const __m256i) };
                v = _mm256_blendv_epi8(v, ld, inside);
            } else {
                // SAFETY: the row holds 32 bytes; the span's columns lie inside an input row
                // of the plane (tabulated by `spans`).
                unsafe {
                    _mm256_storeu_si256(row.as_mut_ptr() as *mut __m256i, v);
                    let src = std::slice::from_raw_parts(at.wrapping_add(s.first), s.count);
                    copy_short(&mut row[s.first..s.first + s.count], src);
                    v = _mm256_loadu_si256(row.as_ptr() as *const __m256i);
                }
            }
        }
        // SAFETY: the row holds 32 bytes.
        unsafe { _mm256_storeu_si256(row.as_mut_ptr() as *mut __m256i, v) };
    });
    true
}

/// `pack_panel` with AVX-512 masked loads, for convolutions with stride 1 or 2 along the
/// last dim: each span is one masked load (masked-off bytes are not read; at stride 2 a
/// 64-byte load whose even bytes are kept). With `vbmi` (the CPU has AVX-512 VBMI) the rows
/// stay in registers and four at a time are interleaved by two byte permutes, and panels
/// read in place are packed that way too. Returns false (nothing written) for other
/// convolutions, and without `vbmi` for panels `pack_panel` reads in place.
///
/// # Safety
/// As `pack_panel`; the CPU has AVX-512 F, BW and VL, and VBMI if `vbmi`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(super) unsafe fn pack_panel_avx512(q: Panel, panel: &mut [u8], vbmi: bool) -> bool {
    use std::arch::x86_64::*;
    let Panel { p, d, x, p0, lanes } = q;
    let sw = p.conv.strides[p.conv.input.len() - 1];
    if in_place(p, lanes) && vbmi {
        // SAFETY: each real row k is channel k's plane from the panel's first position,
        // which holds NR more bytes (the output positions are the input's); the CPU has
        // VBMI (caller).
        unsafe {
            build_rows_vbmi(p, d, panel, |c, _| {
                _mm256_loadu_si256(x.add(c * d.isize + p0) as *const __m256i)
            })
        };
        return true;
    }
    if !(sw == 1 || sw == 2) || in_place(p, lanes) {
        return false;
    }
    let mut spans_of = span_table();
    let Some((nruns, spans_of)) = q.spans(&mut spans_of) else {
        return false;
    };
    // table[t · nruns + r]: the lanes of span (t, r), the bytes of a load from the plane
    // offset of lane 0 (at stride 2, lane l is byte 2l of a 64-byte load), and that offset.
    let mut table = [const { MaybeUninit::<(u32, u64, isize)>::uninit() }; MAX_TAP_RUNS];
    for (e, s) in table.iter_mut().zip(spans_of) {
        let lanes = if s.count == 0 {
            0
        } else {
            ((1u64 << s.count) - 1) << s.first
        };
        let bytes = if sw == 1 {
            lanes
        } else {
            (0..NR)
                .filter(|l| lanes >> l & 1 != 0)
                .fold(0u64, |m, l| m | 1 << (2 * l))
        };
        e.write((lanes as u32, bytes, s.base));
    }
    // SAFETY: the loop wrote as many entries as `spans` returned.
    let table = unsafe { assume_init(&table[..spans_of.len()]) };
    let zxv = _mm256_set1_epi8(p.q.x_zp as u8 as i8);
    let row = |c: usize, t: usize| {
        // The plane of channel c; spans are addressed from it with wrapping arithmetic (an
        // address may lie before the plane; only the masked lanes are read, and those lie
        // inside it).
        let plane = x.wrapping_add(c * d.isize);
        let mut v = zxv;
        for &(mask, bytes, off) in &table[t * nruns..(t + 1) * nruns] {
            if mask == 0 {
                continue;
            }
            let at = plane.wrapping_offset(off) as *const i8;
            // SAFETY: the unmasked bytes are columns inside the input row of an input plane
            // (tabulated above).
            v = unsafe {
                if sw == 1 {
                    _mm256_mask_loadu_epi8(v, mask, at)
                } else {
                    let even = _mm512_cvtepi16_epi8(_mm512_maskz_loadu_epi8(bytes, at));
                    _mm256_mask_blend_epi8(mask, v, even)
                }
            };
        }
        v
    };
    if vbmi {
        // SAFETY: the CPU has VBMI (caller).
        unsafe { build_rows_vbmi(p, d, panel, row) };
    } else {
        build_rows(p, d, panel, |buf, c, t| {
            // SAFETY: the row holds 32 bytes.
            unsafe { _mm256_storeu_si256(buf.as_mut_ptr() as *mut __m256i, row(c, t)) };
        });
    }
    true
}

/// `build_rows` with the rows in registers: `row(c, t)` is the unflipped row of channel `c`
/// and tap `t`; four rows at a time are flipped and interleaved into the panel by two
/// two-source byte permutes (`out[l·4 + j] = rows[j][l]`).
///
/// # Safety
/// The CPU has AVX-512 F, BW, VL and VBMI; `panel` holds `k4 · 4 · NR` bytes.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi")]
unsafe fn build_rows_vbmi(
    p: &QConvParams,
    d: &Dims,
    panel: &mut [u8],
    mut row: impl FnMut(usize, usize) -> std::arch::x86_64::__m256i,
) {
    use std::arch::x86_64::*;
    assert!(panel.len() >= d.k4 * 4 * NR && NR == 32);
    // Byte b of output half h is row b % 4's lane 16h + b / 4: byte (b % 4)·32 + 16h + b / 4
    // of the rows laid end to end (rows 0 and 1 in the first source, 2 and 3 in the second).
    const IDX: [[u8; 64]; 2] = {
        let mut t = [[0u8; 64]; 2];
        let mut h = 0;
        while h < 2 {
            let mut b = 0;
            while b < 64 {
                t[h][b] = ((b % 4) * 32 + 16 * h + b / 4) as u8;
                b += 1;
            }
            h += 1;
        }
        t
    };
    // No closures here (`array::from_fn`, `map`): compiled apart from this function they
    // were calls per row on some builds, a quarter of a 3×3 convolution's time.
    // SAFETY: the tables hold 64 bytes each.
    let idx = unsafe {
        [
            _mm512_loadu_si512(IDX[0].as_ptr() as *const _),
            _mm512_loadu_si512(IDX[1].as_ptr() as *const _),
        ]
    };
    let taps = d.k / d.cg;
    let flip = _mm256_set1_epi8(if p.q.x_signed { 0x80u8 as i8 } else { 0 });
    let (mut c, mut t) = (0usize, 0usize);
    for k4 in 0..d.k4 {
        // Rows past K stay zero (their weights are zero).
        let mut rows = [_mm256_setzero_si256(); 4];
        for (j, r) in rows.iter_mut().enumerate() {
            if k4 * 4 + j < d.k {
                *r = _mm256_xor_si256(row(c, t), flip);
                t += 1;
                if t == taps {
                    t = 0;
                    c += 1;
                }
            }
        }
        let a = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(rows[0]), rows[1]);
        let b = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(rows[2]), rows[3]);
        // SAFETY: group k4 of the panel holds 4 · NR = 128 bytes (checked above).
        unsafe {
            let out = panel.as_mut_ptr().add(k4 * 4 * NR);
            _mm512_storeu_si512(out as *mut _, _mm512_permutex2var_epi8(a, idx[0], b));
            _mm512_storeu_si512(
                out.add(64) as *mut _,
                _mm512_permutex2var_epi8(a, idx[1], b),
            );
        }
    }
}

/// A run of a panel: first lane, lanes, input coordinate of tap 0 per dim.
type Run = (usize, usize, [i64; crate::conv::MAX_SPATIAL]);

/// Room for a panel's runs, left uninitialized (`runs` writes those it returns; zeroing
/// and moving the 2.5 KB table cost a few percent of a convolution with small panels).
type RunTable = [MaybeUninit<Run>; NR];

const fn run_table() -> RunTable {
    [const { MaybeUninit::uninit() }; NR]
}

/// The runs of a panel, one for each stretch of consecutive outputs along the last dim,
/// written into `table`.
fn runs<'t>(p: &QConvParams, p0: usize, lanes: usize, table: &'t mut RunTable) -> &'t [Run] {
    let g = &p.conv;
    let nsp = g.input.len();
    let last = nsp - 1;
    let ow = g.output[last] as usize;
    let mut nruns = 0;
    let mut lane = 0;
    while lane < lanes {
        let mut coord = [0i64; crate::conv::MAX_SPATIAL];
        let mut rest = p0 + lane;
        for dd in (0..nsp).rev() {
            let e = g.output[dd] as usize;
            coord[dd] = (rest % e) as i64;
            rest /= e;
        }
        let len = (ow - coord[last] as usize).min(lanes - lane);
        for (dd, v) in coord.iter_mut().enumerate().take(nsp) {
            *v = *v * g.strides[dd] - g.pads[dd];
        }
        table[nruns].write((lane, len, coord));
        nruns += 1;
        lane += len;
    }
    // SAFETY: the loop wrote the first `nruns` entries (at most one per lane, so at most NR).
    unsafe { assume_init(&table[..nruns]) }
}

/// `dst.copy_from_slice(src)` for at most `NR` bytes, without a call to `memmove`.
#[inline(always)]
fn copy_short(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    let (mut i, dst, src) = (0, &mut dst[..n], &src[..n]);
    while i + 8 <= n {
        dst[i..i + 8].copy_from_slice(&src[i..i + 8]);
        i += 8;
    }
    while i < n {
        dst[i] = src[i];
        i += 1;
    }
}

/// `colsum[l] = Σ_k panel[k][l]` (rows past K are zero).
pub(super) fn column_sums(panel: &[u8], k4: usize, colsum: &mut [i32; NR]) {
    *colsum = [0; NR];
    for g in panel[..k4 * 4 * NR].chunks_exact(4 * NR) {
        for (l, s) in colsum.iter_mut().enumerate() {
            let b = &g[l * 4..l * 4 + 4];
            *s += b[0] as i32 + b[1] as i32 + b[2] as i32 + b[3] as i32;
        }
    }
}
