//! Integer convolution: uint8 activations × int8 weights with exact int32 accumulation,
//! the output requantized (or dequantized) in the epilogue. Runs QLinearConv, ConvInteger
//! and the DequantizeLinear → Conv → QuantizeLinear groups of QDQ models.
//!
//! Per group, the convolution is the GEMM `acc[m, p] = Σ_k w[m, k] · x̂[k, p]` over
//! `k = (channel, tap)` and the output positions `p`, with `x̂` the im2col matrix of the
//! input (padding reads the input's zero point). The weights are packed when the model is
//! compiled (`QConvParams::encode`): blocks of `MR` output channels, `k` in groups of four
//! bytes (`[block][k/4][MR][4]`, zero-padded), so one 32-bit broadcast feeds a four-way
//! dot product. The activations are packed per panel of `NR` output positions at run time
//! (`pack.rs`, `[k/4][NR][4]`). `kernel.rs` multiplies a block by a panel into an `MR × NR`
//! int32 tile: AVX-512 VNNI (`vpdpbusd`), AVX2 (both operands widened to int16 and
//! `vpmaddwd`, so no pairwise int16 sum saturates, unlike `vpmaddubsw`) or portable code.
//! The three give the same integers, so every CPU computes the same bits.
//!
//! Zero points (`x_zp`, per-channel `w_zp`) are folded in exactly:
//! `Σ (w − zw)(x − zx) = Σ w·x − zx·Σ_k w − zw·Σ_k x + K·zx·zw`; the terms without `x` are one
//! constant per channel (`corr`, with the int32 bias), the `zw·Σ_k x` term is computed per
//! panel only when some `zw` is not zero. int8 activations are flipped to uint8 (`x + 128`,
//! the zero point with them) while they are packed. All integer arithmetic wraps as int32,
//! which is exact whenever the true sum fits in int32.
//!
//! The epilogue (`QOut`): the int32 sum; float32 `acc · scale[m] + fbias[m]` (a QDQ
//! convolution whose result is not quantized again); or the reference's requantization
//! `clamp(round_half_even(acc · f64(scale[m])) + y_zp, lo, hi)`, bit for bit what onnx's
//! reference evaluator computes for QLinearConv in float64 (onnxruntime rounds the product in
//! float32, which can differ by one step at a tie). The vector tiers compute it in float32
//! lanes and redo in float64 the rare lanes where that could differ (`requant.rs`).
//!
//! Work is split over output panels (`par`); each worker packs its own panels into its
//! scratch slot. Depthwise convolutions are not run here (a block of `MR` channels would
//! hold one).

/// Runs `body` for each of a tile's first `rows` rows (of `MR` = 8), with `r` the row and
/// `a` its accumulators taken from `acc` by a constant index, so that the tile's
/// accumulators stay in registers (a loop over the array spills them to the stack and
/// reads them back).
macro_rules! each_row {
    ($acc:ident, $rows:expr, |$r:ident, $a:ident| $body:block) => {
        each_row!(@ $acc, $rows, $r, $a, $body, 0 1 2 3 4 5 6 7)
    };
    (@ $acc:ident, $rows:expr, $r:ident, $a:ident, $body:block, $($i:literal)*) => {
        const { assert!($crate::qconv::MR == 8) };
        $(
            if $i < $rows {
                let ($r, $a) = ($i, &$acc[$i]);
                $body
            }
        )*
    };
}

#[cfg(target_arch = "x86_64")]
mod avx2;
mod kernel;
pub mod matmul;
mod matmul_kernel;
mod pack;
mod requant;
#[cfg(test)]
mod tests;

use crate::abi::ONNXC_OK;
use crate::conv::ConvGeometry;
use crate::kernels::Status;
use crate::par::{Par, ScratchNeed, Slots};
use crate::params;

/// Output channels per packed weight block (rows of a tile).
pub const MR: usize = 8;
/// Output positions per activation panel (columns of a tile).
pub const NR: usize = 32;

/// What the epilogue writes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum QOut {
    /// The int32 sum (ConvInteger).
    I32 = 0,
    /// float32 `acc · scale[m] + fbias[m]`.
    F32 = 1,
    /// uint8 `clamp(round(acc · scale[m]) + y_zp, lo, hi)`.
    U8 = 2,
    /// int8, as `U8`.
    I8 = 3,
}

impl QOut {
    fn from_code(v: i64) -> params::Result<QOut> {
        Ok(match v {
            0 => QOut::I32,
            1 => QOut::F32,
            2 => QOut::U8,
            3 => QOut::I8,
            _ => return Err(params::ParamError("unknown output kind")),
        })
    }

    /// Bytes per output element.
    pub fn size(self) -> usize {
        match self {
            QOut::I32 | QOut::F32 => 4,
            QOut::U8 | QOut::I8 => 1,
        }
    }
}

/// The scalar quantization parameters of a call.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct QScalars {
    pub out: QOut,
    /// The activations are int8 (flipped to uint8 while packed).
    pub x_signed: bool,
    /// The activations' zero point, in their type.
    pub x_zp: i32,
    /// The output's zero point (quantized outputs).
    pub y_zp: i32,
    /// Bounds of the quantized output (its type's range, narrowed by a fused Relu).
    pub lo: i32,
    pub hi: i32,
}

/// One integer convolution: its geometry, scalars, per-channel constants and packed
/// weights, as decoded from a parameter blob (borrowing it) or built by `encode`.
#[derive(Debug)]
pub struct QConvParams<'a> {
    pub conv: ConvGeometry<'a>,
    pub q: QScalars,
    /// Some weight zero point is not zero (the `zw·Σ_k x` term is needed).
    pub has_wzp: bool,
    /// Every pair of weights that a four-byte group's dot product adds first (bytes 0 and
    /// 1, bytes 2 and 3) has `|w0| + |w1| ≤ 128` (`short_pairs`).
    pub short_pairs: bool,
    /// Every output's exact sum (zero points and bias included) stays below 2^24 in
    /// magnitude, whatever the activations (`small_sums`).
    pub small_sums: bool,
    /// Per output channel: the constant part of the sum (bias, zero-point terms).
    pub corr: &'a [i32],
    /// Per output channel: `Σ_k w − k·zw` (wrapped to int32), what the constant part
    /// changes by per step of the activations' zero point (`with_x_zp`).
    pub zx_coeff: &'a [i32],
    /// Per output channel: the weights' zero point.
    pub wzp: &'a [i32],
    /// Per output channel: the scale of the epilogue.
    pub scale: &'a [f32],
    /// Per output channel: the float32 epilogue's bias.
    pub fbias: &'a [f32],
    /// `[group][block][k/4][MR][4]` int8 weights.
    pub weights: &'a [i8],
}

/// What the epilogue reads: the scalars, and per output row (a convolution's channel, a
/// matrix product's column) the constant part of the sum, the weights' zero point, the
/// scale and the float32 bias.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Epi<'a> {
    pub q: QScalars,
    /// The sums stay below 2^24 in magnitude (`small_sums`).
    pub small_sums: bool,
    pub corr: &'a [i32],
    pub wzp: &'a [i32],
    pub scale: &'a [f32],
    pub fbias: &'a [f32],
}

/// Where a convolution block's tile goes: its epilogue, its first channel and row count,
/// the panel's column sums (when some weight zero point is not zero) and lane count, and
/// the outputs: row r's first `lanes` at `dst + r · row_bytes`.
#[derive(Copy, Clone)]
pub(crate) struct TileOut<'a> {
    pub epi: &'a Epi<'a>,
    pub ch0: usize,
    pub rows: usize,
    pub colsum: Option<&'a [i32; NR]>,
    pub lanes: usize,
    pub dst: *mut u8,
    pub row_bytes: usize,
}

/// Words after the seal before the geometry: out, flags, x_zp, y_zp, lo, hi, geometry length.
const HEADER: usize = 7;

fn words_for(bytes: usize) -> usize {
    bytes.div_ceil(8)
}

/// Little-endian words holding `bytes`, zero-padded.
fn pack_words(bytes: &[u8], out: &mut Vec<i64>) {
    for c in bytes.chunks(8) {
        let mut b = [0u8; 8];
        b[..c.len()].copy_from_slice(c);
        out.push(i64::from_le_bytes(b));
    }
}

/// The first `n` elements of type `T` (4 bytes, any bit pattern valid) stored in `w`.
fn view<T: Copy>(w: &[i64], n: usize) -> &[T] {
    const { assert!(std::mem::size_of::<T>() <= 8 && 8 % std::mem::align_of::<T>() == 0) };
    assert!(n * std::mem::size_of::<T>() <= w.len() * 8);
    // SAFETY: `w` holds at least `n` elements of `T` (checked), is aligned for `T` (8-byte
    // words), and `T` is only instantiated with plain integer and float types.
    unsafe { std::slice::from_raw_parts(w.as_ptr() as *const T, n) }
}

/// Little-endian words holding the 32-bit values `v`, zero-padded.
fn pack_u32s(v: impl IntoIterator<Item = u32>, out: &mut Vec<i64>) {
    let bytes: Vec<u8> = v.into_iter().flat_map(u32::to_le_bytes).collect();
    pack_words(&bytes, out);
}

/// The blob `p` (header and per-output constants so far) with the tail every integer
/// product's blob ends with — per output the weights' zero point, the epilogue's scale and
/// float32 bias, then the packed weights — sealed.
fn seal_with_tail(
    mut p: Vec<i64>,
    w_zp: &[i32],
    scale: &[f32],
    fbias: &[f32],
    packed: &[u8],
) -> Vec<i64> {
    pack_u32s(w_zp.iter().map(|&v| v as u32), &mut p);
    pack_u32s(scale.iter().map(|v| v.to_bits()), &mut p);
    pack_u32s(fbias.iter().map(|v| v.to_bits()), &mut p);
    pack_words(packed, &mut p);
    params::seal(p)
}

/// The next `n` 32-bit values of a blob (`pack_u32s`'s words).
fn read_u32s<'a, T: Copy>(r: &mut params::Reader<'a>, n: usize) -> params::Result<&'a [T]> {
    Ok(view(r.words(words_for(n * 4))?, n))
}

/// The packed weights of a blob, `dims`' product of bytes (`msg` when that is too large).
fn read_weights<'a>(
    r: &mut params::Reader<'a>,
    dims: impl IntoIterator<Item = usize>,
    msg: &'static str,
) -> params::Result<&'a [i8]> {
    let wbytes = params::product(dims.into_iter().map(|d| d as i64), msg)? as usize;
    Ok(view(r.words(words_for(wbytes))?, wbytes))
}

/// The flags of a blob's header word 1 beyond the activations' sign (bit 0).
#[derive(Copy, Clone)]
struct Flags {
    /// Bit 1: some weight zero point is not zero.
    has_wzp: bool,
    /// Bit 2: the packed weights have `short_pairs`.
    short_pairs: bool,
    /// Bit 3: every output's sum has `small_sums`.
    small_sums: bool,
}

/// A blob's header `[out, flags, x_zp, y_zp, lo, hi]` (`decode_header`'s).
fn encode_header(q: QScalars, f: Flags) -> [i64; 6] {
    [
        q.out as i64,
        q.x_signed as i64
            | (f.has_wzp as i64) << 1
            | (f.short_pairs as i64) << 2
            | (f.small_sums as i64) << 3,
        q.x_zp as i64,
        q.y_zp as i64,
        q.lo as i64,
        q.hi as i64,
    ]
}

/// The scalars and flags of a blob's header (`encode_header`'s), validated.
fn decode_header(h: &[i64]) -> params::Result<(QScalars, Flags)> {
    let q = decode_scalars(h)?;
    params::ensure(h[1] & !15 == 0, "unknown flag bits")?;
    let flags = Flags {
        has_wzp: h[1] & 2 != 0,
        short_pairs: h[1] & 4 != 0,
        small_sums: h[1] & 8 != 0,
    };
    Ok((q, flags))
}

impl QScalars {
    /// The activations' zero point `x_zp` as they are packed (int8 flipped to uint8).
    fn packed_zp(&self, x_zp: i32) -> i64 {
        x_zp as i64 + if self.x_signed { 128 } else { 0 }
    }
}

/// The constant part of an output's sum `Σ_k (w − zw)(x − zx) + bias`, given the bias, the
/// packed activations' zero point `zx` (`QScalars::packed_zp`), `Σ_k w` over the output's
/// `k` weights and their zero point `zw`: `bias − zx·Σ_k w + k·zx·zw`, wrapped to int32.
#[inline(always)]
fn constant_part(bias: i64, zx: i64, wsum: i64, k: usize, zw: i32) -> i32 {
    (bias - zx * wsum + k as i64 * zx * zw as i64) as i32
}

impl QConvParams<'_> {
    fn epi(&self) -> Epi<'_> {
        Epi {
            q: self.q,
            small_sums: self.small_sums,
            corr: self.corr,
            wzp: self.wzp,
            scale: self.scale,
            fbias: self.fbias,
        }
    }

    /// Geometry facts the kernel loops use.
    fn dims(&self) -> Dims {
        let g = &self.conv;
        let group = g.group as usize;
        let cg = g.c as usize / group;
        let mg = g.m as usize / group;
        let taps: usize = g.kernel.iter().product::<i64>() as usize;
        let k = cg * taps;
        let k4 = k.div_ceil(4);
        Dims {
            group,
            cg,
            mg,
            k,
            k4,
            blocks: mg.div_ceil(MR),
            isize: g.input.iter().product::<i64>() as usize,
            osize: g.output.iter().product::<i64>() as usize,
        }
    }

    /// Scratch of a call, per worker (`Slot`): one panel with room to widen it, its column
    /// sums, and one widened weight block (the AVX2 tier's; the tier is chosen at run time).
    pub fn scratch(&self) -> ScratchNeed {
        let d = self.dims();
        ScratchNeed {
            // The constant parts for a zero point given at run time (`with_x_zp`).
            shared: self.conv.m as usize * 4,
            per_worker: Slot::bytes(d.k4),
        }
    }

    /// These parameters for activations whose zero point `x_zp` is given at run time (a
    /// dynamically quantized input), the constant parts of the sums written to `corr` (one
    /// per output channel): each shifts by `−(zx' − zx)·(Σ_k w − k·zw)` (`constant_part`,
    /// wrapped to int32 as it is).
    pub fn with_x_zp<'b>(&'b self, x_zp: i32, corr: &'b mut [i32]) -> QConvParams<'b> {
        let dz = self.q.packed_zp(x_zp) - self.q.packed_zp(self.q.x_zp);
        let m = self.conv.m as usize;
        for ((c, &old), &coeff) in corr[..m].iter_mut().zip(self.corr).zip(self.zx_coeff) {
            *c = (old as i64).wrapping_sub(dz.wrapping_mul(coeff as i64)) as i32;
        }
        QConvParams {
            conv: self.conv.clone(),
            q: QScalars { x_zp, ..self.q },
            corr: &corr[..m],
            ..*self
        }
    }

    /// The sealed blob of a convolution: `w` holds the `[m, c/group, taps…]` weights (int8;
    /// the caller maps uint8 weights to int8 by subtracting 128 from them and their zero
    /// points), `w_zp` one zero point per output channel, `bias` the int32 bias (or none),
    /// `scale`/`fbias` one per output channel (ignored by `QOut::I32`). The constant parts
    /// of the zero-point terms are folded into the bias here.
    #[allow(clippy::too_many_arguments, reason = "every constant of the op")]
    pub fn encode(
        conv: &ConvGeometry,
        q: QScalars,
        w: &[i8],
        w_zp: &[i32],
        bias: Option<&[i32]>,
        scale: &[f32],
        fbias: &[f32],
    ) -> Vec<i64> {
        let m = conv.m as usize;
        let group = conv.group as usize;
        let (cg, mg) = (conv.c as usize / group, m / group);
        let taps: usize = conv.kernel.iter().product::<i64>() as usize;
        let k = cg * taps;
        let k4 = k.div_ceil(4);
        let blocks = mg.div_ceil(MR);
        assert_eq!(w.len(), m * k, "weights of the geometry");
        assert!(w_zp.len() == m && scale.len() == m && fbias.len() == m);
        let zx = q.packed_zp(q.x_zp);
        let rowsum = |ch: usize| {
            w[ch * k..(ch + 1) * k]
                .iter()
                .map(|&v| v as i64)
                .sum::<i64>()
        };
        let zx_coeff: Vec<i32> = (0..m)
            .map(|ch| (rowsum(ch) - k as i64 * w_zp[ch] as i64) as i32)
            .collect();
        let corr: Vec<i32> = (0..m)
            .map(|ch| {
                let b = bias.map_or(0, |b| b[ch] as i64);
                constant_part(b, zx, rowsum(ch), k, w_zp[ch])
            })
            .collect();
        let mut packed = vec![0u8; group * blocks * k4 * MR * 4];
        for gi in 0..group {
            for ml in 0..mg {
                let ch = gi * mg + ml;
                let (blk, r) = (ml / MR, ml % MR);
                let base = (gi * blocks + blk) * k4 * MR * 4;
                for kk in 0..k {
                    packed[base + (kk / 4) * MR * 4 + r * 4 + kk % 4] = w[ch * k + kk] as u8;
                }
            }
        }
        let flags = Flags {
            has_wzp: w_zp.iter().any(|&z| z != 0),
            short_pairs: short_pairs(&packed),
            small_sums: small_sums((0..m).map(|ch| {
                let row = &w[ch * k..(ch + 1) * k];
                (
                    row.iter()
                        .map(|&v| (v as i64 - w_zp[ch] as i64).abs())
                        .sum(),
                    bias.map_or(0, |b| b[ch]),
                )
            })),
        };
        let mut p = encode_header(q, flags).to_vec();
        let geo = conv.encode();
        p.push(geo.len() as i64);
        p.extend_from_slice(&geo);
        pack_u32s(corr.iter().map(|&v| v as u32), &mut p);
        pack_u32s(zx_coeff.iter().map(|&v| v as u32), &mut p);
        seal_with_tail(p, w_zp, scale, fbias, &packed)
    }

    /// The convolution `encode` wrote into `blob`, validated.
    pub fn decode(blob: &[i64]) -> params::Result<QConvParams<'_>> {
        use params::{ensure, in_range};
        let mut r = params::Reader::new(blob)?;
        let h: [i64; HEADER] = r.array()?;
        let (q, flags) = decode_header(&h[..6])?;
        let glen = in_range(
            h[6],
            1,
            r.remaining() as i64,
            "geometry length out of range",
        )?;
        let conv = ConvGeometry::decode(r.words(glen as usize)?)?;
        ensure(
            conv.input_planes.is_empty(),
            "integer convolutions read planes in order",
        )?;
        let m = conv.m as usize;
        let mut p = QConvParams {
            conv,
            q,
            has_wzp: flags.has_wzp,
            short_pairs: flags.short_pairs,
            small_sums: flags.small_sums,
            corr: &[],
            zx_coeff: &[],
            wzp: &[],
            scale: &[],
            fbias: &[],
            weights: &[],
        };
        let d = p.dims();
        p.corr = read_u32s(&mut r, m)?;
        p.zx_coeff = read_u32s(&mut r, m)?;
        p.wzp = read_u32s(&mut r, m)?;
        p.scale = read_u32s(&mut r, m)?;
        p.fbias = read_u32s(&mut r, m)?;
        let dims = [d.group, d.blocks, d.k4, MR * 4];
        p.weights = read_weights(&mut r, dims, "the weights are too large")?;
        r.finish()?;
        Ok(p)
    }
}

impl QConvParams<'_> {
    /// `blob` with its geometry's batch and spatial sizes replaced by the least ones its
    /// window allows (batch 1, inputs of 1): the blob of a call that gives its sizes in a
    /// geometry of their own (`onnxc_qconv`'s `geometry`), the same whatever those sizes
    /// are, so one compiled call serves sizes known only at run time.
    pub fn sizeless(blob: &[i64]) -> params::Result<Vec<i64>> {
        let p = QConvParams::decode(blob)?;
        let mut g = p.conv.clone();
        g.n = 1;
        for d in 0..g.input.len() {
            let span = params::window_span(g.kernel[d], g.dilations[d]);
            g.input[d] = 1;
            g.output[d] = ((1 + g.pads[d] - span).div_euclid(g.strides[d]) + 1).max(1);
        }
        g.validate()?;
        let geo = g.encode();
        // The geometry follows the length word and the header (whose last word is its
        // length, unchanged: the rank and channels are).
        let mut out = blob.to_vec();
        out[1 + HEADER..1 + HEADER + geo.len()].copy_from_slice(&geo);
        QConvParams::decode(&out)?;
        Ok(out)
    }

    /// These parameters with the batch and spatial sizes of `g`, whose channels, group,
    /// window, strides, dilations, padding and path must be the blob's.
    pub fn with_sizes<'g>(&'g self, g: ConvGeometry<'g>) -> params::Result<QConvParams<'g>> {
        let c = &self.conv;
        params::ensure(
            g.c == c.c
                && g.m == c.m
                && g.group == c.group
                && g.kernel == c.kernel
                && g.strides == c.strides
                && g.dilations == c.dilations
                && g.pads == c.pads
                && g.wide_simd == c.wide_simd
                && g.no_winograd == c.no_winograd
                && g.path == c.path
                && g.input_planes.is_empty(),
            "the geometry is not the weights' convolution",
        )?;
        Ok(QConvParams { conv: g, ..*self })
    }
}

/// Whether every pair of int8 weights at bytes (0, 1) and (2, 3) of the packed four-byte
/// groups has `|w0| + |w1| ≤ 128`: then no pair of products with uint8 activations leaves
/// int16 (255 · 128 < 2^15), and `vpmaddubsw` sums them exactly. Weights quantized to a
/// reduced (7-bit) range are.
pub(super) fn short_pairs(packed: &[u8]) -> bool {
    packed
        .chunks_exact(2)
        .all(|p| (p[0] as i8).unsigned_abs() as u32 + (p[1] as i8).unsigned_abs() as u32 <= 128)
}

/// Whether every output's exact sum `Σ_k (w − zw)(x − zx) + bias` stays below 2^24 in
/// magnitude for any uint8 activations and zero point (`|x − zx| ≤ 255`), given each
/// output's `Σ_k |w − zw|` and bias: then the sums convert to float32 exactly, which the
/// vector epilogues' requantization relies on (`requant.rs`; it checks each vector
/// otherwise).
pub(super) fn small_sums(rows: impl Iterator<Item = (i64, i32)>) -> bool {
    let mut fit = true;
    for (abs_weights, bias) in rows {
        fit &= abs_weights
            .saturating_mul(255)
            .saturating_add((bias as i64).abs())
            < 1 << 24;
    }
    fit
}

/// The scalars of a blob's header `[out, flags, x_zp, y_zp, lo, hi]` (flag bit 0: int8
/// activations), validated.
fn decode_scalars(h: &[i64]) -> params::Result<QScalars> {
    use params::in_range;
    let out = QOut::from_code(h[0])?;
    let x_signed = h[1] & 1 != 0;
    let x_zp = if x_signed {
        in_range(h[2], -128, 127, "x zero point out of range")?
    } else {
        in_range(h[2], 0, 255, "x zero point out of range")?
    };
    let y_zp = in_range(h[3], -128, 255, "y zero point out of range")?;
    let (lo, hi) = match out {
        QOut::U8 => (0, 255),
        QOut::I8 => (-128, 127),
        _ => (i64::MIN, i64::MAX),
    };
    let qlo = in_range(h[4], lo.max(-128), hi.min(255), "bounds out of range")?;
    let qhi = in_range(h[5], qlo, hi.min(255), "bounds out of range")?;
    Ok(QScalars {
        out,
        x_signed,
        x_zp: x_zp as i32,
        y_zp: y_zp as i32,
        lo: qlo as i32,
        hi: qhi as i32,
    })
}

/// Derived extents of a call.
#[derive(Copy, Clone, Debug)]
struct Dims {
    group: usize,
    cg: usize,
    mg: usize,
    k: usize,
    k4: usize,
    blocks: usize,
    isize: usize,
    osize: usize,
}

/// Bytes of a panel of `k4` groups widened to int16 pairs (`[k4][2][NR]` dwords, twice the
/// packed panel; the AVX2 tier).
const fn wide_panel_bytes(k4: usize) -> usize {
    k4 * 8 * NR
}

/// Dwords of a weight block of `k4` groups widened to int16 pairs (`[k4][2][MR]`).
const fn wide_block_words(k4: usize) -> usize {
    k4 * 2 * MR
}

/// A worker's scratch: the panel (room to widen it), its column sums (`NR` i32), a widened
/// weight block.
struct Slot;

impl Slot {
    fn bytes(k4: usize) -> usize {
        wide_panel_bytes(k4) + NR * 4 + wide_block_words(k4) * 4
    }
}

/// The tile kernels, one per instruction set; all give the same integers.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Tier {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX-512 VNNI; `vbmi`: panels are interleaved by byte permutes (AVX-512 VBMI).
    #[cfg(target_arch = "x86_64")]
    Vnni512 {
        vbmi: bool,
    },
}

impl Tier {
    /// The best tier this CPU runs (capped by `ONNXC_RUNTIME_ISA`).
    pub(crate) fn detect() -> Tier {
        #[cfg(target_arch = "x86_64")]
        {
            if crate::isa::avx512() && std::is_x86_feature_detected!("avx512vnni") {
                return Tier::Vnni512 {
                    vbmi: std::is_x86_feature_detected!("avx512vbmi"),
                };
            }
            if crate::isa::avx2() {
                return Tier::Avx2;
            }
        }
        Tier::Portable
    }
}

/// Runs the convolution of `x` (`[n, c, input…]`, uint8 or int8) into `y` (`[n, m,
/// output…]` of `p.q.out`'s type).
///
/// # Safety
/// `x` and `y` hold the tensors the geometry describes; `scratch` holds `p.scratch()` for
/// every worker of `par`.
pub unsafe fn qconv(p: &QConvParams, x: *const u8, y: *mut u8, scratch: Slots, par: Par) {
    // SAFETY: forwarded.
    unsafe { qconv_on(Tier::detect(), p, x, y, scratch, par) }
}

/// `qconv` on the given tier (tests run every tier the CPU has).
///
/// # Safety
/// As `qconv`; the CPU runs `tier`.
pub(crate) unsafe fn qconv_on(
    tier: Tier,
    p: &QConvParams,
    x: *const u8,
    y: *mut u8,
    scratch: Slots,
    par: Par,
) {
    let d = p.dims();
    let n = p.conv.n as usize;
    let panels = d.osize.div_ceil(NR);
    let units = n * d.group * panels;
    if units == 0 || d.mg == 0 {
        return;
    }
    let x_addr = x as usize;
    let y_addr = y as usize;
    // The input tensor's bytes, which the AVX2 packer may read beyond a span's lanes.
    let x_all = x_addr..x_addr + n * p.conv.c as usize * d.isize;
    let cost = (d.k * d.mg * NR / 4).max(1);
    let epi = p.epi();
    let job = |range: std::ops::Range<usize>, worker: usize| {
        let slot = scratch.at(worker) as *mut u8;
        // SAFETY: the worker's slot holds `Slot::bytes(k4)`: the panel, its column sums and
        // a weight block, each 4-byte aligned (the panel's size is a multiple of 256).
        let (wide, colsum, wblock) = unsafe {
            let pb = wide_panel_bytes(d.k4);
            (
                std::slice::from_raw_parts_mut(slot, pb),
                &mut *(slot.add(pb) as *mut [i32; NR]),
                std::slice::from_raw_parts_mut(
                    slot.add(pb + NR * 4) as *mut u32,
                    wide_block_words(d.k4),
                ),
            )
        };
        let mut tile = [[0i32; NR]; MR];
        for u in range {
            let img = u / (d.group * panels);
            let gi = (u / panels) % d.group;
            let p0 = (u % panels) * NR;
            let lanes = NR.min(d.osize - p0);
            let xg = x_addr + (img * p.conv.c as usize + gi * d.cg) * d.isize;
            let panel = &mut wide[..d.k4 * 4 * NR];
            let x = xg as *const u8;
            let q = pack::Panel {
                p,
                d: &d,
                x,
                p0,
                lanes,
            };
            // SAFETY: the group's planes of image `img` lie in `x`, inside the input tensor
            // `x_all`; the AVX-512 packer runs on a CPU with the VNNI tier's features, the
            // AVX2 packer on one with AVX2.
            unsafe {
                #[cfg(target_arch = "x86_64")]
                let done = match tier {
                    Tier::Vnni512 { vbmi } => pack::pack_panel_avx512(q, panel, vbmi),
                    Tier::Avx2 => pack::pack_panel_avx2(q, panel, x_all.clone()),
                    Tier::Portable => false,
                };
                #[cfg(not(target_arch = "x86_64"))]
                let done = false;
                if !done {
                    pack::pack_panel(q, panel);
                }
            }
            if p.has_wzp {
                pack::column_sums(panel, d.k4, colsum);
            }
            #[cfg(target_arch = "x86_64")]
            if tier == Tier::Avx2 && !p.short_pairs {
                // SAFETY: the CPU has AVX2 (caller).
                unsafe { avx2::widen_panel(d.k4, wide) };
            }
            let es = p.q.out.size();
            for blk in 0..d.blocks {
                let w = &p.weights[(gi * d.blocks + blk) * d.k4 * MR * 4..][..d.k4 * MR * 4];
                let m0 = gi * d.mg + blk * MR;
                let out = TileOut {
                    epi: &epi,
                    ch0: m0,
                    rows: MR.min(d.mg - blk * MR),
                    colsum: p.has_wzp.then_some(&*colsum),
                    lanes,
                    dst: (y_addr + ((img * p.conv.m as usize + m0) * d.osize + p0) * es) as *mut u8,
                    row_bytes: d.osize * es,
                };
                // SAFETY: the CPU runs `tier` (caller); the `lanes` outputs of channels m0 ..
                // m0 + rows from `p0` lie in `y`, one plane apart; each (image, group, panel)
                // is written by one task only; `w` and the panel hold `k4` groups (widened for
                // AVX2 unless the weights have short pairs, as `encode` flags them, when the
                // packed operands are multiplied as they are).
                unsafe {
                    match tier {
                        #[cfg(target_arch = "x86_64")]
                        Tier::Avx2 if p.short_pairs => {
                            avx2::tile_epilogue_bytes(d.k4, w, &wide[..d.k4 * 4 * NR], &out)
                        }
                        #[cfg(target_arch = "x86_64")]
                        Tier::Avx2 => {
                            avx2::widen_weights(d.k4, w, wblock);
                            avx2::tile_epilogue(d.k4, wblock, wide, &out)
                        }
                        #[cfg(target_arch = "x86_64")]
                        Tier::Vnni512 { .. } => {
                            kernel::tile_epilogue_vnni512(d.k4, w, &wide[..d.k4 * 4 * NR], &out)
                        }
                        Tier::Portable => {
                            let panel = &wide[..d.k4 * 4 * NR];
                            kernel::tile_portable::<true>(
                                d.k4,
                                kernel::as_bytes(w),
                                panel,
                                &mut tile,
                            );
                            for (r, trow) in tile.iter().enumerate().take(out.rows) {
                                let dst = out.dst.add(r * out.row_bytes);
                                kernel::epilogue_scalar(&epi, m0 + r, trow, out.colsum, lanes, dst);
                            }
                        }
                    }
                }
            }
        }
    };
    // SAFETY: tasks write disjoint outputs and use their worker's scratch slot.
    unsafe { par.for_ranges(units, cost, &job) };
}

/// C entry point: `params` is a `QConvParams` blob; `geometry` null (the blob's sizes) or a
/// `ConvGeometry` blob giving the batch and spatial sizes of the call (its other fields
/// must be the blob's: `QConvParams::with_sizes`; the compiler passes a `sizeless` blob
/// and the sizes, which may follow dims taken at run time); `x` the uint8/int8 input,
/// `x_zp` null (the blob's zero point) or the activations' zero point given at run time,
/// `y` the output of the blob's type.
///
/// # Safety
/// `params` is null or a sealed blob, `geometry` null or a sealed blob; `x`, `y` hold the
/// tensors they describe, `x_zp` is null or one readable byte, `scratch` its `scratch()`
/// for every worker of `threads`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_qconv(
    params: *const i64,
    geometry: *const i64,
    x: *const u8,
    x_zp: *const u8,
    y: *mut u8,
    scratch: *mut f32,
    threads: *const crate::par::Threads,
) -> Status {
    let blob = params::decode_blob!(params, QConvParams::decode);
    let p = if geometry.is_null() {
        blob
    } else {
        let g = params::decode_blob!(geometry, ConvGeometry::decode);
        params::decoded!(blob.with_sizes(g))
    };
    // SAFETY: caller contract.
    let par = unsafe { Par::from_raw(threads) };
    let (shared, slots) = p.scratch().layout(scratch);
    if x_zp.is_null() {
        // SAFETY: caller contract.
        unsafe { qconv(&p, x, y, slots, par) };
    } else {
        // SAFETY: x_zp points to one byte (caller).
        let zp = unsafe {
            if p.q.x_signed {
                *x_zp as i8 as i32
            } else {
                *x_zp as i32
            }
        };
        // SAFETY: the shared scratch holds one i32 per output channel (`scratch`).
        let corr = unsafe { std::slice::from_raw_parts_mut(shared as *mut i32, p.conv.m as usize) };
        let q = p.with_x_zp(zp, corr);
        // SAFETY: caller contract.
        unsafe { qconv(&q, x, y, slots, par) };
    }
    ONNXC_OK
}
