//! Kernel parameter blobs: the read-only `i64` arrays the compiler encodes for a kernel call
//! (`kernels::ArgKind::Params`: a geometry, a table) and the kernel decodes on every call.
//!
//! Every blob is *sealed*: its first word is its own length in words (that word included),
//! written by the encoder (`seal`). A kernel entry point turns its pointer into a slice of
//! that length (`blob`) and decodes the slice with a `Reader`, so a decoder never reads
//! past the blob whatever its other words say, and a blob of the wrong length (a layout from
//! another onnxc) is refused outright. Decoders validate what the kernel relies on: ranks
//! and kinds in range, extents positive, strides and dilations at least 1, pads not
//! negative, output extents consistent with the window formula, channel counts divisible by
//! the group, flags with known bits only, element counts that fit in memory (`product`).
//! A refused blob makes the kernel return `abi::ONNXC_ERR_PARAMS` before it touches any
//! buffer; generated code merges that status into the run's error code.
//!
//! Validation costs O(header + rank) per call; a table is walked per call only where the
//! kernel's own work reads it anyway (resize's taps, the NCHWc reorder's planes). Tables
//! too large for that (tree forests, string tables) are checked in full when they are
//! encoded (`tree::check`, `strings::check`) and only their headers and table bounds per call.

use std::fmt;

/// Why a kernel refused its parameter blob: a static description of the first check that
/// failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamError(pub &'static str);

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid kernel parameters: {}", self.0)
    }
}

impl std::error::Error for ParamError {}

/// The result of decoding or validating a parameter blob.
pub type Result<T> = std::result::Result<T, ParamError>;

/// Most words a blob may claim (32 GiB), far beyond any model's tables: a length word
/// above it is corrupt.
pub const MAX_WORDS: i64 = 1 << 32;

/// Largest spatial extent, kernel size, stride, dilation or pad a geometry may hold. Sums
/// and two-factor products of such values stay well inside `i64`, so window arithmetic
/// needs no overflow checks of its own; element counts are checked with `product`.
pub const MAX_EXTENT: i64 = i32::MAX as i64;

/// The sealed blob of `body`: its length in words (this first word included), then `body`.
pub fn seal(body: impl IntoIterator<Item = i64>) -> Vec<i64> {
    let mut v = vec![0];
    v.extend(body);
    v[0] = v.len() as i64;
    v
}

/// `u32` values packed two a word (the first in the low half), as tables of states or
/// hash slots are stored in a blob; an odd count leaves the last high half 0.
pub fn pack_u32(v: &[u32]) -> impl Iterator<Item = i64> + '_ {
    v.chunks(2)
        .map(|p| (u64::from(p[0]) | (u64::from(*p.get(1).unwrap_or(&0)) << 32)) as i64)
}

/// Value `k` of `u32`s packed by `pack_u32` into `words` (`k / 2` below their length).
#[inline(always)]
pub fn u32_at(words: &[i64], k: usize) -> u32 {
    let w = words[k / 2] as u64;
    if k.is_multiple_of(2) {
        w as u32
    } else {
        (w >> 32) as u32
    }
}

/// The sealed blob at `p` as a slice, its length read from its first word.
///
/// # Safety
/// `p` is null, or points to a readable word and, when that word is in `1..=MAX_WORDS`, to
/// that many readable words (a blob `seal` made, emitted with the object).
pub unsafe fn blob<'a>(p: *const i64) -> Result<&'a [i64]> {
    if p.is_null() {
        return Err(ParamError("no parameter blob"));
    }
    if !p.is_aligned() {
        return Err(ParamError("the blob is misaligned"));
    }
    // SAFETY: the caller's contract: the first word is readable (p is non-null and aligned).
    let len = unsafe { *p };
    if !(1..=MAX_WORDS).contains(&len) {
        return Err(ParamError("the blob's length word is out of range"));
    }
    // SAFETY: the caller's contract: a length word in range counts readable words.
    Ok(unsafe { std::slice::from_raw_parts(p, len as usize) })
}

/// Reads a sealed blob's body word by word; every read is bounds-checked.
#[derive(Debug)]
pub struct Reader<'a> {
    body: &'a [i64],
    at: usize,
}

impl<'a> Reader<'a> {
    /// A reader over `blob`'s body, after checking its length word against its length.
    pub fn new(blob: &'a [i64]) -> Result<Reader<'a>> {
        match blob.first() {
            Some(&n) if u64::try_from(n) == Ok(blob.len() as u64) => Ok(Reader {
                body: &blob[1..],
                at: 0,
            }),
            _ => Err(ParamError("the length word does not match the blob")),
        }
    }

    /// The next `n` words.
    pub fn words(&mut self, n: usize) -> Result<&'a [i64]> {
        if n > self.remaining() {
            return Err(ParamError("the blob is shorter than its header says"));
        }
        let w = &self.body[self.at..self.at + n];
        self.at += n;
        Ok(w)
    }

    /// The next word.
    pub fn word(&mut self) -> Result<i64> {
        Ok(self.words(1)?[0])
    }

    /// The next `N` words.
    pub fn array<const N: usize>(&mut self) -> Result<[i64; N]> {
        let w = self.words(N)?;
        Ok(std::array::from_fn(|i| w[i]))
    }

    /// Words not read yet.
    pub fn remaining(&self) -> usize {
        self.body.len() - self.at
    }

    /// The whole body (for tables addressed by offsets from its start).
    pub fn body(&self) -> &'a [i64] {
        self.body
    }

    /// Ends the read: every word of the blob was read (a longer blob has a layout this
    /// decoder does not know).
    pub fn finish(self) -> Result<()> {
        ensure(
            self.remaining() == 0,
            "the blob is longer than its header says",
        )
    }
}

/// `Ok(())` when `cond` holds, else the error `msg`.
pub fn ensure(cond: bool, msg: &'static str) -> Result<()> {
    if cond { Ok(()) } else { Err(ParamError(msg)) }
}

/// `v` when it lies in `lo..=hi`, else the error `msg`.
pub fn in_range(v: i64, lo: i64, hi: i64, msg: &'static str) -> Result<i64> {
    ensure((lo..=hi).contains(&v), msg)?;
    Ok(v)
}

/// A flag word: 0 or 1.
pub fn flag(v: i64, msg: &'static str) -> Result<bool> {
    Ok(in_range(v, 0, 1, msg)? == 1)
}

/// The product of non-negative `factors`, when it fits in an `isize` (an element count the
/// kernel may address); the error `msg` otherwise.
pub fn product(factors: impl IntoIterator<Item = i64>, msg: &'static str) -> Result<i64> {
    let mut p: i64 = 1;
    for f in factors {
        ensure(f >= 0, msg)?;
        p = p.checked_mul(f).ok_or(ParamError(msg))?;
    }
    ensure(isize::try_from(p).is_ok(), msg)?;
    Ok(p)
}

/// Span of a window of `kernel` taps `dilation` apart: `(kernel − 1)·dilation + 1`
/// (both in `1..=MAX_EXTENT`, so it cannot overflow).
pub fn window_span(kernel: i64, dilation: i64) -> i64 {
    (kernel - 1) * dilation + 1
}

/// Checks one spatial dim of a convolution whose padding at the end is implied by its
/// output extent (`conv::ConvGeometry`, `nchwc::BlockedConv`): input, kernel, output,
/// stride and dilation in `1..=MAX_EXTENT`, the padding at the start in `0..=MAX_EXTENT`,
/// and the output at least what the window formula gives with no padding at the end,
/// `⌊(input + pad − span) / stride⌋ + 1` (more outputs mean padding at the end, which the
/// kernels add from the output extent).
pub fn conv_dim(
    input: i64,
    kernel: i64,
    output: i64,
    stride: i64,
    dil: i64,
    pad: i64,
) -> Result<()> {
    for v in [input, kernel, output, stride, dil] {
        in_range(
            v,
            1,
            MAX_EXTENT,
            "a spatial extent, stride or dilation is out of range",
        )?;
    }
    in_range(pad, 0, MAX_EXTENT, "a pad is out of range")?;
    // ⌊a / s⌋ + 1 ≤ output ⟺ a < output·s (a ≥ 0; always for a < 0).
    ensure(
        input + pad - window_span(kernel, dil) < output * stride,
        "an output extent is smaller than the window formula gives",
    )
}

/// Checks one spatial dim of a pool (`pool::PoolGeometry`): input, kernel, stride and
/// dilation in `1..=MAX_EXTENT`, pads in `0..=MAX_EXTENT`, the output between the window
/// formula's floor and ceiling, `⌊a / s⌋ + 1 ≤ output ≤ ⌈a / s⌉ + 1` with
/// `a = input + pads − span` (floor and ceil modes), and the input starting inside the
/// windows' reach (a pad at the start below `(output − 1)·stride + span`).
pub fn pool_dim(
    input: i64,
    kernel: i64,
    output: i64,
    stride: i64,
    dil: i64,
    pads: [i64; 2],
) -> Result<()> {
    for v in [input, kernel, stride, dil] {
        in_range(
            v,
            1,
            MAX_EXTENT,
            "a spatial extent, stride or dilation is out of range",
        )?;
    }
    in_range(output, 0, MAX_EXTENT, "an output extent is out of range")?;
    for p in pads {
        in_range(p, 0, MAX_EXTENT, "a pad is out of range")?;
    }
    let span = window_span(kernel, dil);
    let a = input + pads[0] + pads[1] - span;
    ensure(
        (a.div_euclid(stride) + 1..=(a + stride - 1).div_euclid(stride) + 1).contains(&output),
        "an output extent disagrees with the window formula",
    )?;
    ensure(
        output == 0 || pads[0] < (output - 1) * stride + span,
        "a pad at the start lies beyond every window",
    )
}

/// Returns `abi::ONNXC_ERR_PARAMS` from a kernel entry point when a decode fails.
macro_rules! decoded {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(_) => return $crate::abi::ONNXC_ERR_PARAMS,
        }
    };
}
pub(crate) use decoded;

/// In a kernel entry point: the sealed blob at `p` decoded by `decode`, or a return of
/// `abi::ONNXC_ERR_PARAMS` when either refuses it. The entry point's `# Safety` contract says
/// that `p` points to a sealed blob (`blob`'s).
macro_rules! decode_blob {
    ($p:expr, $decode:expr) => {
        $crate::params::decoded!(
            // SAFETY: the entry point's contract: `$p` points to a sealed blob.
            unsafe { $crate::params::blob($p) }.and_then($decode)
        )
    };
}
pub(crate) use decode_blob;

/// Test blobs: the sealed blob `good` with body word `k` (after the length word) set to `v`.
#[cfg(test)]
pub(crate) fn with_word(good: &[i64], k: usize, v: i64) -> Vec<i64> {
    let mut b = good.to_vec();
    b[1 + k] = v;
    b
}

/// Test blobs: the sealed blob `good`'s body less its last word, sealed.
#[cfg(test)]
pub(crate) fn short_blob(good: &[i64]) -> Vec<i64> {
    seal(good[1..good.len() - 1].iter().copied())
}

/// Test blobs: the sealed blob `good`'s body with a zero word more, sealed.
#[cfg(test)]
pub(crate) fn long_blob(good: &[i64]) -> Vec<i64> {
    seal(good[1..].iter().copied().chain([0]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_are_read_within_their_length() {
        let b = seal([7, 8, 9]);
        assert_eq!(b, [4, 7, 8, 9]);
        // SAFETY: b is a sealed blob.
        let s = unsafe { blob(b.as_ptr()) }.unwrap();
        let mut r = Reader::new(s).unwrap();
        assert_eq!(r.word(), Ok(7));
        assert_eq!(r.array::<2>(), Ok([8, 9]));
        assert!(r.word().is_err(), "past the end");
        assert!(r.finish().is_ok());
        let mut r = Reader::new(&b).unwrap();
        r.word().unwrap();
        assert!(r.finish().is_err(), "words left over");
        assert!(Reader::new(&b[..3]).is_err(), "truncated");
        assert!(Reader::new(&[]).is_err());
        assert!(Reader::new(&[-1]).is_err());
        // SAFETY: null is allowed; the others point to one readable word.
        unsafe {
            assert!(blob(std::ptr::null()).is_err());
            assert!(blob([0i64].as_ptr()).is_err());
            assert!(blob([-3i64].as_ptr()).is_err());
            assert!(blob([MAX_WORDS + 1].as_ptr()).is_err());
        }
    }

    #[test]
    fn products_and_windows_are_checked() {
        assert_eq!(product([2, 3, 4], "x"), Ok(24));
        assert!(product([1 << 40, 1 << 40], "x").is_err());
        assert!(product([-1, 2], "x").is_err());
        // 5 inputs, kernel 3, stride 2, pad 1: ⌊(5 + 1 − 3) / 2⌋ + 1 = 2 outputs at least.
        assert!(conv_dim(5, 3, 2, 2, 1, 1).is_ok());
        assert!(conv_dim(5, 3, 3, 2, 1, 1).is_ok(), "padding at the end");
        assert!(conv_dim(5, 3, 1, 2, 1, 1).is_err());
        assert!(conv_dim(5, 0, 2, 2, 1, 1).is_err());
        assert!(conv_dim(5, 3, 2, 0, 1, 1).is_err());
        assert!(conv_dim(5, 3, 2, 2, 1, -1).is_err());
        // 6 inputs, kernel 3, stride 2, no pads: floor 2, ceil 3.
        assert!(pool_dim(6, 3, 2, 2, 1, [0, 0]).is_ok());
        assert!(pool_dim(6, 3, 3, 2, 1, [0, 0]).is_ok());
        assert!(pool_dim(6, 3, 4, 2, 1, [0, 0]).is_err());
        assert!(pool_dim(6, 3, 1, 2, 1, [0, 0]).is_err());
        assert!(
            pool_dim(1, 1, 1, 10, 1, [5, 0]).is_err(),
            "pad beyond the windows"
        );
    }
}
