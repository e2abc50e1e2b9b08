//! Layout conversions between NCHW and blocked NCHWc (`[n][c/8][hw][8]`). Channels beyond
//! `c` in the last block are zero in the blocked form and dropped on the way back.

use super::CB;
use crate::abi::ONNXC_OK;
use crate::kernels::Status;
use crate::par::{Par, Threads};
use crate::params::{self, decoded};
use std::ops::Range;

/// NCHW → blocked, for `n` images of `c` channels × `hw` positions.
///
/// # Safety
/// `x` holds `n × c × hw` floats, `y` holds `n × c.div_ceil(8) × hw × 8`; no overlap.
pub unsafe fn to_blocked(x: *const f32, n: usize, c: usize, hw: usize, y: *mut f32) {
    // SAFETY: forwarded.
    unsafe { to_blocked_gather(x, n, c, hw, y, None) }
}

/// NCHW → blocked where channel `ci` of the result is the plane at element offset
/// `planes[ci]` of each input image (a channel permutation, e.g. ShuffleNet's channel
/// shuffle, applied on the way), or plane `ci` without a table.
///
/// # Safety
/// As `to_blocked`; every `planes[ci] + hw` is at most `c × hw`.
pub unsafe fn to_blocked_gather(
    x: *const f32,
    n: usize,
    c: usize,
    hw: usize,
    y: *mut f32,
    planes: Option<&[i64]>,
) {
    // SAFETY: forwarded.
    unsafe { to_blocked_blocks(x, c, hw, y, planes, 0..n * c.div_ceil(CB)) }
}

/// The (image, block) pairs `pairs` (numbered image-major) of `to_blocked_gather`.
///
/// # Safety
/// As `to_blocked_gather`.
unsafe fn to_blocked_blocks(
    x: *const f32,
    c: usize,
    hw: usize,
    y: *mut f32,
    planes: Option<&[i64]>,
    pairs: Range<usize>,
) {
    let cb = c.div_ceil(CB);
    let plane = |ci: usize| planes.map_or(ci * hw, |p| p[ci] as usize);
    for (img, b) in pairs.map(|p| (p / cb, p % cb)) {
        {
            // SAFETY: block b of image img in both layouts; the planes lie in the image.
            unsafe {
                let src = x.add(img * c * hw);
                let dst = y.add((img * cb + b) * hw * CB);
                let chans = (c - b * CB).min(CB);
                let rows: [*const f32; CB] =
                    std::array::from_fn(|ci| src.wrapping_add(plane(b * CB + ci.min(chans - 1))));
                let mut p = 0;
                #[cfg(target_arch = "x86_64")]
                if chans == CB && crate::isa::avx2() {
                    p = avx2::to_blocked_8x8(rows, hw, dst);
                }
                for q in p..hw {
                    for (ci, row) in rows.iter().enumerate() {
                        *dst.add(q * CB + ci) = if ci < chans { *row.add(q) } else { 0.0 };
                    }
                }
            }
        }
    }
}

/// Blocked → NCHW, for `n` images of `c` channels × `hw` positions.
///
/// # Safety
/// As `to_blocked`, with the roles of x and y swapped.
pub unsafe fn from_blocked(x: *const f32, n: usize, c: usize, hw: usize, y: *mut f32) {
    // SAFETY: forwarded.
    unsafe { from_blocked_blocks(x, c, hw, y, 0..n * c.div_ceil(CB)) }
}

/// The (image, block) pairs `pairs` (numbered image-major) of `from_blocked`.
///
/// # Safety
/// As `from_blocked`.
unsafe fn from_blocked_blocks(
    x: *const f32,
    c: usize,
    hw: usize,
    y: *mut f32,
    pairs: Range<usize>,
) {
    let cb = c.div_ceil(CB);
    for (img, b) in pairs.map(|p| (p / cb, p % cb)) {
        {
            // SAFETY: block b of image img in both layouts.
            unsafe {
                let src = x.add((img * cb + b) * hw * CB);
                let dst = y.add((img * c + b * CB) * hw);
                let chans = (c - b * CB).min(CB);
                let mut p = 0;
                #[cfg(target_arch = "x86_64")]
                if chans == CB && crate::isa::avx2() {
                    p = avx2::from_blocked_8x8(src, hw, dst);
                }
                for q in p..hw {
                    for ci in 0..chans {
                        *dst.add(ci * hw + q) = *src.add(q * CB + ci);
                    }
                }
            }
        }
    }
}

/// The sealed blob (`params::seal`) of `onnxc_nchw_to_nchwc`'s plane offsets, one per
/// channel: `[len, planes…]`.
pub fn encode_planes(planes: &[i64]) -> Vec<i64> {
    params::seal(planes.iter().copied())
}

/// The plane offsets `encode_planes` wrote into `blob`, checked for images of `c` channels
/// of `hw` positions: one per channel, each plane inside the image (`0 ≤ p ≤ (c − 1)·hw`).
pub fn decode_planes(blob: &[i64], c: usize, hw: usize) -> params::Result<&[i64]> {
    let mut r = params::Reader::new(blob)?;
    let planes = r.words(r.remaining())?;
    params::ensure(planes.len() == c, "not one input plane per channel")?;
    let last = (c.saturating_sub(1) as i64)
        .checked_mul(hw as i64)
        .ok_or(params::ParamError("a tensor is too large"))?;
    params::ensure(
        planes.iter().all(|&p| (0..=last).contains(&p)),
        "an input plane lies outside the image",
    )?;
    Ok(planes)
}

/// C ABI: `to_blocked_gather`; `planes` is null or `encode_planes`' blob of `c` plane
/// offsets. Returns `ONNXC_ERR_PARAMS`, touching nothing, when a count is negative or too
/// large or the planes are not valid (`decode_planes`: the walk is O(c), the copy O(c·hw)).
///
/// The blocks are split over the run's `threads`.
///
/// # Safety
/// `planes` is null or points to a sealed blob (`params::blob`); `threads` as
/// `Par::from_raw`; otherwise as `to_blocked_gather`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_nchw_to_nchwc(
    x: *const f32,
    n: i64,
    c: i64,
    hw: i64,
    y: *mut f32,
    planes: *const i64,
    threads: *const Threads,
) -> Status {
    let too_big = "a tensor is too large";
    decoded!(params::product([n, c, hw], too_big));
    decoded!(params::product(
        [n, c.saturating_add(CB as i64 - 1), hw],
        too_big
    ));
    let (n, c, hw) = (n as usize, c as usize, hw as usize);
    let planes = if planes.is_null() {
        None
    } else {
        Some(params::decode_blob!(planes, |b| decode_planes(b, c, hw)))
    };
    // SAFETY: forwarded contract, the planes checked; each task writes its own blocks.
    unsafe {
        Par::from_raw(threads).for_ranges(n * c.div_ceil(CB), hw * CB, &|r, _| {
            to_blocked_blocks(x, c, hw, y, planes, r)
        })
    };
    ONNXC_OK
}

/// C ABI: `from_blocked`, the blocks split over the run's `threads`.
///
/// # Safety
/// As `from_blocked`; `threads` as `Par::from_raw`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_nchwc_to_nchw(
    x: *const f32,
    n: i64,
    c: i64,
    hw: i64,
    y: *mut f32,
    threads: *const Threads,
) {
    let (n, c, hw) = (n.max(0) as usize, c.max(0) as usize, hw.max(0) as usize);
    // SAFETY: forwarded contract; each task writes its own blocks.
    unsafe {
        Par::from_raw(threads).for_ranges(n * c.div_ceil(CB), hw * CB, &|r, _| {
            from_blocked_blocks(x, c, hw, y, r)
        })
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::CB;
    use crate::avx2::transpose8;
    use std::arch::x86_64::*;

    /// One full block from 8 channel rows, 8 positions at a time; returns the positions done.
    ///
    /// # Safety
    /// Each of `rows` holds `hw` floats, `dst` `hw × 8` floats.
    #[target_feature(enable = "avx2")]
    pub unsafe fn to_blocked_8x8(rows: [*const f32; CB], hw: usize, dst: *mut f32) -> usize {
        let mut p = 0;
        // SAFETY: positions p..p+8 of each row; 64 floats of dst at p × 8.
        unsafe {
            while p + 8 <= hw {
                let r: [__m256; 8] = std::array::from_fn(|ci| _mm256_loadu_ps(rows[ci].add(p)));
                for (q, v) in transpose8(r).iter().enumerate() {
                    _mm256_storeu_ps(dst.add((p + q) * CB), *v);
                }
                p += 8;
            }
        }
        p
    }

    /// One full block back to 8 channel rows, 8 positions at a time; returns the positions
    /// done.
    ///
    /// # Safety
    /// `src` holds `hw × 8` floats, `dst` 8 channel rows of `hw` floats.
    #[target_feature(enable = "avx2")]
    pub unsafe fn from_blocked_8x8(src: *const f32, hw: usize, dst: *mut f32) -> usize {
        let mut p = 0;
        // SAFETY: as above.
        unsafe {
            while p + 8 <= hw {
                let r: [__m256; 8] =
                    std::array::from_fn(|q| _mm256_loadu_ps(src.add((p + q) * CB)));
                for (ci, v) in transpose8(r).iter().enumerate() {
                    _mm256_storeu_ps(dst.add(ci * hw + p), *v);
                }
                p += 8;
            }
        }
        p
    }
}
