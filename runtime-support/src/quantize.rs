//! QuantizeLinear and DequantizeLinear of a whole tensor with one scale and zero point, the
//! maps a QDQ model leaves between its integer kernels (around depthwise convolutions, at
//! its inputs and outputs). The schedule hands a map step whose body is exactly one of them
//! to these kernels (`schedule::quant_maps`), so each computes the map's float32
//! operations in its order, bit for bit:
//!
//! * quantize: `y = cast(max(min(round_half_even(x / s) + z, hi), lo))`, where a NaN stays
//!   NaN through the clamps and converts to 0, as the generated code's saturating
//!   conversion does;
//! * dequantize: `y = (x − z) · s`, the byte and the zero point widened to float32 first.
//!
//! Scalar code per element, compiled once per instruction set by `simd::dispatch` (the
//! compiler vectorizes it to the CPU's widest vectors); elements are split over the threads.

use crate::par::{Par, Threads};
use crate::simd::{self, Simd, Walk};

/// Flag bit of the C entry points' `flags`: int8 bytes (else uint8).
pub const SIGNED: i64 = 1;

/// `n` elements of `x` mapped into `y` with one scale and zero point (`Quantize`,
/// `Dequantize`).
#[derive(Copy, Clone)]
struct Map<A, B> {
    x: *const A,
    y: *mut B,
    n: usize,
    scale: f32,
    zp: f32,
    signed: bool,
}

impl<A, B> Map<A, B> {
    /// The map of `x[..n]` into `y[..n]`.
    fn new(x: *const A, y: *mut B, n: usize, scale: f32, zp: f32, signed: bool) -> Self {
        Map {
            x,
            y,
            n,
            scale,
            zp,
            signed,
        }
    }
}

/// `n` floats quantized to bytes.
type Quantize = Map<f32, u8>;

/// `n` bytes dequantized to floats.
type Dequantize = Map<u8, f32>;

/// The range of an int8 (`signed`) or uint8 value, as floats.
#[inline(always)]
pub(crate) fn byte_range(signed: bool) -> (f32, f32) {
    if signed {
        (-128.0, 127.0)
    } else {
        (0.0, 255.0)
    }
}

/// An elementwise walk's `n` inputs at `x` and outputs at `y` as slices.
///
/// # Safety
/// `x` and `y` hold `n` elements each, and `y`'s are not otherwise accessed during `'a`.
#[inline(always)]
pub(crate) unsafe fn walk_slices<'a, A, B>(
    x: *const A,
    y: *mut B,
    n: usize,
) -> (&'a [A], &'a mut [B]) {
    // SAFETY: caller contract.
    unsafe {
        (
            std::slice::from_raw_parts(x, n),
            std::slice::from_raw_parts_mut(y, n),
        )
    }
}

impl Walk for Quantize {
    type Out = ();

    #[inline(always)]
    unsafe fn run<S: Simd>(self, _: S) {
        // SAFETY: `x` and `y` hold `n` elements (the walk's contract).
        let (x, y) = unsafe { walk_slices(self.x, self.y, self.n) };
        let (s, z) = (self.scale, self.zp);
        let (lo, hi) = byte_range(self.signed);
        for (o, &a) in y.iter_mut().zip(x) {
            let v = (a / s).round_ties_even() + z;
            // The generated clamps: `c < v ? c : v` and `v < c ? c : v` (a NaN passes).
            let v = if hi < v { hi } else { v };
            let v = if v < lo { lo } else { v };
            let v = if v.is_nan() { 0.0 } else { v };
            // An integral value in the type's range: adding 1.5·2^23 puts it in the low bits
            // of the mantissa, whose low byte is the value's two's-complement byte.
            *o = (v + 12_582_912.0).to_bits() as u8;
        }
    }
}

impl Walk for Dequantize {
    type Out = ();

    #[inline(always)]
    unsafe fn run<S: Simd>(self, _: S) {
        // SAFETY: `x` and `y` hold `n` elements (the walk's contract).
        let (x, y) = unsafe { walk_slices(self.x, self.y, self.n) };
        let (s, z) = (self.scale, self.zp);
        if self.signed {
            for (o, &b) in y.iter_mut().zip(x) {
                *o = (b as i8 as f32 - z) * s;
            }
        } else {
            for (o, &b) in y.iter_mut().zip(x) {
                *o = (b as f32 - z) * s;
            }
        }
    }
}

/// `Par::for_ranges` cost units of a quantized element (a division and a rounding) and of a
/// dequantized one.
const QUANTIZE_COST: usize = 4;
const DEQUANTIZE_COST: usize = 2;

/// Elements of `x` mapped into `y` (`Quantize` or `Dequantize`), split over `par`'s threads
/// at `cost` units an element.
///
/// # Safety
/// `map.x` and `map.y` hold `map.n` elements; `par` as `Par::for_ranges`.
unsafe fn map_ranges<A, B>(map: Map<A, B>, par: Par, cost: usize)
where
    Map<A, B>: Walk<Out = ()>,
{
    let Map {
        n,
        scale,
        zp,
        signed,
        ..
    } = map;
    let (xa, ya) = (map.x as usize, map.y as usize);
    // SAFETY: each range's elements lie in x and y (caller), and only its walk writes them.
    unsafe {
        simd::dispatch_ranges(par, n, cost, |r| {
            let (x, y) = (xa as *const A, ya as *mut B);
            let (x, y) = (x.wrapping_add(r.start), y.wrapping_add(r.start));
            Map::new(x, y, r.len(), scale, zp, signed)
        })
    };
}

/// Quantizes `n` floats of `x` into `y`.
///
/// # Safety
/// `x` holds `n` floats, `y` `n` bytes; `par` as `Par::for_ranges`.
pub unsafe fn quantize(
    x: *const f32,
    n: usize,
    scale: f32,
    zp: i64,
    signed: bool,
    y: *mut u8,
    par: Par,
) {
    let map = Quantize::new(x, y, n, scale, zp as f32, signed);
    // SAFETY: forwarded.
    unsafe { map_ranges(map, par, QUANTIZE_COST) }
}

/// Dequantizes `n` bytes of `x` into `y`.
///
/// # Safety
/// `x` holds `n` bytes, `y` `n` floats; `par` as `Par::for_ranges`.
pub unsafe fn dequantize(
    x: *const u8,
    n: usize,
    scale: f32,
    zp: i64,
    signed: bool,
    y: *mut f32,
    par: Par,
) {
    let map = Dequantize::new(x, y, n, scale, zp as f32, signed);
    // SAFETY: forwarded.
    unsafe { map_ranges(map, par, DEQUANTIZE_COST) }
}

/// A C entry point's element count (none when negative) and `SIGNED` flag.
fn c_operands(n: i64, flags: i64) -> (usize, bool) {
    (n.max(0) as usize, flags & SIGNED != 0)
}

/// C entry point: `y = quantize(x)` over `n` elements, `scale` pointing at the scale;
/// `flags` `SIGNED` (int8 results).
///
/// # Safety
/// `x` holds `n` floats, `y` `n` bytes, `scale` one float; `threads` as `Par::from_raw`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_quantize_f32_8(
    x: *const f32,
    n: i64,
    scale: *const f32,
    zp: i64,
    flags: i64,
    y: *mut u8,
    threads: *const Threads,
) {
    let (n, signed) = c_operands(n, flags);
    // SAFETY: caller contract (`scale` holds one float).
    unsafe { quantize(x, n, *scale, zp, signed, y, Par::from_raw(threads)) };
}

/// C entry point: `y = quantize(x)` over `n` elements with a scale and zero point computed
/// by the run: `sz` points at them (two floats, the zero point integral or NaN: the result
/// is then 0, as the map's conversion gives); `flags` `SIGNED` (int8 results).
///
/// # Safety
/// `x` holds `n` floats, `y` `n` bytes, `sz` two floats; `threads` as `Par::from_raw`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_quantize_f32_8_dyn(
    x: *const f32,
    n: i64,
    sz: *const f32,
    flags: i64,
    y: *mut u8,
    threads: *const Threads,
) {
    let (n, signed) = c_operands(n, flags);
    // SAFETY: caller contract (`sz` holds two floats).
    let (scale, zp) = unsafe { (*sz, *sz.add(1)) };
    let q = Quantize::new(x, y, n, scale, zp, signed);
    // SAFETY: caller contract.
    unsafe { map_ranges(q, Par::from_raw(threads), QUANTIZE_COST) };
}

/// C entry point: `y = dequantize(x)` over `n` elements, `scale` pointing at the scale;
/// `flags` `SIGNED` (int8 bytes).
///
/// # Safety
/// `x` holds `n` bytes, `y` `n` floats, `scale` one float; `threads` as `Par::from_raw`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_dequantize_8_f32(
    x: *const u8,
    n: i64,
    scale: *const f32,
    zp: i64,
    flags: i64,
    y: *mut f32,
    threads: *const Threads,
) {
    let (n, signed) = c_operands(n, flags);
    // SAFETY: caller contract (`scale` holds one float).
    unsafe { dequantize(x, n, *scale, zp, signed, y, Par::from_raw(threads)) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::par::test_threads;

    /// The generated map's arithmetic, element by element.
    fn quantize_reference(a: f32, s: f32, zp: i64, signed: bool) -> u8 {
        let (lo, hi) = byte_range(signed);
        let v = (a / s).round_ties_even() + zp as f32;
        let v = if hi < v { hi } else { v };
        let v = if v < lo { lo } else { v };
        // The saturating conversion: NaN to 0.
        if signed { v as i8 as u8 } else { v as u8 }
    }

    fn inputs() -> Vec<f32> {
        let mut x = vec![
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            f32::MAX,
            f32::MIN,
            1e-30,
        ];
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..5000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            // Ties at half steps, values around the range's ends, and arbitrary floats.
            x.push(match i % 4 {
                0 => ((s % 801) as f32 - 400.0) * 0.5 * 0.031_25,
                1 => (s % 100_000) as f32 * 1e-3 - 50.0,
                2 => {
                    f32::from_bits((s as u32 & 0x7fff_ffff) % 0x4700_0000)
                        * if s & 1 == 0 { 1.0 } else { -1.0 }
                }
                _ => ((s % 600) as f32 - 300.0) * 0.031_25,
            });
        }
        x
    }

    /// `Map`'s walk over `x` into a buffer of `fill`s on every instruction set, and `run` (its
    /// kernel) on every test pool, each result checked by `check(result, where)`.
    fn on_every_isa_and_pool<A: Copy, B: Copy>(
        x: &[A],
        (scale, zp, signed): (f32, i64, bool),
        fill: B,
        run: unsafe fn(*const A, usize, f32, i64, bool, *mut B, Par),
        check: impl Fn(&[B], &str),
    ) where
        Map<A, B>: Walk<Out = ()>,
    {
        let n = x.len();
        let mut y = vec![fill; n];
        let yp = y.as_mut_ptr();
        let w = Map::new(x.as_ptr(), yp, n, scale, zp as f32, signed);
        // SAFETY: x holds n elements and y as many; each check reads y after its walk.
        unsafe {
            simd::for_each_isa(w, |isa, ()| {
                let got = std::slice::from_raw_parts_mut(yp, n);
                check(got, isa);
                got.fill(fill);
            })
        };
        for (workers, threads) in test_threads() {
            let mut y = vec![fill; n];
            let yp = y.as_mut_ptr();
            // SAFETY: as above; the pool is a test pool.
            unsafe { run(x.as_ptr(), n, scale, zp, signed, yp, Par::from_raw(threads)) };
            check(&y, &format!("{workers} workers"));
        }
    }

    #[test]
    fn quantize_matches_the_map_on_every_isa_and_pool() {
        let x = inputs();
        let n = x.len();
        for (scale, zp, signed) in [
            (0.031_25f32, 128i64, false),
            (0.017_3, 3, false),
            (0.042_1, -7, true),
        ] {
            let want: Vec<u8> = x
                .iter()
                .map(|&a| quantize_reference(a, scale, zp, signed))
                .collect();
            let params = (scale, zp, signed);
            on_every_isa_and_pool(&x, params, 0xa5, quantize, |got, what| {
                for i in 0..n {
                    assert_eq!(
                        got[i], want[i],
                        "{what}: x = {} ({scale}, {zp}, {signed})",
                        x[i]
                    );
                }
            });
        }
    }

    /// The entry point with a computed scale and zero point: the map's bytes, and zeros for a
    /// NaN zero point (the map's conversion of NaN), on every test pool.
    #[test]
    fn quantize_with_computed_parameters() {
        let x = inputs();
        for (sz, signed) in [
            ([0.037f32, 131.0], false),
            ([0.05, -3.0], true),
            ([0.1, f32::NAN], false),
        ] {
            let want: Vec<u8> = if sz[1].is_nan() {
                vec![0; x.len()]
            } else {
                x.iter()
                    .map(|&a| quantize_reference(a, sz[0], sz[1] as i64, signed))
                    .collect()
            };
            for (workers, threads) in test_threads() {
                let mut y = vec![0xa5u8; x.len()];
                // SAFETY: x holds n floats, y n bytes, sz two floats; a test pool.
                unsafe {
                    onnxc_quantize_f32_8_dyn(
                        x.as_ptr(),
                        x.len() as i64,
                        sz.as_ptr(),
                        if signed { SIGNED } else { 0 },
                        y.as_mut_ptr(),
                        threads,
                    )
                };
                assert_eq!(y, want, "{sz:?}, {workers} workers");
            }
        }
    }

    #[test]
    fn dequantize_matches_the_map_on_every_isa_and_pool() {
        let x: Vec<u8> = (0..1000).map(|i| (i * 7 % 256) as u8).collect();
        for (scale, zp, signed) in [(0.031_25f32, 128i64, false), (0.017_3, -7, true)] {
            let want: Vec<u32> = x
                .iter()
                .map(|&b| {
                    let v = if signed { b as i8 as f32 } else { b as f32 };
                    ((v - zp as f32) * scale).to_bits()
                })
                .collect();
            let params = (scale, zp, signed);
            on_every_isa_and_pool(&x, params, 0.0, dequantize, |got, what| {
                let bits: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
                assert!(bits == want, "{what}: ({scale}, {zp}, {signed})");
            });
        }
    }
}
