//! Winograd F(4×4, 3×3): each 4×4 output tile comes from a 6×6 input tile through 36
//! elementwise products (interpolation points 0, ±1, ±2, ∞) — 4× fewer multiplies than direct
//! convolution, against 2.25× for F(2×2, 3×3), at the price of 36/16 more transformed weights
//! and costlier transforms. Used for maps of 20×20 and more (`Variant::F4`); AVX-512, AVX2
//! and portable transforms.
//!
//! Matrices (checked against direct correlation in the tests):
//! Bᵀ = [[4,0,-5,0,1,0],[0,-4,-4,1,1,0],[0,4,-4,-1,1,0],[0,-2,-1,2,1,0],[0,2,-1,-2,1,0],
//! [0,4,0,-5,0,1]], G = [[¼,0,0],[-⅙,-⅙,-⅙],[-⅙,⅙,-⅙],[1/24,1/12,⅙],[1/24,-1/12,⅙],[0,0,1]],
//! Aᵀ = [[1,1,1,1,1,0],[0,1,-1,2,-2,0],[0,1,1,4,4,0],[0,1,-1,8,-8,1]].

use crate::gemm::NR;

/// `U = G g Gᵀ` (6×6) of one 3×3 kernel, computed in f64.
pub(super) fn transform_kernel(g: &[f32; 9]) -> [f32; 36] {
    const G: [[f64; 3]; 6] = [
        [0.25, 0.0, 0.0],
        [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
        [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
        [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
        [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
        [0.0, 0.0, 1.0],
    ];
    let mut t = [[0f64; 3]; 6]; // G g
    for (r, tr) in t.iter_mut().enumerate() {
        for (c, v) in tr.iter_mut().enumerate() {
            *v = (0..3).map(|k| G[r][k] * g[k * 3 + c] as f64).sum();
        }
    }
    let mut u = [0f32; 36]; // (G g) Gᵀ
    for r in 0..6 {
        for c in 0..6 {
            u[r * 6 + c] = (0..3).map(|k| t[r][k] * G[c][k]).sum::<f64>() as f32;
        }
    }
    u
}

/// Bᵀ applied to one column of six values (generic over scalars and vectors).
#[inline(always)]
fn bt<T: Copy>(
    d: [T; 6],
    add: impl Fn(T, T) -> T,
    sub: impl Fn(T, T) -> T,
    // a·x + y
    fma: impl Fn(f32, T, T) -> T,
) -> [T; 6] {
    let a = fma(-4.0, d[2], d[4]);
    let b = fma(-4.0, d[1], d[3]);
    let c = sub(d[4], d[2]);
    let e = sub(d[3], d[1]);
    [
        fma(4.0, d[0], fma(-5.0, d[2], d[4])),
        add(a, b),
        sub(a, b),
        fma(2.0, e, c),
        fma(-2.0, e, c),
        fma(4.0, d[1], fma(-5.0, d[3], d[5])),
    ]
}

/// Aᵀ applied to one column of six products.
#[inline(always)]
fn at<T: Copy>(
    m: [T; 6],
    add: impl Fn(T, T) -> T,
    sub: impl Fn(T, T) -> T,
    fma: impl Fn(f32, T, T) -> T,
) -> [T; 4] {
    let s1 = add(m[1], m[2]);
    let d1 = sub(m[1], m[2]);
    let s2 = add(m[3], m[4]);
    let d2 = sub(m[3], m[4]);
    [
        add(add(m[0], s1), s2),
        fma(2.0, d2, d1),
        fma(4.0, s2, s1),
        add(fma(8.0, d2, d1), m[5]),
    ]
}

fn transform_input(d: &[[f32; 6]; 6]) -> [f32; 36] {
    let (add, sub, fma) = (
        |a: f32, b: f32| a + b,
        |a: f32, b: f32| a - b,
        |k: f32, a: f32, b: f32| k * a + b,
    );
    let mut t = [[0f32; 6]; 6];
    for c in 0..6 {
        let col = bt(std::array::from_fn(|r| d[r][c]), add, sub, fma);
        for r in 0..6 {
            t[r][c] = col[r];
        }
    }
    let mut v = [0f32; 36];
    for r in 0..6 {
        v[r * 6..r * 6 + 6].copy_from_slice(&bt(t[r], add, sub, fma));
    }
    v
}

fn transform_output(m: &[f32; 36]) -> [[f32; 4]; 4] {
    let (add, sub, fma) = (
        |a: f32, b: f32| a + b,
        |a: f32, b: f32| a - b,
        |k: f32, a: f32, b: f32| k * a + b,
    );
    let mut t = [[0f32; 6]; 4];
    for c in 0..6 {
        let col = at(std::array::from_fn(|r| m[r * 6 + c]), add, sub, fma);
        for r in 0..4 {
            t[r][c] = col[r];
        }
    }
    std::array::from_fn(|r| at(t[r], add, sub, fma))
}

/// Input transform of one panel (tiles `t0..t0+16` in row-major order over `tw` tile columns,
/// `tw` a multiple of 8 so each half of 8 tiles lies in one tile row) of one channel plane
/// into the 36 B matrices: `vbuf + ξ·bsz + off` gets the panel's 16 values.
///
/// # Safety
/// `plane` is an ih × iw plane; the 36 destinations are inside their B matrices.
#[allow(clippy::too_many_arguments, reason = "tile coordinates")]
pub(super) unsafe fn input_panel(
    plane: *const f32,
    ih: i64,
    iw: i64,
    ph: i64,
    pw: i64,
    t0: usize,
    tw: usize,
    vbuf: *mut f32,
    bsz: usize,
    off: usize,
) {
    debug_assert!(tw.is_multiple_of(8) && t0.is_multiple_of(8));
    #[cfg(target_arch = "x86_64")]
    if crate::isa::avx512() {
        // SAFETY: forwarded; AVX-512 detected.
        unsafe { avx512::input_panel(plane, ih, iw, ph, pw, t0, tw, vbuf, bsz, off) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if crate::isa::avx2() {
        for h in 0..2 {
            // SAFETY: forwarded; AVX2 detected; each half of 8 tiles lies in one tile row.
            unsafe {
                avx2::input_half(
                    plane,
                    ih,
                    iw,
                    ph,
                    pw,
                    t0 + 8 * h,
                    tw,
                    vbuf,
                    bsz,
                    off + 8 * h,
                )
            };
        }
        return;
    }
    for j in 0..NR {
        let (ty, tx) = ((t0 + j) / tw, (t0 + j) % tw);
        let (y0, x0) = (4 * ty as i64 - ph, 4 * tx as i64 - pw);
        let mut d = [[0f32; 6]; 6];
        for (r, dr) in d.iter_mut().enumerate() {
            let yy = y0 + r as i64;
            for (cc, dv) in dr.iter_mut().enumerate() {
                let xx = x0 + cc as i64;
                if yy >= 0 && yy < ih && xx >= 0 && xx < iw {
                    // SAFETY: (yy, xx) inside the plane.
                    *dv = unsafe { *plane.add((yy * iw + xx) as usize) };
                }
            }
        }
        for (xi, v) in transform_input(&d).iter().enumerate() {
            // SAFETY: lane j of panel destination ξ.
            unsafe { *vbuf.add(xi * bsz + off + j) = *v };
        }
    }
}

/// Output transform of one panel (tiles `t0..t0+16`, as for `input_panel`) of one output
/// channel: the 36 product vectors at `mrow + ξ·stride` become the 4×4 outputs of 16 tiles,
/// with the epilogue.
///
/// # Safety
/// Products and output/residual planes in bounds; stores are cropped to oh × ow.
#[allow(clippy::too_many_arguments, reason = "tile coordinates")]
pub(super) unsafe fn output_panel(
    mrow: *const f32,
    stride: usize,
    t0: usize,
    tw: usize,
    oh: usize,
    ow: usize,
    out: *mut f32,
    resid: *const f32,
    bias: f32,
    lo: f32,
    hi: f32,
) {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::avx512() {
        // SAFETY: forwarded; AVX-512 detected.
        unsafe { avx512::output_panel(mrow, stride, t0, tw, oh, ow, out, resid, bias, lo, hi) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if crate::isa::avx2() {
        for h in 0..2 {
            // SAFETY: forwarded; AVX2 detected; each half of 8 tiles lies in one tile row.
            unsafe {
                avx2::output_half(
                    mrow.add(8 * h),
                    stride,
                    t0 + 8 * h,
                    tw,
                    oh,
                    ow,
                    out,
                    resid,
                    bias,
                    lo,
                    hi,
                )
            };
        }
        return;
    }
    for j in 0..NR {
        let (ty, tx) = ((t0 + j) / tw, (t0 + j) % tw);
        let mut mv = [0f32; 36];
        for (xi, v) in mv.iter_mut().enumerate() {
            // SAFETY: product lane j of ξ.
            *v = unsafe { *mrow.add(xi * stride + j) };
        }
        let y = transform_output(&mv);
        for (r, row) in y.iter().enumerate() {
            let oy = 4 * ty + r;
            for (cc, val) in row.iter().enumerate() {
                let ox = 4 * tx + cc;
                if oy < oh && ox < ow {
                    let o = oy * ow + ox;
                    let rv = if resid.is_null() {
                        0.0
                    } else {
                        // SAFETY: inside the residual plane.
                        unsafe { *resid.add(o) }
                    };
                    // SAFETY: inside the output plane.
                    unsafe { *out.add(o) = crate::clamp_ep(val + bias + rv, lo, hi) };
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    /// Lanes of a 16-wide load starting at column `x` that lie inside `[0, w)`.
    #[inline(always)]
    fn col_mask(x: i64, w: i64) -> __mmask16 {
        let a = (-x).clamp(0, 16) as u32;
        let b = (w - x).clamp(a as i64, 16) as u32;
        ((((1u64 << b) - 1) as u32) & !((1u32 << a) - 1)) as __mmask16
    }

    /// add, sub and k·a + b for `super::bt`/`super::at`.
    #[inline(always)]
    #[allow(clippy::type_complexity, reason = "three closure types")]
    fn ops() -> (
        impl Fn(__m512, __m512) -> __m512 + Copy,
        impl Fn(__m512, __m512) -> __m512 + Copy,
        impl Fn(f32, __m512, __m512) -> __m512 + Copy,
    ) {
        // SAFETY (all three): AVX-512F is enabled in every caller.
        (
            |a, b| unsafe { _mm512_add_ps(a, b) },
            |a, b| unsafe { _mm512_sub_ps(a, b) },
            |k, a, b| unsafe { _mm512_fmadd_ps(_mm512_set1_ps(k), a, b) },
        )
    }

    /// See `super::input_panel`. Each half of 8 tiles (one tile row, 34 input columns) is
    /// read as three masked 16-column loads per input row and spread over the lanes of its
    /// half with two-source permutes: column c of tile j is lane j of `4j + c`.
    ///
    /// # Safety
    /// As `super::input_panel`; AVX-512F available.
    #[target_feature(enable = "avx512f,fma")]
    #[allow(clippy::too_many_arguments, reason = "tile coordinates")]
    pub unsafe fn input_panel(
        plane: *const f32,
        ih: i64,
        iw: i64,
        ph: i64,
        pw: i64,
        t0: usize,
        tw: usize,
        vbuf: *mut f32,
        bsz: usize,
        off: usize,
    ) {
        let mut d = [[_mm512_setzero_ps(); 6]; 6];
        for h in 0..2 {
            let t = t0 + 8 * h;
            let (ty, tx) = (t / tw, t % tw);
            let y0 = 4 * ty as i64 - ph;
            let x0 = 4 * tx as i64 - pw;
            // idx[c]: lane 8h + j reads column 4j + c of the (a, b) pair.
            let idx: [__m512i; 4] = std::array::from_fn(|c| {
                let v: [i32; 16] = std::array::from_fn(|l| {
                    if l / 8 == h {
                        (4 * (l % 8) + c) as i32
                    } else {
                        0
                    }
                });
                // SAFETY: 16 i32 lanes.
                unsafe { _mm512_loadu_si512(v.as_ptr().cast()) }
            });
            let keep: __mmask16 = if h == 0 { 0x00FF } else { 0xFF00 };
            let (m0, m1, m2) = (
                col_mask(x0, iw),
                col_mask(x0 + 16, iw),
                col_mask(x0 + 32, iw),
            );
            for (r, dr) in d.iter_mut().enumerate() {
                let yy = y0 + r as i64;
                if yy < 0 || yy >= ih {
                    for v in dr.iter_mut() {
                        *v = _mm512_maskz_mov_ps(!keep, *v);
                    }
                    continue;
                }
                // SAFETY: masked lanes lie inside row yy; masked-off lanes are not accessed
                // (the row pointer may lie outside the plane: wrapping arithmetic).
                unsafe {
                    let row = plane.wrapping_offset((yy * iw + x0) as isize);
                    let a = _mm512_maskz_loadu_ps(m0, row);
                    let b = _mm512_maskz_loadu_ps(m1, row.wrapping_add(16));
                    let c = _mm512_maskz_loadu_ps(m2, row.wrapping_add(32));
                    // Shifted by four columns: [x0+4, x0+36).
                    let a4 = _mm512_castsi512_ps(_mm512_alignr_epi32::<4>(
                        _mm512_castps_si512(b),
                        _mm512_castps_si512(a),
                    ));
                    let b4 = _mm512_castsi512_ps(_mm512_alignr_epi32::<4>(
                        _mm512_castps_si512(c),
                        _mm512_castps_si512(b),
                    ));
                    for cc in 0..6 {
                        let v = if cc < 4 {
                            _mm512_permutex2var_ps(a, idx[cc], b)
                        } else {
                            _mm512_permutex2var_ps(a4, idx[cc - 4], b4)
                        };
                        dr[cc] = _mm512_mask_mov_ps(dr[cc], keep, v);
                    }
                }
            }
        }
        let (add, sub, fma) = ops();
        let mut t = [[_mm512_setzero_ps(); 6]; 6];
        for c in 0..6 {
            let col = super::bt(std::array::from_fn(|r| d[r][c]), add, sub, fma);
            for r in 0..6 {
                t[r][c] = col[r];
            }
        }
        for (r, tr) in t.iter().enumerate() {
            let v = super::bt(*tr, add, sub, fma);
            for (cc, vv) in v.iter().enumerate() {
                // SAFETY: panel destination ξ = 6r + cc.
                unsafe { _mm512_storeu_ps(vbuf.add((r * 6 + cc) * bsz + off), *vv) };
            }
        }
    }

    /// See `super::output_panel`. Each output row of a half (8 tiles, 32 columns) is
    /// interleaved from the four column vectors with two rounds of two-source permutes.
    ///
    /// # Safety
    /// As `super::output_panel`; AVX-512F available.
    #[target_feature(enable = "avx512f,fma")]
    #[allow(clippy::too_many_arguments, reason = "tile coordinates")]
    pub unsafe fn output_panel(
        mrow: *const f32,
        stride: usize,
        t0: usize,
        tw: usize,
        oh: usize,
        ow: usize,
        out: *mut f32,
        resid: *const f32,
        bias: f32,
        lo: f32,
        hi: f32,
    ) {
        let mut m = [_mm512_setzero_ps(); 36];
        for (xi, v) in m.iter_mut().enumerate() {
            // SAFETY: 16 products of ξ.
            *v = unsafe { _mm512_loadu_ps(mrow.add(xi * stride)) };
        }
        let (add, sub, fma) = ops();
        let mut t = [[_mm512_setzero_ps(); 6]; 4];
        for c in 0..6 {
            let col = super::at(std::array::from_fn(|r| m[r * 6 + c]), add, sub, fma);
            for r in 0..4 {
                t[r][c] = col[r];
            }
        }
        let y: [[__m512; 4]; 4] = std::array::from_fn(|r| super::at(t[r], add, sub, fma));
        let (bv, lov, hiv) = (_mm512_set1_ps(bias), _mm512_set1_ps(lo), _mm512_set1_ps(hi));
        // Round 2: lanes (2k, 2k+1) of the pair (p, q) → tile k's columns (0,1) | (2,3).
        let ib_lo = _mm512_setr_epi32(0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
        let ib_hi = _mm512_setr_epi32(8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31);
        for h in 0..2 {
            let t = t0 + 8 * h;
            let (ty, tx) = (t / tw, t % tw);
            let x0 = 4 * tx;
            if x0 >= ow || 4 * ty >= oh {
                continue;
            }
            // Round 1: lane 2k ← tile 8h + k of the first vector, lane 2k+1 ← of the second.
            let ia = {
                let v: [i32; 16] = std::array::from_fn(|l| {
                    let k = (8 * h + l / 2) as i32;
                    if l % 2 == 0 { k } else { 16 + k }
                });
                // SAFETY: 16 i32 lanes.
                unsafe { _mm512_loadu_si512(v.as_ptr().cast()) }
            };
            let (k0, k1) = (
                col_mask(x0 as i64, ow as i64),
                col_mask(x0 as i64 + 16, ow as i64),
            );
            for (r, yr) in y.iter().enumerate() {
                let oy = 4 * ty + r;
                if oy >= oh {
                    break;
                }
                let p = _mm512_permutex2var_ps(yr[0], ia, yr[1]);
                let q = _mm512_permutex2var_ps(yr[2], ia, yr[3]);
                let mut a = _mm512_add_ps(_mm512_permutex2var_ps(p, ib_lo, q), bv);
                let mut b = _mm512_add_ps(_mm512_permutex2var_ps(p, ib_hi, q), bv);
                // SAFETY: masked to the columns inside output row oy.
                unsafe {
                    let o = out.add(oy * ow + x0);
                    if !resid.is_null() {
                        let rp = resid.add(oy * ow + x0);
                        a = _mm512_add_ps(a, _mm512_maskz_loadu_ps(k0, rp));
                        b = _mm512_add_ps(b, _mm512_maskz_loadu_ps(k1, rp.wrapping_add(16)));
                    }
                    // max/min with the value second: NaN passes through the clamp.
                    a = _mm512_min_ps(hiv, _mm512_max_ps(lov, a));
                    b = _mm512_min_ps(hiv, _mm512_max_ps(lov, b));
                    _mm512_mask_storeu_ps(o, k0, a);
                    _mm512_mask_storeu_ps(o.wrapping_add(16), k1, b);
                }
            }
        }
    }
}

/// The transforms for half a panel (8 tiles of one tile row) with 256-bit vectors. Lanes
/// hold the tiles in the order 0, 2, 4, 6, 1, 3, 5, 7 — what a 4×4 transpose within each
/// 128-bit lane makes of 32 consecutive columns — in both transforms, so the products (which
/// treat lanes independently) line up; lanes outside the plane are masked off
/// (`vmaskmovps` does not touch masked-off memory).
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// Lanes of an 8-wide access starting at column `x` that lie inside `[0, w)`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn col_mask(x: i64, w: i64) -> __m256i {
        let idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let xv = _mm256_add_epi32(_mm256_set1_epi32(x.clamp(-64, w) as i32), idx);
        let ge0 = _mm256_cmpgt_epi32(xv, _mm256_set1_epi32(-1));
        let ltw = _mm256_cmpgt_epi32(_mm256_set1_epi32(w.min(i32::MAX as i64) as i32), xv);
        _mm256_and_si256(ge0, ltw)
    }

    /// 4×4 transposes within both 128-bit lanes of (a0, a1, a2, a3); its own inverse.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn transpose4(a: [__m256; 4]) -> [__m256; 4] {
        let t0 = _mm256_unpacklo_ps(a[0], a[1]);
        let t1 = _mm256_unpackhi_ps(a[0], a[1]);
        let t2 = _mm256_unpacklo_ps(a[2], a[3]);
        let t3 = _mm256_unpackhi_ps(a[2], a[3]);
        [
            _mm256_shuffle_ps::<0x44>(t0, t2),
            _mm256_shuffle_ps::<0xEE>(t0, t2),
            _mm256_shuffle_ps::<0x44>(t1, t3),
            _mm256_shuffle_ps::<0xEE>(t1, t3),
        ]
    }

    /// add, sub and k·a + b for `super::bt`/`super::at`.
    #[inline(always)]
    #[allow(clippy::type_complexity, reason = "three closure types")]
    fn ops() -> (
        impl Fn(__m256, __m256) -> __m256 + Copy,
        impl Fn(__m256, __m256) -> __m256 + Copy,
        impl Fn(f32, __m256, __m256) -> __m256 + Copy,
    ) {
        // SAFETY (all three): AVX2 and FMA are enabled in every caller.
        (
            |a, b| unsafe { _mm256_add_ps(a, b) },
            |a, b| unsafe { _mm256_sub_ps(a, b) },
            |k, a, b| unsafe { _mm256_fmadd_ps(_mm256_set1_ps(k), a, b) },
        )
    }

    /// Input transform of tiles `t..t+8` (one tile row) into lanes `off..off+8` of the 36
    /// B matrices.
    ///
    /// # Safety
    /// As `super::input_panel` for the half; AVX2 and FMA available.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments, reason = "tile coordinates")]
    pub unsafe fn input_half(
        plane: *const f32,
        ih: i64,
        iw: i64,
        ph: i64,
        pw: i64,
        t: usize,
        tw: usize,
        vbuf: *mut f32,
        bsz: usize,
        off: usize,
    ) {
        let (ty, tx) = (t / tw, t % tw);
        let y0 = 4 * ty as i64 - ph;
        let x0 = 4 * tx as i64 - pw;
        // Columns x0 .. x0+32 (tile columns 0-3) and x0+4 .. x0+36 (4-5, one tile over).
        let ma: [__m256i; 4] = std::array::from_fn(|i| col_mask(x0 + 8 * i as i64, iw));
        let mb: [__m256i; 4] = std::array::from_fn(|i| col_mask(x0 + 4 + 8 * i as i64, iw));
        let mut d = [[_mm256_setzero_ps(); 6]; 6];
        for (r, dr) in d.iter_mut().enumerate() {
            let yy = y0 + r as i64;
            if yy < 0 || yy >= ih {
                continue;
            }
            // SAFETY: masked lanes lie inside row yy; masked-off lanes are not accessed (the
            // row pointer may lie outside the plane: wrapping arithmetic).
            unsafe {
                let row = plane.wrapping_offset((yy * iw + x0) as isize);
                let a: [__m256; 4] =
                    std::array::from_fn(|i| _mm256_maskload_ps(row.wrapping_add(8 * i), ma[i]));
                let b: [__m256; 4] =
                    std::array::from_fn(|i| _mm256_maskload_ps(row.wrapping_add(4 + 8 * i), mb[i]));
                let ca = transpose4(a);
                let cb = transpose4(b);
                dr[..4].copy_from_slice(&ca);
                dr[4] = cb[0];
                dr[5] = cb[1];
            }
        }
        let (add, sub, fma) = ops();
        let mut tt = [[_mm256_setzero_ps(); 6]; 6];
        for c in 0..6 {
            let col = super::bt(std::array::from_fn(|r| d[r][c]), add, sub, fma);
            for r in 0..6 {
                tt[r][c] = col[r];
            }
        }
        for (r, tr) in tt.iter().enumerate() {
            let v = super::bt(*tr, add, sub, fma);
            for (cc, vv) in v.iter().enumerate() {
                // SAFETY: lanes off..off+8 of destination ξ = 6r + cc.
                unsafe { _mm256_storeu_ps(vbuf.add((r * 6 + cc) * bsz + off), *vv) };
            }
        }
    }

    /// Output transform of tiles `t..t+8` (one tile row): 8 products of each ξ at
    /// `mrow + ξ·stride`, with the epilogue.
    ///
    /// # Safety
    /// As `super::output_panel` for the half; AVX2 and FMA available.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments, reason = "tile coordinates")]
    pub unsafe fn output_half(
        mrow: *const f32,
        stride: usize,
        t: usize,
        tw: usize,
        oh: usize,
        ow: usize,
        out: *mut f32,
        resid: *const f32,
        bias: f32,
        lo: f32,
        hi: f32,
    ) {
        let (ty, tx) = (t / tw, t % tw);
        let x0 = 4 * tx;
        if x0 >= ow || 4 * ty >= oh {
            return;
        }
        let mut m = [_mm256_setzero_ps(); 36];
        for (xi, v) in m.iter_mut().enumerate() {
            // SAFETY: 8 products of ξ.
            *v = unsafe { _mm256_loadu_ps(mrow.add(xi * stride)) };
        }
        let (add, sub, fma) = ops();
        let mut tt = [[_mm256_setzero_ps(); 6]; 4];
        for c in 0..6 {
            let col = super::at(std::array::from_fn(|r| m[r * 6 + c]), add, sub, fma);
            for r in 0..4 {
                tt[r][c] = col[r];
            }
        }
        let (bv, lov, hiv) = (_mm256_set1_ps(bias), _mm256_set1_ps(lo), _mm256_set1_ps(hi));
        let masks: [__m256i; 4] = std::array::from_fn(|i| col_mask((x0 + 8 * i) as i64, ow as i64));
        let full = x0 + 32 <= ow;
        for (r, tr) in tt.iter().enumerate() {
            let oy = 4 * ty + r;
            if oy >= oh {
                break;
            }
            // Columns 0-3 of the 8 tiles → 32 consecutive output columns.
            let rows = transpose4(super::at(*tr, add, sub, fma));
            for (i, v) in rows.iter().enumerate() {
                // SAFETY: masked (or, for whole 32 columns, plain) accesses inside row oy.
                unsafe {
                    let o = out.add(oy * ow).wrapping_add(x0 + 8 * i);
                    let mut v = _mm256_add_ps(*v, bv);
                    if !resid.is_null() {
                        let rp = resid.add(oy * ow).wrapping_add(x0 + 8 * i);
                        v = _mm256_add_ps(
                            v,
                            if full {
                                _mm256_loadu_ps(rp)
                            } else {
                                _mm256_maskload_ps(rp, masks[i])
                            },
                        );
                    }
                    // max/min with the value second: NaN passes through the clamp.
                    v = _mm256_min_ps(hiv, _mm256_max_ps(lov, v));
                    if full {
                        _mm256_storeu_ps(o, v);
                    } else {
                        _mm256_maskstore_ps(o, masks[i], v);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The transforms compose to direct correlation of a 6×6 tile with a 3×3 kernel.
    #[test]
    fn transforms_match_direct_correlation() {
        let d: [[f32; 6]; 6] =
            std::array::from_fn(|r| std::array::from_fn(|c| ((r * 7 + c * 3) % 11) as f32 - 5.0));
        let g: [f32; 9] = std::array::from_fn(|i| ((i * 5) % 7) as f32 * 0.25 - 0.7);
        let (u, v) = (transform_kernel(&g), transform_input(&d));
        let m: [f32; 36] = std::array::from_fn(|i| u[i] * v[i]);
        let y = transform_output(&m);
        for r in 0..4 {
            for c in 0..4 {
                let want: f32 = (0..9).map(|k| d[r + k / 3][c + k % 3] * g[k]).sum();
                assert!(
                    (y[r][c] - want).abs() < 1e-3,
                    "({r},{c}): {} vs {want}",
                    y[r][c]
                );
            }
        }
    }
}
