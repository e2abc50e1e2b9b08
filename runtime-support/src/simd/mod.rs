//! The SIMD layer the vectorized kernel walks are written over, once.
//!
//! A walk is a type implementing [`Walk`]: its arguments as fields and an
//! `#[inline(always)]` `run::<S: Simd>` that does the work with the vector operations of the
//! token `S`. [`dispatch`] runs it with the best instruction set the CPU has (capped by
//! `ONNXC_RUNTIME_ISA`, see `crate::isa`): each implementation is instantiated inside a
//! `#[target_feature]` function, so the walk, the token's methods and the intrinsics under
//! them inline into one function compiled for that instruction set. A new instruction set
//! (NEON) is one more implementation of [`Simd`], not a copy of every kernel. The integer
//! products' four-way byte dot products have a layer of their own, [`dot::Dot`] (VNNI,
//! AVX2 on bytes or on int16 pairs, portable).
//!
//! Implementations: [`Avx512`] (16 lanes), [`Avx2`] (8 lanes, with FMA), and the portable
//! [`Lanes<N>`](Lanes) (arrays of `N` lanes, for targets without a native implementation and
//! for tests: `Lanes<16>` walks exactly the 16-lane structure the AVX-512 kernels walk, so a
//! machine without AVX-512 still tests it).
//!
//! Semantics every implementation keeps (walks rely on them, for results and for memory
//! safety):
//! - `min`/`max` are x86's: `max(a, b)` is `a > b ? a : b`, so the *second* operand wins when
//!   either is NaN; `max_nan` propagates a NaN of either operand.
//! - `mul_add(a, b, c)` is `a·b + c`, fused (one rounding) where the instruction set has FMA.
//! - Masked loads do not access the lanes outside their mask: such a lane's address may lie
//!   outside every allocation. Masked stores write only the lanes inside.

/// The methods of a native implementation, each running only its instruction set's
/// intrinsics: `name(arguments) -> type = body;`, `unsafe name(..) = body;` for those with
/// the trait's pointer contracts, and `binary type: name intrinsic, ..;` for the
/// one-intrinsic `(a, b)` operations. Always inlined, the body in one `unsafe` block, which
/// the token makes sound (a value of the implementation exists only where its instructions
/// may run) together with the callers' pointer contracts.
#[cfg(target_arch = "x86_64")]
macro_rules! intrinsics {
    () => {};
    (binary $t:ty: $($name:ident $f:ident),*; $($rest:tt)*) => {
        $(intrinsics!($name(a: $t, b: $t) -> $t = $f(a, b););)*
        intrinsics!($($rest)*);
    };
    (unsafe $name:ident($($a:ident: $t:ty),*) $(-> $r:ty)? = $e:expr; $($rest:tt)*) => {
        #[inline(always)]
        unsafe fn $name(self, $($a: $t),*) $(-> $r)? {
            // SAFETY: the token proves the instruction set; the caller, the pointer contract.
            unsafe { $e }
        }
        intrinsics!($($rest)*);
    };
    ($name:ident($($a:ident: $t:ty),*) -> $r:ty = $e:expr; $($rest:tt)*) => {
        #[inline(always)]
        fn $name(self, $($a: $t),*) -> $r {
            // SAFETY: the token proves the instruction set.
            unsafe { $e }
        }
        intrinsics!($($rest)*);
    };
}

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
pub mod dot;
pub mod math;
mod portable;

#[cfg(target_arch = "x86_64")]
pub use avx2::Avx2;
#[cfg(target_arch = "x86_64")]
pub use avx512::Avx512;
pub use portable::Lanes;

/// The portable implementation used where no native one is available.
pub type Portable = Lanes<4>;

/// A vector instruction set, as a zero-sized token: a value of an implementing type exists
/// only where its instructions may run.
///
/// # Safety
/// Implementations keep the semantics in the module documentation; walks rely on the
/// masked accesses' for memory safety.
pub unsafe trait Simd: Copy {
    /// f32 lanes per vector.
    const LANES: usize;
    /// A vector of `LANES` f32.
    type F: Copy;
    /// A mask of lanes.
    type M: Copy;
    /// The control of a lane shift by a fixed count (`shifter`), computed once per walk.
    type Shift: Copy;

    fn splat(self, v: f32) -> Self::F;
    #[inline(always)]
    fn zero(self) -> Self::F {
        self.splat(0.0)
    }

    /// # Safety
    /// `p` is readable for `LANES` floats.
    unsafe fn load(self, p: *const f32) -> Self::F;
    /// # Safety
    /// `p` is writable for `LANES` floats.
    unsafe fn store(self, p: *mut f32, v: Self::F);
    /// Lanes `lo..hi` (each clamped to `0..=LANES`; empty when `hi <= lo`).
    fn lanes(self, lo: usize, hi: usize) -> Self::M;
    /// Lane `l` in `m` is `p[l]`, the others `fill`; their addresses are not accessed.
    ///
    /// # Safety
    /// `p.wrapping_add(l)` is readable for every lane `l` in `m`.
    unsafe fn load_masked(self, p: *const f32, m: Self::M, fill: Self::F) -> Self::F;
    /// `load_masked` with 0 in the lanes outside `m` (AVX2: `vmaskmovps` alone, no blend).
    ///
    /// # Safety
    /// `p.wrapping_add(l)` is readable for every lane `l` in `m`.
    #[inline(always)]
    unsafe fn load_or_zero(self, p: *const f32, m: Self::M) -> Self::F {
        // SAFETY: forwarded.
        unsafe { self.load_masked(p, m, self.zero()) }
    }
    /// Writes the lanes in `m` to `p[l]`.
    ///
    /// # Safety
    /// `p.wrapping_add(l)` is writable for every lane `l` in `m`.
    unsafe fn store_masked(self, p: *mut f32, m: Self::M, v: Self::F);
    /// Writes lanes `lo..hi` (`hi ≤ LANES`) to `p[lo..hi]`: `store_masked` over a range, or
    /// whatever stores a range fastest (AVX2 on AMD: not `vmaskmovps`, which is microcoded).
    ///
    /// # Safety
    /// `p[lo..hi]` is writable.
    #[inline(always)]
    unsafe fn store_range(self, p: *mut f32, lo: usize, hi: usize, v: Self::F) {
        // SAFETY: forwarded.
        unsafe { self.store_masked(p, self.lanes(lo, hi), v) }
    }
    /// Lane `l` in `m` is `p[l·stride]`, the others `fill`; their addresses are not accessed.
    ///
    /// # Safety
    /// `p.wrapping_offset(l·stride)` is readable for every lane `l` in `m`; `|l·stride|` fits
    /// in an i32.
    unsafe fn gather_masked(
        self,
        p: *const f32,
        stride: isize,
        m: Self::M,
        fill: Self::F,
    ) -> Self::F;
    /// Lane `l` in `m` is `p[idx[l]]`, the others `fill`; neither their indices nor their
    /// addresses are accessed.
    ///
    /// # Safety
    /// `idx.wrapping_add(l)` and then `p.wrapping_offset(idx[l])` are readable for every lane
    /// `l` in `m`.
    unsafe fn gather_index(
        self,
        p: *const f32,
        idx: *const i32,
        m: Self::M,
        fill: Self::F,
    ) -> Self::F;
    /// A hint to fetch the cache line of `p` into L1 (any address: a prefetch does not fault;
    /// the portable implementation ignores it).
    #[inline(always)]
    fn prefetch(self, p: *const f32) {
        let _ = p;
    }
    /// `a` in the lanes of `m`, `b` elsewhere.
    fn select(self, m: Self::M, a: Self::F, b: Self::F) -> Self::F;

    fn add(self, a: Self::F, b: Self::F) -> Self::F;
    fn sub(self, a: Self::F, b: Self::F) -> Self::F;
    fn mul(self, a: Self::F, b: Self::F) -> Self::F;
    fn div(self, a: Self::F, b: Self::F) -> Self::F;
    /// `a·b + c`, fused where the instruction set has FMA.
    fn mul_add(self, a: Self::F, b: Self::F, c: Self::F) -> Self::F;
    /// `c − a·b`, fused where the instruction set has FMA.
    fn neg_mul_add(self, a: Self::F, b: Self::F, c: Self::F) -> Self::F;
    /// `a < b ? a : b` (the second operand on NaN).
    fn min(self, a: Self::F, b: Self::F) -> Self::F;
    /// `a > b ? a : b` (the second operand on NaN).
    fn max(self, a: Self::F, b: Self::F) -> Self::F;
    /// The larger operand, NaN when either is NaN.
    #[inline(always)]
    fn max_nan(self, a: Self::F, b: Self::F) -> Self::F {
        // max(a, b) is b when either is NaN, so only a NaN `a` needs keeping.
        self.select(self.is_nan(a), a, self.max(a, b))
    }
    /// Lanes where `a < b` (ordered).
    fn lt(self, a: Self::F, b: Self::F) -> Self::M;
    /// Lanes where `a > b` (ordered).
    fn gt(self, a: Self::F, b: Self::F) -> Self::M;
    fn is_nan(self, a: Self::F) -> Self::M;
    /// Whether any lane of `m` is set.
    fn any(self, m: Self::M) -> bool;
    fn mask_or(self, a: Self::M, b: Self::M) -> Self::M;
    /// Bitwise `a & b`, `a | b` and `!a & b` of the lanes' bits.
    fn and(self, a: Self::F, b: Self::F) -> Self::F;
    fn or(self, a: Self::F, b: Self::F) -> Self::F;
    fn andnot(self, a: Self::F, b: Self::F) -> Self::F;
    /// Rounded to the nearest integer, ties to even.
    fn round(self, a: Self::F) -> Self::F;
    /// `p · 2^n` for integral `n` in `[-160, 130]` (lanes where `n` is NaN: any value), with
    /// IEEE overflow to ∞ and gradual underflow, rounded once.
    fn scale2(self, p: Self::F, n: Self::F) -> Self::F;
    /// `p · 2^n` where the result is normal: `p` positive in `[2^−0.5, 2^0.5]` and `n`
    /// integral in `[-125, 127]` (elsewhere, or where `p` is NaN: any value, NaN for a NaN
    /// `p`). Exact; AVX2 adds `n` to the exponent field instead of `scale2`'s two products.
    #[inline(always)]
    fn scale2_normal(self, p: Self::F, n: Self::F) -> Self::F {
        self.scale2(p, n)
    }

    /// The control of `shift` by `n ≤ LANES` lanes.
    fn shifter(self, n: usize) -> Self::Shift;
    /// Lanes `n..n + LANES` of the concatenation `lo | hi` (`sh = shifter(n)`).
    fn shift(self, lo: Self::F, hi: Self::F, sh: Self::Shift) -> Self::F;
    /// The even and the odd lanes of `a | b`, each in order.
    fn deinterleave(self, a: Self::F, b: Self::F) -> (Self::F, Self::F);
    /// `a0 b0 a1 b1 …`: its first and second `LANES` lanes.
    fn interleave(self, a: Self::F, b: Self::F) -> (Self::F, Self::F);

    /// The four columns of stride 4 of the `4·LANES` consecutive floats `v[0] | v[1] | v[2] |
    /// v[3]`: `out[c]` holds floats `4k + c`, `k < LANES`, with float `4k + c` in lane `π(k)`
    /// for a permutation `π` of the implementation's (the same for every call, keeping each
    /// aligned block of 8 lanes in place), which [`join4`](Simd::join4) undoes. A walk that
    /// treats lanes independently between the two (the Winograd transforms: 4-column tiles)
    /// never sees `π`, so each instruction set may split the cheapest way: by default natural
    /// order through two rounds of `deinterleave`; AVX2 transposes 4×4 blocks within its
    /// 128-bit halves (π: tiles 0, 2, 4, 6, 1, 3, 5, 7), half the shuffles of crossing them.
    #[inline(always)]
    fn split4(self, v: [Self::F; 4]) -> [Self::F; 4] {
        butterfly(self, v, false)
    }
    /// The inverse of [`split4`](Simd::split4): columns `c[0..4]` (float `4k + j` in lane
    /// `π(k)` of `c[j]`) back to `4·LANES` consecutive floats.
    #[inline(always)]
    fn join4(self, c: [Self::F; 4]) -> [Self::F; 4] {
        butterfly(self, c, true)
    }

    /// The sum of the lanes (in an order of the implementation's).
    fn reduce_add(self, a: Self::F) -> f32;
    /// The largest lane (NaN lanes: unspecified).
    fn reduce_max(self, a: Self::F) -> f32;
}

/// The default `split4` (`join`: `join4`): two rounds of `deinterleave` on the pairs (0, 1),
/// (2, 3) with the results regrouped `[first, first, second, second]`, or of `interleave` on
/// (0, 2), (1, 3) kept in order — stride-4 columns out of consecutive floats, and back.
/// (Methods called directly: a function passed in stays a call where it is not inlined, as
/// `Fn::call` of a method was in the AVX-512 walks.)
#[inline(always)]
fn butterfly<S: Simd>(s: S, v: [S::F; 4], join: bool) -> [S::F; 4] {
    let round = {
        #[inline(always)]
        move |[a, b, c, d]: [S::F; 4]| {
            if join {
                let ((p, q), (r, t)) = (s.interleave(a, c), s.interleave(b, d));
                [p, q, r, t]
            } else {
                let ((p, q), (r, t)) = (s.deinterleave(a, b), s.deinterleave(c, d));
                [p, r, q, t]
            }
        }
    };
    round(round(v))
}

/// A kernel walk: arguments as fields, the work in `run`, written once over [`Simd`].
pub trait Walk {
    type Out;
    /// # Safety
    /// The walk's own contract (its fields' pointers valid, and so on).
    unsafe fn run<S: Simd>(self, s: S) -> Self::Out;
}

/// `y[i] = f(x[i])` for `i < n`, two vectors per step (so a division's latency overlaps the
/// other's work), then one, then a masked tail; `x` and `y` may be the same buffer.
///
/// # Safety
/// `x` and `y` hold `n` floats.
#[inline(always)]
pub unsafe fn unary<S: Simd>(s: S, x: *const f32, y: *mut f32, n: usize, f: impl Fn(S::F) -> S::F) {
    let l = S::LANES;
    let mut i = 0;
    // SAFETY: (whole body) x and y hold n floats (contract); full vectors end at or below n; the
    // tail is masked to it.
    unsafe {
        while i + 2 * l <= n {
            let (a, b) = (s.load(x.add(i)), s.load(x.add(i + l)));
            let (a, b) = (f(a), f(b));
            s.store(y.add(i), a);
            s.store(y.add(i + l), b);
            i += 2 * l;
        }
        while i + l <= n {
            s.store(y.add(i), f(s.load(x.add(i))));
            i += l;
        }
        if i < n {
            let m = s.lanes(0, n - i);
            s.store_masked(y.add(i), m, f(s.load_masked(x.add(i), m, s.zero())));
        }
    }
}

/// Runs `w` with the best instruction set this CPU has (capped by `crate::isa::cap`).
///
/// # Safety
/// `w`'s contract.
#[inline(always)]
pub unsafe fn dispatch<W: Walk>(w: W) -> W::Out {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::isa::avx512() {
            // SAFETY: AVX-512 F/BW/DQ/VL and FMA detected; w's contract forwarded.
            return unsafe { run_avx512(w) };
        }
        if crate::isa::avx2() {
            // SAFETY: AVX2 and FMA detected; w's contract forwarded.
            return unsafe { run_avx2(w) };
        }
    }
    // SAFETY: forwarded.
    unsafe { w.run(Portable::new()) }
}

/// Runs `walk(range)` for ranges that partition `0..count`, split over `par`'s threads
/// (`Par::for_ranges`, `cost` units an item), each with the best instruction set: the
/// elementwise kernels' walk over a whole tensor.
///
/// # Safety
/// Each range's walk's contract; the walks of different ranges write disjoint memory.
#[inline(always)]
pub unsafe fn dispatch_ranges<W: Walk<Out = ()>>(
    par: crate::par::Par,
    count: usize,
    cost: usize,
    walk: impl Fn(std::ops::Range<usize>) -> W,
) {
    // SAFETY: each walk's contract (caller).
    let job = |r: std::ops::Range<usize>, _worker: usize| unsafe { dispatch(walk(r)) };
    // SAFETY: the ranges' walks write disjoint memory (caller).
    unsafe { par.for_ranges(count, cost, &job) };
}

/// Runs `w` with the best native instruction set this CPU has, None where there is none
/// (for walks that assume native vector widths, with a scalar path of their own).
///
/// # Safety
/// `w`'s contract.
#[inline(always)]
pub unsafe fn dispatch_native<W: Walk>(w: W) -> Option<W::Out> {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::isa::avx512() {
            // SAFETY: AVX-512 F/BW/DQ/VL and FMA detected; w's contract forwarded.
            return Some(unsafe { run_avx512(w) });
        }
        if crate::isa::avx2() {
            // SAFETY: AVX2 and FMA detected; w's contract forwarded.
            return Some(unsafe { run_avx2(w) });
        }
    }
    let _ = w;
    None
}

/// Runs `w` with 8-lane vectors, for walks over blocks of 8 floats (the NCHWc layout's): AVX2
/// where the CPU has it (AVX-512 CPUs too), else the portable `Lanes<8>`.
///
/// # Safety
/// `w`'s contract.
#[inline(always)]
pub unsafe fn dispatch8<W: Walk>(w: W) -> W::Out {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::avx2() {
        // SAFETY: AVX2 and FMA detected; w's contract forwarded.
        return unsafe { run_avx2(w) };
    }
    // SAFETY: forwarded.
    unsafe { w.run(Lanes::<8>::new()) }
}

/// Runs walks for a kernel: `Dispatch`/`Dispatch8` as `dispatch`/`dispatch8` do, or in
/// tests `On` one given implementation (so a kernel that runs several walks can be tested
/// whole on each).
pub trait Runner {
    /// # Safety
    /// `w`'s contract.
    unsafe fn run<W: Walk>(&self, w: W) -> W::Out;
}

/// [`dispatch`].
pub struct Dispatch;

impl Runner for Dispatch {
    #[inline(always)]
    unsafe fn run<W: Walk>(&self, w: W) -> W::Out {
        // SAFETY: forwarded.
        unsafe { dispatch(w) }
    }
}

/// [`dispatch8`].
pub struct Dispatch8;

impl Runner for Dispatch8 {
    #[inline(always)]
    unsafe fn run<W: Walk>(&self, w: W) -> W::Out {
        // SAFETY: forwarded.
        unsafe { dispatch8(w) }
    }
}

/// One implementation (a token the test holds).
#[cfg(test)]
pub struct On<S>(pub S);

#[cfg(test)]
impl<S: Simd> Runner for On<S> {
    unsafe fn run<W: Walk>(&self, w: W) -> W::Out {
        // SAFETY: forwarded.
        unsafe { w.run(self.0) }
    }
}

/// # Safety
/// AVX-512 F/BW/DQ/VL and FMA present; `w`'s contract.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
unsafe fn run_avx512<W: Walk>(w: W) -> W::Out {
    // SAFETY: caller contract (the features are present).
    unsafe { w.run(Avx512::new()) }
}

/// # Safety
/// AVX2 and FMA present; `w`'s contract.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run_avx2<W: Walk>(w: W) -> W::Out {
    // SAFETY: caller contract (the features are present).
    unsafe { w.run(Avx2::new()) }
}

/// Runs `w` with each implementation this machine can execute — every native one the CPU
/// has and the portable one at 4, 8 and 16 lanes — handing each result to `check` with the
/// implementation's name: kernel tests cover every instruction set's walk, and the 16-lane
/// structure of AVX-512 even where the CPU lacks it.
///
/// # Safety
/// `w`'s contract, for every run.
#[cfg(test)]
pub unsafe fn for_each_isa<W: Walk + Clone>(w: W, check: impl FnMut(&'static str, W::Out)) {
    // SAFETY: forwarded.
    unsafe { for_each_isa_in(1..=16, w, check) }
}

/// `for_each_isa` over the implementations whose lane count is in `lanes` (walks that
/// assume a native vector width, or 8-float blocks).
///
/// # Safety
/// `w`'s contract, for every run.
#[cfg(test)]
pub unsafe fn for_each_isa_in<W: Walk + Clone>(
    lanes: std::ops::RangeInclusive<usize>,
    w: W,
    mut check: impl FnMut(&'static str, W::Out),
) {
    // SAFETY: every run gets w, whose contract the caller guarantees; the AVX-512/AVX2
    // tokens are made only after `is_x86_feature_detected!` found the features.
    unsafe {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("avx512dq")
                && std::is_x86_feature_detected!("avx512vl")
                && std::is_x86_feature_detected!("fma")
                && lanes.contains(&16)
            {
                check("avx512", run_avx512(w.clone()));
            }
            if std::is_x86_feature_detected!("avx2")
                && std::is_x86_feature_detected!("fma")
                && lanes.contains(&8)
            {
                check("avx2", run_avx2(w.clone()));
            }
        }
        if lanes.contains(&4) {
            check("lanes4", w.clone().run(Lanes::<4>::new()));
        }
        if lanes.contains(&8) {
            check("lanes8", w.clone().run(Lanes::<8>::new()));
        }
        if lanes.contains(&16) {
            check("lanes16", w.run(Lanes::<16>::new()));
        }
    }
}

#[cfg(test)]
mod tests;
