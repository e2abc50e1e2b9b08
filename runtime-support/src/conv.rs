//! Convolution (f32, N-d, grouped): im2col into scratch + GEMM, with 1×1 stride-1 convs going
//! straight to GEMM. The geometry is shared with the compiler, which sizes the scratch.

/// Geometry of one convolution (NC[spatial] layout).
#[derive(Clone, Debug, PartialEq)]
pub struct ConvGeometry {
    pub n: i64,
    pub c: i64,
    pub m: i64,
    pub group: i64,
    pub input: Vec<i64>,
    pub kernel: Vec<i64>,
    pub output: Vec<i64>,
    pub strides: Vec<i64>,
    pub dilations: Vec<i64>,
    /// Padding at the start of each spatial dim.
    pub pads: Vec<i64>,
}

impl ConvGeometry {
    /// `[nsp, n, c, m, group, input.., kernel.., output.., strides.., dilations.., pads..]`.
    pub fn encode(&self) -> Vec<i64> {
        let mut p = vec![self.input.len() as i64, self.n, self.c, self.m, self.group];
        for v in [&self.input, &self.kernel, &self.output, &self.strides, &self.dilations, &self.pads] {
            p.extend_from_slice(v);
        }
        p
    }

    /// # Safety
    /// `p` must point to an array written by `encode`.
    pub unsafe fn decode(p: *const i64) -> ConvGeometry {
        // SAFETY: the caller guarantees the layout of `encode`.
        unsafe {
            let nsp = *p as usize;
            let hdr = std::slice::from_raw_parts(p, 5);
            let rest = std::slice::from_raw_parts(p.add(5), 6 * nsp);
            let part = |i: usize| rest[i * nsp..(i + 1) * nsp].to_vec();
            ConvGeometry {
                n: hdr[1],
                c: hdr[2],
                m: hdr[3],
                group: hdr[4],
                input: part(0),
                kernel: part(1),
                output: part(2),
                strides: part(3),
                dilations: part(4),
                pads: part(5),
            }
        }
    }

    fn is_pointwise(&self) -> bool {
        self.kernel.iter().all(|&k| k == 1)
            && self.strides.iter().all(|&s| s == 1)
            && self.pads.iter().all(|&p| p == 0)
            && self.input == self.output
    }

    /// Scratch floats `onnxc_conv_f32` needs (the im2col matrix of one group).
    pub fn scratch_floats(&self) -> usize {
        if self.is_pointwise() {
            return 0;
        }
        let cg = (self.c / self.group) as usize;
        let k: i64 = self.kernel.iter().product();
        let o: i64 = self.output.iter().product();
        cg * k as usize * o as usize
    }
}

/// # Safety
/// `x`, `w`, `y`, `bias` (if non-null) and `scratch` must be valid for the geometry.
pub unsafe fn conv_f32(g: &ConvGeometry, x: *const f32, w: *const f32, bias: *const f32, y: *mut f32, scratch: *mut f32) {
    let nsp = g.input.len();
    let cg = (g.c / g.group) as usize;
    let mg = (g.m / g.group) as usize;
    let ksize: usize = g.kernel.iter().product::<i64>() as usize;
    let isize: usize = g.input.iter().product::<i64>() as usize;
    let osize: usize = g.output.iter().product::<i64>() as usize;
    let kdim = cg * ksize;
    let pointwise = g.is_pointwise();
    for b in 0..g.n as usize {
        for grp in 0..g.group as usize {
            // SAFETY: offsets are within the tensors described by the geometry.
            unsafe {
                let xg = x.add((b * g.c as usize + grp * cg) * isize);
                let wg = w.add(grp * mg * kdim);
                let yg = y.add((b * g.m as usize + grp * mg) * osize);
                let cols = if pointwise {
                    xg
                } else {
                    im2col(g, nsp, cg, ksize, osize, xg, scratch);
                    scratch as *const f32
                };
                crate::gemm::sgemm(mg, osize, kdim, wg, kdim, false, cols, osize, false, yg, osize);
                if !bias.is_null() {
                    for oc in 0..mg {
                        let bv = *bias.add(grp * mg + oc);
                        let row = std::slice::from_raw_parts_mut(yg.add(oc * osize), osize);
                        row.iter_mut().for_each(|v| *v += bv);
                    }
                }
            }
        }
    }
}

/// Writes the `[cg·ksize, osize]` column matrix of one group's input.
///
/// # Safety
/// `xg` holds `cg` channel planes of the input; `cols` has room for `cg·ksize·osize` floats.
unsafe fn im2col(g: &ConvGeometry, nsp: usize, cg: usize, ksize: usize, osize: usize, xg: *const f32, cols: *mut f32) {
    let isize: usize = g.input.iter().product::<i64>() as usize;
    let mut kidx = vec![0i64; nsp];
    let mut oidx = vec![0i64; nsp];
    for c in 0..cg {
        for kf in 0..ksize {
            // Decompose kf into per-dim kernel taps.
            let mut r = kf as i64;
            for d in (0..nsp).rev() {
                kidx[d] = r % g.kernel[d];
                r /= g.kernel[d];
            }
            // SAFETY: row (c, kf) of cols has osize entries.
            let row = unsafe { std::slice::from_raw_parts_mut(cols.add((c * ksize + kf) * osize), osize) };
            if nsp == 2 {
                let (oh, ow) = (g.output[0], g.output[1]);
                let (ih, iw) = (g.input[0], g.input[1]);
                let mut o = 0usize;
                for y in 0..oh {
                    let iy = y * g.strides[0] + kidx[0] * g.dilations[0] - g.pads[0];
                    if iy < 0 || iy >= ih {
                        row[o..o + ow as usize].fill(0.0);
                        o += ow as usize;
                        continue;
                    }
                    let base = c * isize + (iy * iw) as usize;
                    for xo in 0..ow {
                        let ix = xo * g.strides[1] + kidx[1] * g.dilations[1] - g.pads[1];
                        row[o] = if ix < 0 || ix >= iw {
                            0.0
                        } else {
                            // SAFETY: (c, iy, ix) is inside the input.
                            unsafe { *xg.add(base + ix as usize) }
                        };
                        o += 1;
                    }
                }
                continue;
            }
            oidx.iter_mut().for_each(|v| *v = 0);
            for slot in row.iter_mut() {
                let mut off = 0i64;
                let mut inside = true;
                for d in 0..nsp {
                    let p = oidx[d] * g.strides[d] + kidx[d] * g.dilations[d] - g.pads[d];
                    if p < 0 || p >= g.input[d] {
                        inside = false;
                        break;
                    }
                    off = off * g.input[d] + p;
                }
                // SAFETY: inside means the position is within the channel plane.
                *slot = if inside { unsafe { *xg.add(c * isize + off as usize) } } else { 0.0 };
                for d in (0..nsp).rev() {
                    oidx[d] += 1;
                    if oidx[d] < g.output[d] {
                        break;
                    }
                    oidx[d] = 0;
                }
            }
        }
    }
}

/// C ABI entry point called by generated code.
///
/// # Safety
/// `params` must come from `ConvGeometry::encode`; buffers as for `conv_f32`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_conv_f32(params: *const i64, x: *const f32, w: *const f32, bias: *const f32, y: *mut f32, scratch: *mut f32) {
    // SAFETY: forwarded contract.
    unsafe {
        let g = ConvGeometry::decode(params);
        conv_f32(&g, x, w, bias, y, scratch)
    }
}
