//! `Lanes<N>`: the portable implementation of [`Simd`](super::Simd), vectors as `[f32; N]`
//! and masks as `[u32; N]` of all-ones / all-zeros lanes (so `select` is a bitwise blend).
//! The compiler vectorizes the lane loops where the target allows (SSE2 on any x86-64,
//! NEON on aarch64); without FMA, `mul_add` rounds twice (a software fused multiply-add per
//! lane would be far slower than the kernel it serves), and rounding is integer arithmetic
//! rather than a libm call.

use super::Simd;

/// `N` f32 lanes (`N` ≤ 32) in plain arrays.
#[derive(Copy, Clone, Debug)]
pub struct Lanes<const N: usize>(());

impl<const N: usize> Lanes<N> {
    pub const fn new() -> Self {
        assert!(N > 0 && N <= 32);
        Lanes(())
    }
}

impl<const N: usize> Default for Lanes<N> {
    fn default() -> Self {
        Self::new()
    }
}

#[inline(always)]
fn map<const N: usize>(a: [f32; N], f: impl Fn(f32) -> f32) -> [f32; N] {
    std::array::from_fn(|l| f(a[l]))
}

#[inline(always)]
fn zip<const N: usize>(a: [f32; N], b: [f32; N], f: impl Fn(f32, f32) -> f32) -> [f32; N] {
    std::array::from_fn(|l| f(a[l], b[l]))
}

#[inline(always)]
fn bits<const N: usize>(a: [f32; N], b: [f32; N], f: impl Fn(u32, u32) -> u32) -> [f32; N] {
    std::array::from_fn(|l| f32::from_bits(f(a[l].to_bits(), b[l].to_bits())))
}

#[inline(always)]
fn mask<const N: usize>(f: impl Fn(usize) -> bool) -> [u32; N] {
    std::array::from_fn(|l| if f(l) { !0 } else { 0 })
}

// SAFETY: every method follows the module documentation of `simd`; masked accesses touch
// only the lanes of their mask.
unsafe impl<const N: usize> Simd for Lanes<N> {
    const LANES: usize = N;
    type F = [f32; N];
    type M = [u32; N];
    type Shift = usize;

    #[inline(always)]
    fn splat(self, v: f32) -> [f32; N] {
        [v; N]
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> [f32; N] {
        // SAFETY: caller contract.
        unsafe { p.cast::<[f32; N]>().read_unaligned() }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: [f32; N]) {
        // SAFETY: caller contract.
        unsafe { p.cast::<[f32; N]>().write_unaligned(v) }
    }
    #[inline(always)]
    fn lanes(self, lo: usize, hi: usize) -> [u32; N] {
        mask::<N>(|l| l >= lo && l < hi)
    }
    #[inline(always)]
    unsafe fn load_masked(self, p: *const f32, m: [u32; N], fill: [f32; N]) -> [f32; N] {
        std::array::from_fn(|l| {
            if m[l] != 0 {
                // SAFETY: lane l is read only when set in m, and those lanes are readable (the
                // caller's contract).
                unsafe { *p.wrapping_add(l) }
            } else {
                fill[l]
            }
        })
    }
    #[inline(always)]
    unsafe fn store_masked(self, p: *mut f32, m: [u32; N], v: [f32; N]) {
        for (l, x) in v.iter().enumerate() {
            if m[l] != 0 {
                // SAFETY: lane l is in the mask (caller contract).
                unsafe { *p.wrapping_add(l) = *x };
            }
        }
    }
    #[inline(always)]
    unsafe fn gather_masked(
        self,
        p: *const f32,
        stride: isize,
        m: [u32; N],
        fill: [f32; N],
    ) -> [f32; N] {
        std::array::from_fn(|l| {
            if m[l] != 0 {
                // SAFETY: lane l is read only when set in m, and those lanes are readable (the
                // caller's contract).
                unsafe { *p.wrapping_offset(l as isize * stride) }
            } else {
                fill[l]
            }
        })
    }
    #[inline(always)]
    unsafe fn gather_index(
        self,
        p: *const f32,
        idx: *const i32,
        m: [u32; N],
        fill: [f32; N],
    ) -> [f32; N] {
        // SAFETY: only lanes in m are read, index and value (caller contract).
        std::array::from_fn(|l| {
            if m[l] != 0 {
                // SAFETY: lane l is in m, so its index and value may be read (caller contract).
                unsafe { *p.wrapping_offset(*idx.wrapping_add(l) as isize) }
            } else {
                fill[l]
            }
        })
    }
    #[inline(always)]
    fn select(self, m: [u32; N], a: [f32; N], b: [f32; N]) -> [f32; N] {
        std::array::from_fn(|l| f32::from_bits(a[l].to_bits() & m[l] | b[l].to_bits() & !m[l]))
    }
    #[inline(always)]
    fn add(self, a: [f32; N], b: [f32; N]) -> [f32; N] {
        zip(a, b, |x, y| x + y)
    }
    #[inline(always)]
    fn sub(self, a: [f32; N], b: [f32; N]) -> [f32; N] {
        zip(a, b, |x, y| x - y)
    }
    #[inline(always)]
    fn mul(self, a: [f32; N], b: [f32; N]) -> [f32; N] {
        zip(a, b, |x, y| x * y)
    }
    #[inline(always)]
    fn div(self, a: [f32; N], b: [f32; N]) -> [f32; N] {
        zip(a, b, |x, y| x / y)
    }
    #[inline(always)]
    fn mul_add(self, a: [f32; N], b: [f32; N], c: [f32; N]) -> [f32; N] {
        std::array::from_fn(|l| a[l] * b[l] + c[l])
    }
    #[inline(always)]
    fn neg_mul_add(self, a: [f32; N], b: [f32; N], c: [f32; N]) -> [f32; N] {
        std::array::from_fn(|l| c[l] - a[l] * b[l])
    }
    #[inline(always)]
    fn min(self, a: [f32; N], b: [f32; N]) -> [f32; N] {
        zip(a, b, |x, y| if x < y { x } else { y })
    }
    #[inline(always)]
    fn max(self, a: [f32; N], b: [f32; N]) -> [f32; N] {
        zip(a, b, |x, y| if x > y { x } else { y })
    }
    #[inline(always)]
    fn lt(self, a: [f32; N], b: [f32; N]) -> [u32; N] {
        mask::<N>(|l| a[l] < b[l])
    }
    #[inline(always)]
    fn gt(self, a: [f32; N], b: [f32; N]) -> [u32; N] {
        mask::<N>(|l| a[l] > b[l])
    }
    #[inline(always)]
    fn is_nan(self, a: [f32; N]) -> [u32; N] {
        mask::<N>(|l| a[l].is_nan())
    }
    #[inline(always)]
    fn any(self, m: [u32; N]) -> bool {
        m.iter().fold(0, |a, &b| a | b) != 0
    }
    #[inline(always)]
    fn mask_or(self, a: [u32; N], b: [u32; N]) -> [u32; N] {
        std::array::from_fn(|l| a[l] | b[l])
    }
    #[inline(always)]
    fn and(self, a: [f32; N], b: [f32; N]) -> [f32; N] {
        bits(a, b, |x, y| x & y)
    }
    #[inline(always)]
    fn or(self, a: [f32; N], b: [f32; N]) -> [f32; N] {
        bits(a, b, |x, y| x | y)
    }
    #[inline(always)]
    fn andnot(self, a: [f32; N], b: [f32; N]) -> [f32; N] {
        bits(a, b, |x, y| !x & y)
    }
    #[inline(always)]
    fn round(self, a: [f32; N]) -> [f32; N] {
        // 1.5·2^23 + x (|x| < 2^22) rounds x to an integer in its low mantissa bits (ties to
        // even, the default rounding mode); larger floats are integers already. Integer bits,
        // not `(x + c) − c`, which compilers turn back into a libm `rint` call per lane.
        map(a, |x| {
            let i = ((x + 12_582_912.0).to_bits() as i32).wrapping_sub(0x4B40_0000);
            if x.abs() < 4_194_304.0 {
                (i as f32).copysign(x)
            } else {
                x
            }
        })
    }
    #[inline(always)]
    fn scale2(self, p: [f32; N], n: [f32; N]) -> [f32; N] {
        // Two normal factors 2^⌊n/2⌋ and 2^(n − ⌊n/2⌋): each exponent stays in [-80, 65],
        // and the product rounds once where it turns subnormal.
        zip(p, n, |p, n| {
            if n.is_nan() {
                return p;
            }
            let n = n as i32;
            let n1 = n >> 1;
            let f = |e: i32| f32::from_bits(((e + 127) as u32) << 23);
            p * f(n1) * f(n - n1)
        })
    }
    #[inline(always)]
    fn shifter(self, n: usize) -> usize {
        n.min(N)
    }
    #[inline(always)]
    fn shift(self, lo: [f32; N], hi: [f32; N], n: usize) -> [f32; N] {
        std::array::from_fn(|l| if l + n < N { lo[l + n] } else { hi[l + n - N] })
    }
    #[inline(always)]
    fn deinterleave(self, a: [f32; N], b: [f32; N]) -> ([f32; N], [f32; N]) {
        let at = |i: usize| if i < N { a[i] } else { b[i - N] };
        (
            std::array::from_fn(|l| at(2 * l)),
            std::array::from_fn(|l| at(2 * l + 1)),
        )
    }
    #[inline(always)]
    fn interleave(self, a: [f32; N], b: [f32; N]) -> ([f32; N], [f32; N]) {
        let at = |i: usize| {
            if i.is_multiple_of(2) {
                a[i / 2]
            } else {
                b[i / 2]
            }
        };
        (std::array::from_fn(&at), std::array::from_fn(|l| at(N + l)))
    }
    #[inline(always)]
    fn reduce_add(self, a: [f32; N]) -> f32 {
        a.iter().sum()
    }
    #[inline(always)]
    fn reduce_max(self, a: [f32; N]) -> f32 {
        a.iter().copied().fold(f32::NEG_INFINITY, f32::max)
    }
}
