//! 2-D pooling (f32, NCHW): max, average (with or without padding in the divisor) and Lp.
//! Separable, row by row: the window's input rows are first reduced column by column
//! (contiguous, vectorized) into a row padded with the reduction's identity, then every output
//! column reduces its kw taps of that row. All scratch comes from the caller (the model's
//! workspace).

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
    pub fn encode(&self) -> Vec<i64> {
        let mut v = vec![self.kind, self.count_include_pad as i64, self.p, self.planes];
        for a in [self.input, self.output, self.kernel, self.strides, self.dilations, self.pads_begin, self.pads_end] {
            v.extend_from_slice(&a);
        }
        v
    }

    /// # Safety
    /// `p` points to an array written by `encode`.
    pub unsafe fn decode(p: *const i64) -> PoolGeometry {
        // SAFETY: caller contract.
        let v = unsafe { std::slice::from_raw_parts(p, 18) };
        let pair = |i: usize| [v[i], v[i + 1]];
        PoolGeometry {
            kind: v[0],
            count_include_pad: v[1] != 0,
            p: v[2],
            planes: v[3],
            input: pair(4),
            output: pair(6),
            kernel: pair(8),
            strides: pair(10),
            dilations: pair(12),
            pads_begin: pair(14),
            pads_end: pair(16),
        }
    }
}

impl PoolGeometry {
    /// Length of the padded row buffer: every tap of every output column, and the input row
    /// at offset `pads_begin[1]`.
    fn padded_len(&self) -> usize {
        let span = (self.output[1] - 1) * self.strides[1] + (self.kernel[1] - 1) * self.dilations[1] + 1;
        span.max(self.pads_begin[1] + self.input[1]).max(1) as usize
    }

    /// Scratch floats `pool2d_f32` needs: the x divisors, the padded row and its reduction
    /// over the kernel's columns.
    pub fn scratch_floats(&self) -> usize {
        self.output[1].max(1) as usize + 2 * self.padded_len()
    }
}

/// # Safety
/// `x` holds `planes · IH · IW` floats, `y` `planes · OH · OW`, `scratch`
/// `g.scratch_floats()` floats; the geometry is consistent (as `Pool` lowering builds it:
/// positive kernel, strides and dilations, non-negative pads, output extents from the ONNX
/// shape rules).
pub unsafe fn pool2d_f32(g: &PoolGeometry, x: *const f32, y: *mut f32, scratch: *mut f32) {
    // SAFETY: forwarded contract.
    crate::multiversion!(pool2d_body(g, x, y, scratch))
}

/// `dst[j] = src[2·j]` (`src` holds `2·dst.len() - 1` floats or more): the stride-2 pick
/// that compilers leave scalar, with an AVX-512 two-source permute when the CPU has it.
pub(crate) fn pick_even(src: &[f32], dst: &mut [f32]) {
    let n = dst.len();
    assert!(n == 0 || src.len() > 2 * (n - 1), "pick_even: source too short");
    let mut j = 0;
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        // SAFETY: AVX-512F detected; the loop reads src[2j .. 2j+32) with 2j+32 <= src.len()
        // and writes dst[j .. j+16) with j+16 <= n.
        unsafe { j = pick_even_avx512(src, dst) };
    }
    for (d, k) in dst[j..].iter_mut().zip(j..) {
        *d = src[2 * k];
    }
}

/// Returns how many outputs it produced (whole 16-float blocks inside both slices).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn pick_even_avx512(src: &[f32], dst: &mut [f32]) -> usize {
    use std::arch::x86_64::*;
    let idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let mut j = 0;
    while j + 16 <= dst.len() && 2 * j + 32 <= src.len() {
        // SAFETY: bounds checked by the loop condition.
        unsafe {
            let a = _mm512_loadu_ps(src.as_ptr().add(2 * j));
            let b = _mm512_loadu_ps(src.as_ptr().add(2 * j + 16));
            _mm512_storeu_ps(dst.as_mut_ptr().add(j), _mm512_permutex2var_ps(a, idx, b));
        }
        j += 16;
    }
    j
}

#[inline(always)]
fn pool2d_body(g: &PoolGeometry, x: *const f32, y: *mut f32, scratch: *mut f32) {
    let [ih, iw] = g.input;
    let [oh, ow] = g.output;
    let [kh, kw] = g.kernel;
    let [sh, sw] = g.strides;
    let [dh, dw] = g.dilations;
    let [ph, pw] = g.pads_begin;
    let [peh, pew] = g.pads_end;
    if oh <= 0 || ow <= 0 || g.planes <= 0 {
        return;
    }
    let (ow_u, iw_u, sw_u, dw_u, pw_u) = (ow as usize, iw as usize, sw as usize, dw as usize, pw as usize);
    let plen = g.padded_len();
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
        *c = (0..kw)
            .filter(|kx| {
                let q = ox as i64 * sw + kx * dw - pw;
                if g.count_include_pad { q >= -pw && q < iw + pew } else { q >= 0 && q < iw }
            })
            .count() as f32;
    }
    let max = g.kind == 0;
    let init = if max { f32::NEG_INFINITY } else { 0.0 };
    let lp = |v: f32| {
        let a = v.abs();
        match g.p {
            1 => a,
            2 => a * a,
            p => a.powi(p as i32),
        }
    };
    // Columns outside the input read the reduction's identity.
    padded.fill(init);
    for plane in 0..g.planes as usize {
        // SAFETY: plane offsets inside x and y.
        let (xp, yp) = unsafe { (x.add(plane * (ih * iw) as usize), y.add(plane * ow_u * oh as usize)) };
        for oy in 0..oh {
            // Reduce the window's input rows column by column (contiguous, vectorized) into
            // the padded row (whose padding keeps the identity).
            let v = &mut padded[pw_u..pw_u + iw_u];
            v.fill(init);
            let mut cy = 0usize;
            for ky in 0..kh {
                let iy = oy * sh + ky * dh - ph;
                let counted = if g.count_include_pad { iy >= -ph && iy < ih + peh } else { iy >= 0 && iy < ih };
                if counted {
                    cy += 1;
                }
                if iy < 0 || iy >= ih {
                    continue;
                }
                // SAFETY: row iy of the plane.
                let row = unsafe { std::slice::from_raw_parts(xp.add(iy as usize * iw_u), iw_u) };
                match g.kind {
                    0 => v.iter_mut().zip(row).for_each(|(a, r)| *a = a.max(*r)),
                    1 => v.iter_mut().zip(row).for_each(|(a, r)| *a += *r),
                    _ => v.iter_mut().zip(row).for_each(|(a, r)| *a += lp(*r)),
                }
            }
            // Reduce kw taps at every padded column: one contiguous (vectorized) pass per tap.
            let hlen = (ow_u - 1) * sw_u + 1;
            let h = &mut h[..hlen];
            h.copy_from_slice(&padded[..hlen]);
            for kx in 1..kw as usize {
                let src = &padded[kx * dw_u..kx * dw_u + hlen];
                if max {
                    h.iter_mut().zip(src).for_each(|(a, v)| *a = a.max(*v));
                } else {
                    h.iter_mut().zip(src).for_each(|(a, v)| *a += *v);
                }
            }
            // SAFETY: output row oy.
            let out = unsafe { std::slice::from_raw_parts_mut(yp.add(oy as usize * ow_u), ow_u) };
            // Output column j is column j·sw of h.
            match sw_u {
                1 => out.copy_from_slice(&h[..ow_u]),
                2 => pick_even(h, out),
                _ => out.iter_mut().zip(h.iter().step_by(sw_u)).for_each(|(o, v)| *o = *v),
            }
            match g.kind {
                0 => {}
                1 => {
                    for (o, cx) in out.iter_mut().zip(count_x.iter()) {
                        *o /= cx * cy as f32;
                    }
                }
                _ => {
                    for o in out.iter_mut() {
                        *o = match g.p {
                            1 => *o,
                            2 => o.sqrt(),
                            p => o.powf(1.0 / p as f32),
                        };
                    }
                }
            }
        }
    }
}

/// C ABI entry point.
///
/// # Safety
/// As `pool2d_f32`; `params` from `PoolGeometry::encode`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_pool2d_f32(params: *const i64, x: *const f32, y: *mut f32, scratch: *mut f32) {
    // SAFETY: forwarded contract.
    unsafe {
        let g = PoolGeometry::decode(params);
        pool2d_f32(&g, x, y, scratch)
    }
}
