//! The integer layer: four-way byte dot products, `acc[l] += Σ_{j<4} lane[l][j] · row[j]`
//! (uint8 × int8, exact, wrapping int32), one implementation per instruction set. The
//! integer products' register tile (`qconv::kernel::sums`) is written once over [`Dot`]; a
//! new instruction set (AVX-VNNI, NEON's `usdot`) is one more implementation, not a copy of
//! the tile.
//!
//! Operands are read as the integer products pack them, in groups of four bytes along `k`:
//! the *lanes* `[k/4][lanes][4]`, a vector of `WIDTH` lanes at a time, and the *rows*
//! `[k/4][rows][4]`, one row's four bytes broadcast against them. The parameter `U` says
//! which side is unsigned: `true`, the lanes are uint8 and the rows int8 (the
//! convolution's panel and weights); `false`, the other way round (the matrix product's
//! weights and activations). [`Avx2Wide`] reads operands widened to int16 pairs, for AVX2
//! without exact byte products.

/// Four-way byte dot products on one instruction set, as a token: a value exists only
/// where its instructions may run.
///
/// # Safety
/// `dot` adds each lane's exact four-way product of the operands `lanes` and `row` read
/// (wrapping in int32); the loads read only the bytes their contracts name.
pub unsafe trait Dot: Copy {
    /// int32 lanes per accumulator.
    const WIDTH: usize;
    /// `WIDTH` int32 sums.
    type Acc: Copy;
    /// One vector of a group's lanes, as `dot` takes them.
    type Lanes: Copy;
    /// One row's group, as `dot` takes it.
    type Row: Copy;

    fn zero(self) -> Self::Acc;
    /// Lanes `v·WIDTH ..` of the group at `p`.
    ///
    /// # Safety
    /// The group at `p` holds those lanes (for [`Avx2Wide`]: in both of its halves).
    unsafe fn lanes(self, p: *const u8, v: usize) -> Self::Lanes;
    /// Row `r` of the group at `p`.
    ///
    /// # Safety
    /// The group at `p` holds row `r` (for [`Avx2Wide`]: in both of its halves).
    unsafe fn row(self, p: *const u8, r: usize) -> Self::Row;
    /// `acc` plus the four-way products of `lanes` and `row`.
    fn dot(self, acc: Self::Acc, lanes: Self::Lanes, row: Self::Row) -> Self::Acc;
    /// Writes the sums to `p[0 .. WIDTH]`.
    ///
    /// # Safety
    /// `p` is writable for `WIDTH` int32.
    unsafe fn store(self, p: *mut i32, acc: Self::Acc);
}

/// The four bytes at `p` as integers, unsigned or signed.
///
/// # Safety
/// `p` is readable for four bytes.
#[inline(always)]
unsafe fn four(p: *const u8, unsigned: bool) -> [i32; 4] {
    // SAFETY: caller contract.
    let b = unsafe { p.cast::<[u8; 4]>().read_unaligned() };
    b.map(|x| if unsigned { x as i32 } else { x as i8 as i32 })
}

/// Portable: eight lanes of scalar integer arithmetic.
#[derive(Copy, Clone, Debug, Default)]
pub struct Bytes<const U: bool>;

// SAFETY: plain integer arithmetic; the loads read the four bytes per lane or row named.
unsafe impl<const U: bool> Dot for Bytes<U> {
    const WIDTH: usize = 8;
    type Acc = [i32; 8];
    type Lanes = [[i32; 4]; 8];
    type Row = [i32; 4];

    #[inline(always)]
    fn zero(self) -> [i32; 8] {
        [0; 8]
    }
    #[inline(always)]
    unsafe fn lanes(self, p: *const u8, v: usize) -> [[i32; 4]; 8] {
        let mut l = [[0; 4]; 8];
        for (i, l) in l.iter_mut().enumerate() {
            // SAFETY: lane v·8 + i of the group (caller).
            *l = unsafe { four(p.add((v * 8 + i) * 4), U) };
        }
        l
    }
    #[inline(always)]
    unsafe fn row(self, p: *const u8, r: usize) -> [i32; 4] {
        // SAFETY: row r of the group (caller).
        unsafe { four(p.add(r * 4), !U) }
    }
    #[inline(always)]
    fn dot(self, mut acc: [i32; 8], lanes: [[i32; 4]; 8], row: [i32; 4]) -> [i32; 8] {
        for (a, l) in acc.iter_mut().zip(lanes) {
            let s = (0..4).fold(0i32, |s, j| s.wrapping_add(l[j].wrapping_mul(row[j])));
            *a = a.wrapping_add(s);
        }
        acc
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut i32, acc: [i32; 8]) {
        // SAFETY: caller contract.
        unsafe { p.cast::<[i32; 8]>().write_unaligned(acc) }
    }
}

#[cfg(target_arch = "x86_64")]
pub use x86::{Avx2Bytes, Avx2Wide, Vnni512};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Dot;
    use std::arch::x86_64::*;

    /// AVX-512 VNNI: `vpdpbusd`, sixteen lanes.
    #[derive(Copy, Clone, Debug)]
    pub struct Vnni512<const U: bool>(());

    impl<const U: bool> Vnni512<U> {
        /// # Safety
        /// The CPU has AVX-512 F, BW and VNNI.
        #[inline(always)]
        pub unsafe fn new() -> Self {
            Vnni512(())
        }
    }

    // SAFETY: the token proves the features; `vpdpbusd` sums four exact uint8 × int8
    // products into each lane, wrapping (not the saturating `vpdpbusds`).
    unsafe impl<const U: bool> Dot for Vnni512<U> {
        const WIDTH: usize = 16;
        type Acc = __m512i;
        type Lanes = __m512i;
        type Row = __m512i;

        #[inline(always)]
        fn zero(self) -> __m512i {
            // SAFETY: the token proves AVX-512 F.
            unsafe { _mm512_setzero_si512() }
        }
        #[inline(always)]
        unsafe fn lanes(self, p: *const u8, v: usize) -> __m512i {
            // SAFETY: the token; the caller, the 64 bytes.
            unsafe { _mm512_loadu_si512(p.add(v * 64) as *const _) }
        }
        #[inline(always)]
        unsafe fn row(self, p: *const u8, r: usize) -> __m512i {
            // SAFETY: the token; the caller, the four bytes.
            unsafe { _mm512_set1_epi32((p.add(r * 4) as *const i32).read_unaligned()) }
        }
        #[inline(always)]
        fn dot(self, acc: __m512i, lanes: __m512i, row: __m512i) -> __m512i {
            // SAFETY: the token proves AVX-512 VNNI. The first multiplicand is the unsigned
            // one.
            unsafe {
                if U {
                    _mm512_dpbusd_epi32(acc, lanes, row)
                } else {
                    _mm512_dpbusd_epi32(acc, row, lanes)
                }
            }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut i32, acc: __m512i) {
            // SAFETY: the token; the caller, the 16 int32.
            unsafe { _mm512_storeu_si512(p as *mut _, acc) }
        }
    }

    /// AVX2 on operands whose products cannot saturate `vpmaddubsw`: each pair of a
    /// group's signed bytes (0, 1) and (2, 3) has `|s0| + |s1| ≤ 128`, so no pairwise sum
    /// of uint8 × int8 products leaves int16 (255 · 128 < 2^15). `vpmaddubsw` then
    /// `vpmaddwd` with ones: eight lanes.
    #[derive(Copy, Clone, Debug)]
    pub struct Avx2Bytes<const U: bool>(());

    impl<const U: bool> Avx2Bytes<U> {
        /// # Safety
        /// The CPU has AVX2; the signed operand's byte pairs are as above.
        #[inline(always)]
        pub unsafe fn new() -> Self {
            Avx2Bytes(())
        }
    }

    // SAFETY: the token proves AVX2 and that no pair saturates (its constructor's contract),
    // so the sums are exact.
    unsafe impl<const U: bool> Dot for Avx2Bytes<U> {
        const WIDTH: usize = 8;
        type Acc = __m256i;
        type Lanes = __m256i;
        type Row = __m256i;

        #[inline(always)]
        fn zero(self) -> __m256i {
            // SAFETY: the token proves AVX2.
            unsafe { _mm256_setzero_si256() }
        }
        #[inline(always)]
        unsafe fn lanes(self, p: *const u8, v: usize) -> __m256i {
            // SAFETY: the token; the caller, the 32 bytes.
            unsafe { _mm256_loadu_si256(p.add(v * 32) as *const __m256i) }
        }
        #[inline(always)]
        unsafe fn row(self, p: *const u8, r: usize) -> __m256i {
            // SAFETY: the token; the caller, the four bytes.
            unsafe { _mm256_set1_epi32((p.add(r * 4) as *const i32).read_unaligned()) }
        }
        #[inline(always)]
        fn dot(self, acc: __m256i, lanes: __m256i, row: __m256i) -> __m256i {
            // SAFETY: the token proves AVX2. The first operand of `vpmaddubsw` is the
            // unsigned one.
            unsafe {
                let pairs = if U {
                    _mm256_maddubs_epi16(lanes, row)
                } else {
                    _mm256_maddubs_epi16(row, lanes)
                };
                _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
            }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut i32, acc: __m256i) {
            // SAFETY: the token; the caller, the 8 int32.
            unsafe { _mm256_storeu_si256(p as *mut __m256i, acc) }
        }
    }

    /// `v`, as a value LLVM cannot look through, defined here: an accumulator passed
    /// through it after a group's products ranks above them, so LLVM's reassociation sums
    /// the two products first and adds the sum to the accumulator (one addition on the
    /// loop-carried chain). Left alone, it chains the accumulator through both additions,
    /// and the AVX2 convolution on widened operands ran 3% slower (Zen 4, AVX2 cap). No
    /// instruction.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn after(mut v: __m256i) -> __m256i {
        // SAFETY: an empty template; the register is read and written unchanged.
        unsafe {
            std::arch::asm!("/* {0} */", inout(ymm_reg) v, options(pure, nomem, nostack, preserves_flags))
        };
        v
    }

    /// AVX2 on operands widened to int16: a widened group is two halves of dwords, the
    /// int16 pairs (byte 0, byte 2) and (byte 1, byte 3) of each lane or row (`[k/4][2][n]`
    /// dwords), so `vpmaddwd` of matching halves gives half of each four-way product, with
    /// no saturation. Eight lanes. `lane_half` and `row_half` are the byte offsets of the
    /// second halves. With `PACKED_LANES` the lanes are read packed (`[k/4][lanes][4]`
    /// int8) and widened by sign extension as they are loaded (the matrix product's weight
    /// lanes, which every block of rows reads).
    #[derive(Copy, Clone, Debug)]
    pub struct Avx2Wide<const PACKED_LANES: bool> {
        lane_half: usize,
        row_half: usize,
    }

    impl<const PACKED_LANES: bool> Avx2Wide<PACKED_LANES> {
        /// # Safety
        /// The CPU has AVX2.
        #[inline(always)]
        pub unsafe fn new(lane_half: usize, row_half: usize) -> Self {
            Avx2Wide {
                lane_half,
                row_half,
            }
        }
    }

    // SAFETY: the token proves AVX2; `vpmaddwd` of int16 pairs is exact.
    unsafe impl<const PACKED_LANES: bool> Dot for Avx2Wide<PACKED_LANES> {
        const WIDTH: usize = 8;
        type Acc = __m256i;
        type Lanes = (__m256i, __m256i);
        type Row = (__m256i, __m256i);

        #[inline(always)]
        fn zero(self) -> __m256i {
            // SAFETY: the token proves AVX2.
            unsafe { _mm256_setzero_si256() }
        }
        #[inline(always)]
        unsafe fn lanes(self, p: *const u8, v: usize) -> (__m256i, __m256i) {
            // SAFETY: the token; the caller, the 32 bytes of each half (packed: of the
            // group).
            unsafe {
                if PACKED_LANES {
                    let b = _mm256_loadu_si256(p.add(v * 32) as *const __m256i);
                    (
                        _mm256_srai_epi16(_mm256_slli_epi16(b, 8), 8),
                        _mm256_srai_epi16(b, 8),
                    )
                } else {
                    (
                        _mm256_loadu_si256(p.add(v * 32) as *const __m256i),
                        _mm256_loadu_si256(p.add(self.lane_half + v * 32) as *const __m256i),
                    )
                }
            }
        }
        #[inline(always)]
        unsafe fn row(self, p: *const u8, r: usize) -> (__m256i, __m256i) {
            // SAFETY: the token; the caller, the dword of each half.
            unsafe {
                let even = (p.add(r * 4) as *const i32).read_unaligned();
                let odd = (p.add(self.row_half + r * 4) as *const i32).read_unaligned();
                (_mm256_set1_epi32(even), _mm256_set1_epi32(odd))
            }
        }
        #[inline(always)]
        fn dot(self, acc: __m256i, lanes: (__m256i, __m256i), row: (__m256i, __m256i)) -> __m256i {
            // SAFETY: the token proves AVX2.
            unsafe {
                let s = _mm256_add_epi32(
                    _mm256_madd_epi16(lanes.0, row.0),
                    _mm256_madd_epi16(lanes.1, row.1),
                );
                _mm256_add_epi32(after(acc), s)
            }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut i32, acc: __m256i) {
            // SAFETY: the token; the caller, the 8 int32.
            unsafe { _mm256_storeu_si256(p as *mut __m256i, acc) }
        }
    }
}
