//! Depthwise convolution between 8-bit tensors: the dequantization of the input, the float32
//! depthwise convolution and the quantization of its result, a few channels at a time in a
//! worker's scratch.
//!
//! A quantized model leaves its depthwise convolutions in float32 (an 8-channel block of the
//! integer kernel would hold one channel): QLinearConv's as the exact integer sums of the
//! centered input and weights (`(x − zx)` times `(w − zw)`, then requantized by the factor
//! of each channel), a QDQ model's as DequantizeLinear → Conv → QuantizeLinear. As three
//! steps, the float32 input and result of a layer go through memory (1.6 MB each for 32
//! channels of 112×112); here each chunk of channels is widened, convolved and narrowed
//! while it is in cache. The three parts are the kernels the steps would call
//! (`quantize::dequantize`, `depthwise`, `quantize::quantize` or
//! `requantize::requantize`), on chunks that take the path the whole convolution would, so
//! the result is bit for bit the three steps' at every thread count.

use super::depthwise::{DW_BLOCK, DW_BLOCKED_MAX_CELLS_AVX2, DW_BLOCKED_MAX_OUT, depthwise};
use super::{Call, ConvGeometry};
use crate::abi::ONNXC_OK;
use crate::kernels::Status;
use crate::par::{Par, ScratchNeed, Slots, Threads};
use crate::params;
use std::borrow::Cow;

/// How the input bytes become float32: `(x − zp) · scale` (`quantize::dequantize`).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Widen {
    pub scale: f32,
    pub zp: i64,
    pub signed: bool,
}

/// How the float32 result becomes bytes.
#[derive(Clone, Debug, PartialEq)]
pub enum Narrow<'a> {
    /// QuantizeLinear with one scale and zero point (`quantize::quantize`).
    Quantize { scale: f32, zp: i64, signed: bool },
    /// Exact accumulators requantized by one factor per channel, or one for all
    /// (`requantize::requantize`).
    Requantize {
        factors: Cow<'a, [f32]>,
        zp: i64,
        signed: bool,
    },
}

/// One convolution: a depthwise geometry, and how its input and result are quantized.
#[derive(Clone, Debug, PartialEq)]
pub struct QDepthwiseParams<'a> {
    pub conv: ConvGeometry<'a>,
    pub widen: Widen,
    pub narrow: Narrow<'a>,
}

impl QDepthwiseParams<'_> {
    /// The sealed blob: `[geometry length, geometry…, widen scale bits, widen zp, widen
    /// signed, narrow kind (0 quantize, 1 requantize), zp, signed, scale bits or factor
    /// count and factor bits…]`.
    pub fn encode(&self) -> Vec<i64> {
        let geo = self.conv.encode();
        let mut p = vec![geo.len() as i64];
        p.extend_from_slice(&geo);
        let w = &self.widen;
        p.extend([w.scale.to_bits() as i64, w.zp, w.signed as i64]);
        match &self.narrow {
            Narrow::Quantize { scale, zp, signed } => {
                p.extend([0, *zp, *signed as i64, scale.to_bits() as i64])
            }
            Narrow::Requantize {
                factors,
                zp,
                signed,
            } => {
                p.extend([1, *zp, *signed as i64, factors.len() as i64]);
                p.extend(factors.iter().map(|f| f.to_bits() as i64));
            }
        }
        params::seal(p)
    }

    /// The convolution `encode` wrote into `blob`, validated: a depthwise geometry without
    /// a channel permutation, 8-bit zero points, one factor or one per channel.
    pub fn decode(blob: &[i64]) -> params::Result<QDepthwiseParams<'_>> {
        use params::{ensure, flag, in_range};
        let mut r = params::Reader::new(blob)?;
        let glen = in_range(
            r.word()?,
            1,
            r.remaining() as i64,
            "geometry length out of range",
        )?;
        let conv = ConvGeometry::decode(r.words(glen as usize)?)?;
        ensure(conv.is_depthwise(), "not a depthwise convolution")?;
        ensure(conv.input_planes.is_empty(), "channels read in order")?;
        let zp = |v: i64, signed: bool| {
            if signed {
                in_range(v, -128, 127, "zero point out of range")
            } else {
                in_range(v, 0, 255, "zero point out of range")
            }
        };
        let [ws, wz, wsg] = r.array()?;
        let wsigned = flag(wsg, "bad signedness")?;
        let widen = Widen {
            scale: f32::from_bits(ws as u32),
            zp: zp(wz, wsigned)?,
            signed: wsigned,
        };
        let [kind, nz, nsg, n] = r.array()?;
        let nsigned = flag(nsg, "bad signedness")?;
        let nzp = zp(nz, nsigned)?;
        let narrow = match kind {
            0 => Narrow::Quantize {
                scale: f32::from_bits(n as u32),
                zp: nzp,
                signed: nsigned,
            },
            1 => {
                ensure(n == 1 || n == conv.m, "one factor, or one per channel")?;
                let words = r.words(n as usize)?;
                Narrow::Requantize {
                    factors: words.iter().map(|&b| f32::from_bits(b as u32)).collect(),
                    zp: nzp,
                    signed: nsigned,
                }
            }
            _ => return Err(params::ParamError("unknown narrowing")),
        };
        r.finish()?;
        Ok(QDepthwiseParams {
            conv,
            widen,
            narrow,
        })
    }

    /// Channels per chunk: one where every path of the float32 depthwise convolution goes
    /// plane by plane; whole blocks of `DW_BLOCK` (as `depthwise_par` splits them) where the
    /// channel-blocked path may take it. A choice of the geometry alone, not of the CPU, so
    /// the scratch is known when the model is compiled.
    fn chunk(&self) -> usize {
        let g = &self.conv;
        match g.depthwise_blocked_dims() {
            Some((hp, wp))
                if g.osize() <= DW_BLOCKED_MAX_OUT
                    || hp * wp + g.osize() <= DW_BLOCKED_MAX_CELLS_AVX2 =>
            {
                DW_BLOCK
            }
            _ => 1,
        }
    }

    /// The most channels a chunk holds: the last chunk of an image takes the channels after
    /// the last whole block.
    fn max_chunk(&self) -> usize {
        let c = self.conv.c.max(0) as usize;
        match self.chunk() {
            1 => 1.min(c),
            b => c.min(2 * b - 1),
        }
    }

    /// Scratch per worker: a chunk's widened input and float32 result, then the float32
    /// convolution's own scratch.
    pub fn scratch(&self) -> ScratchNeed {
        let g = &self.conv;
        let planes = self.max_chunk() * (g.isize() + g.osize());
        ScratchNeed {
            shared: 0,
            per_worker: (planes + g.depthwise_scratch()) * 4,
        }
    }
}

/// Runs the convolution of `x` (`[n, c, input…]` bytes) with the float32 weights `w`
/// (`[c, 1, kernel…]`) and `bias` (null: none, else `c` floats) into `y` (`[n, c,
/// output…]` bytes).
///
/// # Safety
/// The buffers hold what the geometry describes; each of `par`'s workers' `slots` holds
/// `p.scratch()`.
pub unsafe fn qdepthwise(
    p: &QDepthwiseParams,
    x: *const u8,
    w: *const f32,
    bias: *const f32,
    y: *mut u8,
    slots: Slots,
    par: Par,
) {
    let g = &p.conv;
    let (n, c) = (g.n.max(0) as usize, g.c.max(0) as usize);
    let (isz, osz, ks) = (g.isize(), g.osize(), g.ksize());
    let chunk = p.chunk();
    let per_image = if chunk == 1 { c } else { (c / chunk).max(1) };
    let units = n * per_image;
    if units == 0 || osz == 0 {
        return;
    }
    let room = p.max_chunk();
    let (xa, wa, ba, ya) = (x as usize, w as usize, bias as usize, y as usize);
    let job = |r: std::ops::Range<usize>, worker: usize| {
        let slot = slots.at(worker);
        for u in r {
            let (img, k) = (u / per_image, u % per_image);
            let c0 = k * chunk;
            let c1 = if k + 1 == per_image { c } else { c0 + chunk };
            let len = c1 - c0;
            let gc = ConvGeometry {
                n: 1,
                c: len as i64,
                m: len as i64,
                group: len as i64,
                input_planes: Cow::Borrowed(&[]),
                ..g.clone()
            };
            // SAFETY: the chunk's planes of x and y lie in them, its weights and bias in w
            // and bias (caller); the worker's slot holds `room` widened input and result
            // planes, then the convolution's scratch (`scratch`), and only this task uses
            // it.
            unsafe {
                let (a, b) = (slot, slot.add(room * isz));
                let dws = slot.add(room * (isz + osz));
                let first = img * c + c0;
                let wd = &p.widen;
                crate::quantize::dequantize(
                    (xa as *const u8).add(first * isz),
                    len * isz,
                    wd.scale,
                    wd.zp,
                    wd.signed,
                    a,
                    Par::SEQ,
                );
                let call = Call {
                    x: a,
                    w: (wa as *const f32).add(c0 * ks),
                    bias: if ba == 0 {
                        std::ptr::null()
                    } else {
                        (ba as *const f32).add(c0)
                    },
                    residual: std::ptr::null(),
                    lo: f32::NEG_INFINITY,
                    hi: f32::INFINITY,
                    y: b,
                    scratch: dws,
                };
                depthwise(&gc, call);
                let out = (ya as *mut u8).add(first * osz);
                match &p.narrow {
                    Narrow::Quantize { scale, zp, signed } => {
                        crate::quantize::quantize(b, len * osz, *scale, *zp, *signed, out, Par::SEQ)
                    }
                    Narrow::Requantize {
                        factors,
                        zp,
                        signed,
                    } => {
                        let one = factors.len() == 1;
                        crate::requantize::requantize(
                            b,
                            if one {
                                factors.as_ptr()
                            } else {
                                factors.as_ptr().add(c0)
                            },
                            one,
                            crate::requantize::Layout {
                                outer: 1,
                                channels: len,
                                inner: osz,
                            },
                            *zp,
                            *signed,
                            out,
                            Par::SEQ,
                        )
                    }
                }
            }
        }
    };
    // SAFETY: each task writes its own chunks' output planes, in its worker's slot.
    unsafe { par.for_ranges(units, chunk * osz * ks, &job) };
}

/// C entry point: `params` a `QDepthwiseParams` blob; `x` the 8-bit input, `w` and `bias`
/// (null: none) the float32 weights and bias, `y` the 8-bit output.
///
/// # Safety
/// `params` is null or a sealed blob; the buffers hold the tensors it describes, `scratch`
/// its `scratch()` for every worker of `threads`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_qdepthwise_8(
    params: *const i64,
    x: *const u8,
    w: *const f32,
    bias: *const f32,
    y: *mut u8,
    scratch: *mut f32,
    threads: *const Threads,
) -> Status {
    // SAFETY: caller contract.
    let p = match unsafe { params::blob(params) }.and_then(QDepthwiseParams::decode) {
        Ok(p) => p,
        Err(_) => return crate::abi::ONNXC_ERR_PARAMS,
    };
    // SAFETY: caller contract.
    let par = unsafe { Par::from_raw(threads) };
    let (_, slots) = p.scratch().layout(scratch);
    // SAFETY: caller contract.
    unsafe { qdepthwise(&p, x, w, bias, y, slots, par) };
    ONNXC_OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::par::test_threads;

    fn geometry(
        n: i64,
        c: i64,
        hw: [i64; 2],
        k: [i64; 2],
        s: [i64; 2],
        pad: [i64; 2],
    ) -> ConvGeometry<'static> {
        let out: Vec<i64> = (0..2)
            .map(|d| (hw[d] + 2 * pad[d] - k[d]) / s[d] + 1)
            .collect();
        ConvGeometry {
            n,
            c,
            m: c,
            group: c,
            input: hw.as_slice().into(),
            kernel: k.as_slice().into(),
            output: out.as_slice().into(),
            strides: s.as_slice().into(),
            dilations: [1, 1].as_slice().into(),
            pads: pad.as_slice().into(),
            wide_simd: true,
            no_winograd: true,
            input_planes: Cow::Borrowed(&[]),
            path: Default::default(),
        }
    }

    fn bytes(len: usize, seed: u64) -> Vec<u8> {
        let mut s = seed | 1;
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s as u8
            })
            .collect()
    }

    /// The three steps the kernel replaces, on the whole tensor: `quantize::dequantize`,
    /// `conv_f32` (one worker), then `quantize::quantize` or `requantize::requantize`.
    fn three_steps(p: &QDepthwiseParams, x: &[u8], w: &[f32], bias: &[f32]) -> Vec<u8> {
        let g = &p.conv;
        let (n, c) = (g.n as usize, g.c as usize);
        let (isz, osz) = (g.isize(), g.osize());
        let mut xf = vec![0f32; x.len()];
        let mut yf = vec![0f32; n * c * osz];
        let mut y = vec![0u8; n * c * osz];
        let mut scratch = vec![0f32; g.scratch(true).single() / 4 + 16];
        // SAFETY: the buffers hold the tensors of the geometry, the scratch what it needs.
        unsafe {
            crate::quantize::dequantize(
                x.as_ptr(),
                n * c * isz,
                p.widen.scale,
                p.widen.zp,
                p.widen.signed,
                xf.as_mut_ptr(),
                Par::SEQ,
            );
            super::super::conv_f32(
                Par::SEQ,
                g,
                xf.as_ptr(),
                w.as_ptr(),
                true,
                bias.as_ptr(),
                std::ptr::null(),
                f32::NEG_INFINITY,
                f32::INFINITY,
                yf.as_mut_ptr(),
                scratch.as_mut_ptr(),
            );
            match &p.narrow {
                Narrow::Quantize { scale, zp, signed } => crate::quantize::quantize(
                    yf.as_ptr(),
                    yf.len(),
                    *scale,
                    *zp,
                    *signed,
                    y.as_mut_ptr(),
                    Par::SEQ,
                ),
                Narrow::Requantize {
                    factors,
                    zp,
                    signed,
                } => crate::requantize::requantize(
                    yf.as_ptr(),
                    factors.as_ptr(),
                    factors.len() == 1,
                    crate::requantize::Layout {
                        outer: n,
                        channels: c,
                        inner: osz,
                    },
                    *zp,
                    *signed,
                    y.as_mut_ptr(),
                    Par::SEQ,
                ),
            }
        }
        y
    }

    /// Plane-by-plane and block-chunked geometries (a channel count past whole blocks,
    /// small planes, stride 2, a 5×5 kernel, two images), QLinearConv's exact requantization
    /// (centered int8 weights, per-channel factors) and a QDQ model's float quantization
    /// (int8 activations), on every test pool: the three steps' bytes.
    #[test]
    fn matches_the_three_steps() {
        let cases = [
            geometry(1, 5, [19, 23], [3, 3], [1, 1], [1, 1]),
            geometry(2, 21, [7, 7], [3, 3], [1, 1], [1, 1]),
            geometry(1, 40, [14, 14], [3, 3], [2, 2], [1, 1]),
            geometry(1, 16, [30, 30], [3, 3], [1, 1], [1, 1]),
            geometry(1, 3, [40, 37], [5, 5], [2, 2], [2, 2]),
            geometry(1, 48, [9, 9], [5, 5], [1, 1], [2, 2]),
        ];
        for (i, g) in cases.into_iter().enumerate() {
            let (n, c) = (g.n as usize, g.c as usize);
            let ks = g.ksize();
            let x = bytes(n * c * g.isize(), 7 + i as u64);
            let exact_w: Vec<f32> = bytes(c * ks, 11 + i as u64)
                .iter()
                .map(|&b| b as i8 as f32)
                .collect();
            let real_w: Vec<f32> = exact_w.iter().map(|&v| v * 0.0123).collect();
            let exact_b: Vec<f32> = (0..c).map(|k| (k as f32 - 7.0) * 301.0).collect();
            let real_b: Vec<f32> = exact_b.iter().map(|&v| v * 1e-3).collect();
            let factors: Vec<f32> = (0..c).map(|k| 1.0 / (97.0 + 13.0 * k as f32)).collect();
            let kinds = [
                (
                    Widen {
                        scale: 1.0,
                        zp: 131,
                        signed: false,
                    },
                    Narrow::Requantize {
                        factors: Cow::Borrowed(&factors[..]),
                        zp: 3,
                        signed: false,
                    },
                    &exact_w,
                    &exact_b,
                ),
                (
                    Widen {
                        scale: 0.021,
                        zp: -5,
                        signed: true,
                    },
                    Narrow::Quantize {
                        scale: 0.047,
                        zp: -9,
                        signed: true,
                    },
                    &real_w,
                    &real_b,
                ),
            ];
            for (widen, narrow, w, b) in kinds {
                let p = QDepthwiseParams {
                    conv: g.clone(),
                    widen,
                    narrow,
                };
                let blob = p.encode();
                let p = QDepthwiseParams::decode(&blob).expect("a valid blob");
                let want = three_steps(&p, &x, w, b);
                for (workers, threads) in test_threads() {
                    let need = p.scratch();
                    let mut y = vec![0xa5u8; want.len()];
                    let mut scratch =
                        vec![0f32; (need.single() + workers * need.rounded().per_worker) / 4 + 16];
                    let (_, slots) = need.layout(scratch.as_mut_ptr());
                    // SAFETY: the buffers hold the geometry's tensors, the slots the scratch;
                    // the pool is a test pool.
                    unsafe {
                        qdepthwise(
                            &p,
                            x.as_ptr(),
                            w.as_ptr(),
                            b.as_ptr(),
                            y.as_mut_ptr(),
                            slots,
                            Par::from_raw(threads),
                        )
                    };
                    assert!(y == want, "case {i}, {:?}, {workers} workers", p.narrow);
                }
            }
        }
    }

    #[test]
    fn blobs_are_validated() {
        let p = QDepthwiseParams {
            conv: geometry(1, 4, [5, 5], [3, 3], [1, 1], [1, 1]),
            widen: Widen {
                scale: 1.0,
                zp: 0,
                signed: false,
            },
            narrow: Narrow::Requantize {
                factors: Cow::Owned(vec![0.5; 4]),
                zp: 0,
                signed: false,
            },
        };
        let blob = p.encode();
        assert_eq!(QDepthwiseParams::decode(&blob).as_ref(), Ok(&p));
        let mut bad = p.clone();
        bad.narrow = Narrow::Requantize {
            factors: Cow::Owned(vec![0.5; 3]),
            zp: 0,
            signed: false,
        };
        assert!(QDepthwiseParams::decode(&bad.encode()).is_err());
        let mut bad = p.clone();
        bad.widen.zp = 300;
        assert!(QDepthwiseParams::decode(&bad.encode()).is_err());
        let mut bad = p.clone();
        bad.conv.group = 1;
        bad.conv.m = 4;
        assert!(QDepthwiseParams::decode(&bad.encode()).is_err());
        assert!(QDepthwiseParams::decode(&blob[..blob.len() - 1]).is_err());
    }
}
