//! Weighted gathers: `y[n, c, p] = Σ_t w[n, p, t] · x[n, c, off[n, p, t]]` over float32
//! planes, with `off = −1` reading as 0 — the per-channel half of GridSample, whose taps
//! (offsets into the input plane and their weights) the compiled model computes once per
//! output position. Channel by channel: the gathers of a random grid land anywhere in the
//! plane, which stays in L1/L2 while its channel is done (tiles of positions over all
//! channels sent them to L3: 1.5× slower), and the taps stream in order.

use crate::abi::ONNXC_OK;
use crate::kernels::Status;
use crate::params;

/// Words of `onnxc_gather_sum_f32`'s parameters (its blob's body).
pub const PARAMS: usize = 6;

/// `onnxc_gather_sum_f32`'s parameters, decoded and validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GatherParams {
    pub n: usize,
    pub c: usize,
    pub plane: usize,
    pub positions: usize,
    pub taps: usize,
    pub weighted: bool,
}

impl GatherParams {
    /// The sealed blob (`params::seal`) of `[n, c, plane, positions, taps, weighted]`.
    pub fn encode(p: [i64; PARAMS]) -> Vec<i64> {
        params::seal(p)
    }

    /// Decodes and checks `blob`: counts not negative, `weighted` 0 or 1, tensors whose sizes
    /// fit in memory.
    pub fn decode(blob: &[i64]) -> params::Result<GatherParams> {
        let mut r = params::Reader::new(blob)?;
        let [n, c, plane, pos, taps, weighted] = r.array()?;
        r.finish()?;
        for v in [n, c, plane, pos, taps] {
            params::in_range(v, 0, params::MAX_WORDS, "a count is out of range")?;
        }
        let too_big = "a tensor is too large";
        params::product([n, c, plane], too_big)?;
        params::product([n, c, pos], too_big)?;
        params::product([n, pos, taps, 8], too_big)?;
        Ok(GatherParams {
            n: n as usize,
            c: c as usize,
            plane: plane as usize,
            positions: pos as usize,
            taps: taps as usize,
            weighted: params::flag(weighted, "weighted is not 0 or 1")?,
        })
    }
}

/// `params`: `GatherParams::encode`'s blob `[n, c, plane, positions, taps, weighted]`. `x`:
/// `[n, c, plane]`; `off`: `[n, positions, taps]` int64 in `[−1, plane)` (−1: outside, reads
/// 0; others are clamped into the plane); `w`: `[n, positions, taps]` when `weighted` (else
/// every weight is 1); `y`: `[n, c, positions]`. Returns `ONNXC_ERR_PARAMS`, touching
/// nothing, when the blob is not valid.
///
/// # Safety
/// `params` points to a sealed blob (`params::blob`); the other pointers hold the elements
/// it describes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_gather_sum_f32(
    params: *const i64,
    x: *const f32,
    off: *const i64,
    w: *const f32,
    y: *mut f32,
) -> Status {
    let GatherParams {
        n,
        c,
        plane,
        positions: pos,
        taps,
        weighted,
    } = params::decode_blob!(params, GatherParams::decode);
    if n == 0 || c == 0 || pos == 0 || taps == 0 || plane == 0 {
        if !y.is_null() {
            // SAFETY: y holds n·c·pos floats.
            unsafe { std::slice::from_raw_parts_mut(y, n * c * pos).fill(0.0) };
        }
        return ONNXC_OK;
    }
    // SAFETY: sizes from the parameters (caller's contract).
    let (x, off, y) = unsafe {
        (
            std::slice::from_raw_parts(x, n * c * plane),
            std::slice::from_raw_parts(off, n * pos * taps),
            std::slice::from_raw_parts_mut(y, n * c * pos),
        )
    };
    let w = if weighted {
        // SAFETY: as above.
        Some(unsafe { std::slice::from_raw_parts(w, n * pos * taps) })
    } else {
        None
    };
    let g = Gather {
        plane,
        pos,
        taps,
        last: plane as i64 - 1,
    };
    for b in 0..n {
        let offs = &off[b * pos * taps..][..pos * taps];
        let ws = w.map(|w| &w[b * pos * taps..][..pos * taps]);
        for ch in 0..c {
            let xp = &x[(b * c + ch) * plane..][..plane];
            let yp = &mut y[(b * c + ch) * pos..][..pos];
            // The common tap counts as compile-time constants (unrolled inner loops).
            match taps {
                1 => g.channel::<1>(xp, offs, ws, yp),
                2 => g.channel::<2>(xp, offs, ws, yp),
                4 => g.channel::<4>(xp, offs, ws, yp),
                8 => g.channel::<8>(xp, offs, ws, yp),
                16 => g.channel::<16>(xp, offs, ws, yp),
                _ => g.channel::<0>(xp, offs, ws, yp),
            }
        }
    }
    ONNXC_OK
}

struct Gather {
    plane: usize,
    pos: usize,
    taps: usize,
    last: i64,
}

impl Gather {
    /// One channel's outputs; `T` the tap count when it is a constant, 0 otherwise.
    #[inline(always)]
    fn channel<const T: usize>(
        &self,
        xp: &[f32],
        offs: &[i64],
        ws: Option<&[f32]>,
        yp: &mut [f32],
    ) {
        let taps = if T == 0 { self.taps } else { T };
        debug_assert_eq!(xp.len(), self.plane);
        debug_assert_eq!(yp.len(), self.pos);
        let last = self.last;
        // Branch-free: which taps fall outside is data (random for a random grid), so a
        // branch per tap would mispredict; a select does not.
        let tap = |o: i64| -> f32 {
            // SAFETY: the index is clamped into the plane.
            let v = unsafe { *xp.get_unchecked(o.clamp(0, last) as usize) };
            if o >= 0 { v } else { 0.0 }
        };
        match ws {
            Some(ws) => {
                for ((out, o), w) in yp
                    .iter_mut()
                    .zip(offs.chunks_exact(taps))
                    .zip(ws.chunks_exact(taps))
                {
                    let mut acc = 0.0f32;
                    for t in 0..taps {
                        acc += w[t] * tap(o[t]);
                    }
                    *out = acc;
                }
            }
            None => {
                for (out, o) in yp.iter_mut().zip(offs.chunks_exact(taps)) {
                    let mut acc = 0.0f32;
                    for &ot in o {
                        acc += tap(ot);
                    }
                    *out = acc;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_weighted_taps_and_skips_outside_ones() {
        // n 1, c 2, plane 3, positions 2, taps 2.
        let x = [1.0f32, 2.0, 3.0, 10.0, 20.0, 30.0];
        let off = [0i64, 2, -1, 1];
        let w = [0.5f32, 0.25, 9.0, 2.0];
        let mut y = [0f32; 4];
        let params = GatherParams::encode([1, 2, 3, 2, 2, 1]);
        // SAFETY: params is a sealed blob; buffers sized as the parameters say.
        let status = unsafe {
            onnxc_gather_sum_f32(
                params.as_ptr(),
                x.as_ptr(),
                off.as_ptr(),
                w.as_ptr(),
                y.as_mut_ptr(),
            )
        };
        assert_eq!(status, ONNXC_OK);
        assert_eq!(y, [0.5 + 0.75, 4.0, 5.0 + 7.5, 40.0]);
        // Corrupt blobs are refused, the output untouched.
        let good = [1, 2, 3, 2, 2, 1];
        let with = |k: usize, v: i64| {
            let mut p = good;
            p[k] = v;
            GatherParams::encode(p)
        };
        let bad = [
            params::seal(good[..5].iter().copied()),
            params::seal(good.iter().copied().chain([1])),
            with(0, -1),
            with(1, -2),
            with(2, -3),
            with(3, -1),
            with(4, -1),
            with(5, 2),
            with(0, 1 << 40),
            {
                let mut p = good;
                (p[0], p[1], p[2]) = (1 << 30, 1 << 30, 1 << 30);
                GatherParams::encode(p)
            },
        ];
        let before = y;
        for (i, b) in bad.iter().enumerate() {
            assert!(GatherParams::decode(b).is_err(), "case {i}");
            // SAFETY: b is a sealed blob; the buffers are never touched (it is refused).
            let status = unsafe {
                onnxc_gather_sum_f32(
                    b.as_ptr(),
                    x.as_ptr(),
                    off.as_ptr(),
                    w.as_ptr(),
                    y.as_mut_ptr(),
                )
            };
            assert_eq!(status, crate::abi::ONNXC_ERR_PARAMS, "case {i}");
        }
        assert_eq!(y, before, "the output was written");
    }
}
