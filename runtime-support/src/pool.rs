//! 2-D pooling (f32, NCHW): max, average (with or without padding in the divisor) and Lp.
//! Works row by row on an accumulator row, so the inner loops run without bounds checks over
//! the output columns whose taps lie inside the input.

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

/// # Safety
/// `x` holds `planes · IH · IW` floats, `y` `planes · OH · OW`.
pub unsafe fn pool2d_f32(g: &PoolGeometry, x: *const f32, y: *mut f32) {
    // SAFETY: forwarded contract.
    crate::multiversion!(pool2d_body(g, x, y))
}

#[inline(always)]
fn pool2d_body(g: &PoolGeometry, x: *const f32, y: *mut f32) {
    let [ih, iw] = g.input;
    let [oh, ow] = g.output;
    let [kh, kw] = g.kernel;
    let [sh, sw] = g.strides;
    let [dh, dw] = g.dilations;
    let [ph, pw] = g.pads_begin;
    let [peh, pew] = g.pads_end;
    let (ow_u, iw_u, sw_u, dw_u) = (ow as usize, iw as usize, sw as usize, dw as usize);
    // Divisor counts along x (the y count is found per row).
    let count_x: Vec<f32> = (0..ow)
        .map(|ox| {
            (0..kw)
                .filter(|kx| {
                    let q = ox * sw + kx * dw - pw;
                    if g.count_include_pad { q >= -pw && q < iw + pew } else { q >= 0 && q < iw }
                })
                .count() as f32
        })
        .collect();
    let init = if g.kind == 0 { f32::NEG_INFINITY } else { 0.0 };
    // A padded copy of one input row (init values outside), so every tap of every output
    // column is an unchecked read; `h` holds the reduction over kx at every column.
    let span = ((ow - 1) * sw + (kw - 1) * dw + 1) as usize;
    let padded_len = span.max(pw as usize + iw_u);
    let mut padded = vec![init; padded_len];
    let hlen = (ow_u - 1) * sw_u + 1;
    let mut h = vec![init; hlen];
    let mut acc = vec![init; ow_u];
    let lp = |v: f32| {
        let a = v.abs();
        match g.p {
            1 => a,
            2 => a * a,
            p => a.powi(p as i32),
        }
    };
    for plane in 0..g.planes as usize {
        // SAFETY: plane offsets inside x and y.
        let (xp, yp) = unsafe { (x.add(plane * (ih * iw) as usize), y.add(plane * ow_u * oh as usize)) };
        for oy in 0..oh {
            acc.fill(init);
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
                // Padded row: taps left of the input read `init`.
                let start = pw.max(0) as usize;
                let end = (start + iw_u).min(padded_len);
                if g.kind == 2 {
                    for (d, s) in padded[start..end].iter_mut().zip(row) {
                        *d = lp(*s);
                    }
                } else {
                    padded[start..end].copy_from_slice(&row[..end - start]);
                }
                // h[i] = reduce over kx of padded[i + kx·dw].
                h.copy_from_slice(&padded[..hlen]);
                for kx in 1..kw as usize {
                    let src = &padded[kx * dw_u..kx * dw_u + hlen];
                    if g.kind == 0 {
                        for (a, v) in h.iter_mut().zip(src) {
                            *a = a.max(*v);
                        }
                    } else {
                        for (a, v) in h.iter_mut().zip(src) {
                            *a += *v;
                        }
                    }
                }
                if g.kind == 0 {
                    for (j, a) in acc.iter_mut().enumerate() {
                        *a = a.max(h[j * sw_u]);
                    }
                } else {
                    for (j, a) in acc.iter_mut().enumerate() {
                        *a += h[j * sw_u];
                    }
                }
            }
            // SAFETY: output row oy.
            let out = unsafe { std::slice::from_raw_parts_mut(yp.add(oy as usize * ow_u), ow_u) };
            match g.kind {
                0 => out.copy_from_slice(&acc),
                1 => {
                    for ((o, a), cx) in out.iter_mut().zip(&acc).zip(&count_x) {
                        *o = a / (cx * cy as f32);
                    }
                }
                _ => {
                    for (o, a) in out.iter_mut().zip(&acc) {
                        *o = match g.p {
                            1 => *a,
                            2 => a.sqrt(),
                            p => a.powf(1.0 / p as f32),
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
pub unsafe extern "C" fn onnxc_pool2d_f32(params: *const i64, x: *const f32, y: *mut f32) {
    // SAFETY: forwarded contract.
    unsafe {
        let g = PoolGeometry::decode(params);
        pool2d_f32(&g, x, y)
    }
}
