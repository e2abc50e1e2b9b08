//! Kernels that make strings at run time: case changes (StringNormalizer), concatenation
//! (StringConcat) and splitting (StringSplit).
//!
//! A string tensor is an array of `const char *` (`strings`). The bytes of the strings these
//! kernels make go to the step's *string space*: a region of the workspace that no other
//! step reuses during the run (`loops::lower` places one per step after the arena), so every
//! pointer a run makes stays valid until the caller reuses the workspace. A call writes its
//! strings back to back from the start of its region, each NUL-terminated; when they do not
//! fit in its `cap` bytes it returns `ONNXC_ERR_STRINGS`, its outputs unspecified (the
//! region's size comes from `onnxc --string-bytes`).
//!
//! Case changes map each code point on its own, as `towlower`/`towupper` do (onnxruntime's
//! StringNormalizer): Unicode's simple case mapping, so `ß` stays `ß` and `İ` lowers to `i`.
//! Bytes that are not UTF-8 are copied unchanged.

use crate::abi::{ONNXC_ERR_STRINGS, ONNXC_OK};
use crate::kernels::Status;
use crate::params::{self, ParamError};
use crate::strings::c_str;
use std::ffi::c_char;

/// The string `""`, which padding and empty results point to.
static EMPTY: u8 = 0;

fn empty() -> *const c_char {
    &EMPTY as *const u8 as *const c_char
}

/// `upper` of `onnxc_str_case`: lower case.
pub const LOWER: i64 = 0;
/// `upper` of `onnxc_str_case`: upper case.
pub const UPPER: i64 = 1;

/// The code point `c` in lower (or upper) case: Unicode's simple mapping, one code point to
/// one (a mapping to several code points keeps `c`, but for `İ`, whose simple lower case is
/// `i`).
pub(crate) fn map_char(c: char, upper: bool) -> char {
    fn only(mut it: impl Iterator<Item = char>) -> Option<char> {
        let first = it.next()?;
        it.next().is_none().then_some(first)
    }
    if upper {
        only(c.to_uppercase()).unwrap_or(c)
    } else if c == '\u{130}' {
        'i'
    } else {
        only(c.to_lowercase()).unwrap_or(c)
    }
}

/// `s` in lower (or upper) case, as `onnxc_str_case` writes it (compile-time callers: the
/// stopwords of a case-insensitive StringNormalizer).
pub fn change_case(s: &[u8], upper: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    for_case(s, upper, |b| {
        out.extend_from_slice(b);
        true
    });
    out
}

/// Calls `put` with the bytes of `s` in lower (or upper) case, piece by piece, until it
/// returns false; returns whether every piece was taken.
fn for_case(s: &[u8], upper: bool, mut put: impl FnMut(&[u8]) -> bool) -> bool {
    for chunk in s.utf8_chunks() {
        for c in chunk.valid().chars() {
            let m = if c.is_ascii() {
                let b = c as u8;
                (if upper {
                    b.to_ascii_uppercase()
                } else {
                    b.to_ascii_lowercase()
                }) as char
            } else {
                map_char(c, upper)
            };
            let mut buf = [0u8; 4];
            if !put(m.encode_utf8(&mut buf).as_bytes()) {
                return false;
            }
        }
        if !put(chunk.invalid()) {
            return false;
        }
    }
    true
}

/// A call's string space: `cap` bytes from `base`, `used` of them written.
pub(crate) struct Space {
    base: *mut u8,
    cap: usize,
    used: usize,
}

impl Space {
    pub(crate) fn new(base: *mut u8, cap: i64) -> Space {
        Space {
            base,
            cap: if base.is_null() {
                0
            } else {
                cap.max(0) as usize
            },
            used: 0,
        }
    }

    /// Appends `bytes` to the string being written; false when they do not fit (with room
    /// left for its NUL).
    fn put(&mut self, bytes: &[u8]) -> bool {
        if bytes.is_empty() {
            return true;
        }
        if bytes.len() >= self.cap - self.used {
            return false;
        }
        // SAFETY: used + len < cap: inside the space (`new`'s contract).
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(self.used), bytes.len())
        };
        self.used += bytes.len();
        true
    }

    /// Ends the string that started at `start` (its NUL) and returns it, or None when the
    /// NUL does not fit.
    fn finish(&mut self, start: usize) -> Option<*const c_char> {
        if self.used >= self.cap {
            return None;
        }
        // SAFETY: used < cap.
        unsafe { *self.base.add(self.used) = 0 };
        self.used += 1;
        // SAFETY: start ≤ used ≤ cap.
        Some(unsafe { self.base.add(start) } as *const c_char)
    }

    /// `pieces` written one after the other as one string.
    pub(crate) fn string<'a>(
        &mut self,
        pieces: impl IntoIterator<Item = &'a [u8]>,
    ) -> Option<*const c_char> {
        let start = self.used;
        for p in pieces {
            if !self.put(p) {
                return None;
            }
        }
        self.finish(start)
    }
}

/// `y[i]` = string `x[i]` in lower case (`upper` = `LOWER`) or upper case (`UPPER`), made in
/// `space`; a null `x[i]` reads as the empty string.
///
/// # Safety
/// `x` holds `n` null or NUL-terminated strings, `y` `n` slots; `space` is null or `cap`
/// writable bytes that outlive the pointers written to `y`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_str_case(
    x: *const *const c_char,
    y: *mut *const c_char,
    n: i64,
    upper: i64,
    space: *mut u8,
    cap: i64,
) -> Status {
    let mut sp = Space::new(space, cap);
    let upper = upper == UPPER;
    for i in 0..n.max(0) as usize {
        // SAFETY: the caller's contract.
        let s = unsafe { c_str(*x.add(i)) };
        let start = sp.used;
        if !for_case(s, upper, |b| sp.put(b)) {
            return ONNXC_ERR_STRINGS;
        }
        let Some(p) = sp.finish(start) else {
            return ONNXC_ERR_STRINGS;
        };
        // SAFETY: y holds n slots.
        unsafe { *y.add(i) = p };
    }
    ONNXC_OK
}

/// `y[i]` = string `a[i]` followed by `b[i]`, made in `space`; a null string reads as the
/// empty string.
///
/// # Safety
/// `a` and `b` hold `n` null or NUL-terminated strings each, `y` `n` slots; `space` as
/// `onnxc_str_case`'s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_str_concat(
    a: *const *const c_char,
    b: *const *const c_char,
    y: *mut *const c_char,
    n: i64,
    space: *mut u8,
    cap: i64,
) -> Status {
    let mut sp = Space::new(space, cap);
    for i in 0..n.max(0) as usize {
        // SAFETY: the caller's contract.
        let (sa, sb) = unsafe { (c_str(*a.add(i)), c_str(*b.add(i))) };
        let Some(p) = sp.string([sa, sb]) else {
            return ONNXC_ERR_STRINGS;
        };
        // SAFETY: y holds n slots.
        unsafe { *y.add(i) = p };
    }
    ONNXC_OK
}

/// StringSplit's attributes, decoded from their sealed blob `[maxsplit, delimiter length,
/// delimiter bytes packed little-endian in words]`; an empty delimiter splits at runs of
/// ASCII white space (Python's `str.split()`).
#[derive(Clone, Debug, PartialEq)]
pub struct SplitParams {
    /// Splits made at most (the pieces are one more); negative: no limit.
    pub maxsplit: i64,
    pub delimiter: Vec<u8>,
}

impl SplitParams {
    pub fn encode(&self) -> Vec<i64> {
        let words = self.delimiter.chunks(8).map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            i64::from_le_bytes(w)
        });
        params::seal(
            [self.maxsplit, self.delimiter.len() as i64]
                .into_iter()
                .chain(words),
        )
    }

    /// Decodes and checks `blob`: the delimiter's length matches its words and holds no NUL.
    pub fn decode(blob: &[i64]) -> params::Result<SplitParams> {
        let mut r = params::Reader::new(blob)?;
        let [maxsplit, len] = r.array()?;
        let len = params::in_range(len, 0, 1 << 20, "delimiter length out of range")? as usize;
        let words = r.words(len.div_ceil(8))?;
        r.finish()?;
        let delimiter: Vec<u8> = words
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .take(len)
            .collect();
        params::ensure(!delimiter.contains(&0), "the delimiter holds a NUL byte")?;
        Ok(SplitParams {
            maxsplit,
            delimiter,
        })
    }

    /// Calls `piece` with each piece of `s` in order.
    pub fn split<'s>(&self, s: &'s [u8], mut piece: impl FnMut(&'s [u8]) -> bool) -> bool {
        let mut left = if self.maxsplit < 0 {
            u64::MAX
        } else {
            self.maxsplit as u64
        };
        if self.delimiter.is_empty() {
            let space = |b: &u8| b.is_ascii_whitespace() || *b == 0x0b;
            let mut rest = s;
            loop {
                let start = rest.iter().position(|b| !space(b)).unwrap_or(rest.len());
                rest = &rest[start..];
                if rest.is_empty() {
                    return true;
                }
                if left == 0 {
                    return piece(rest);
                }
                let end = rest.iter().position(space).unwrap_or(rest.len());
                if !piece(&rest[..end]) {
                    return false;
                }
                rest = &rest[end..];
                left -= 1;
            }
        }
        let d = &self.delimiter[..];
        let mut rest = s;
        while left > 0 {
            let Some(at) = rest.windows(d.len()).position(|w| w == d) else {
                break;
            };
            if !piece(&rest[..at]) {
                return false;
            }
            rest = &rest[at + d.len()..];
            left -= 1;
        }
        piece(rest)
    }

    /// The pieces of `s`.
    pub fn count(&self, s: &[u8]) -> i64 {
        let mut k = 0;
        self.split(s, |_| {
            k += 1;
            true
        });
        k
    }
}

/// `z[i]` = the number of pieces StringSplit makes of string `x[i]`.
///
/// # Safety
/// `params` points to a sealed blob (`SplitParams::encode`); `x` holds `n` null or
/// NUL-terminated strings, `z` `n` slots.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_str_split_count(
    params: *const i64,
    x: *const *const c_char,
    z: *mut i64,
    n: i64,
) -> Status {
    let p = params::decode_blob!(params, SplitParams::decode);
    // SAFETY: the caller's contract.
    unsafe { crate::strings::map_strings(x, z, n, |s| p.count(s)) }
}

/// Row `i` of `y` (`cols` slots) = the pieces of string `x[i]`, made in `space`, then empty
/// strings. More than `cols` pieces in a string is `ONNXC_ERR_STRINGS`.
///
/// # Safety
/// As `onnxc_str_split_count`, with `y` holding `n · cols` slots and `space` as
/// `onnxc_str_case`'s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_str_split(
    params: *const i64,
    x: *const *const c_char,
    y: *mut *const c_char,
    n: i64,
    cols: i64,
    space: *mut u8,
    cap: i64,
) -> Status {
    let p = params::decode_blob!(params, SplitParams::decode);
    let (n, cols) = (n.max(0) as usize, cols.max(0) as usize);
    let mut sp = Space::new(space, cap);
    let row = |s: &[u8], put: &mut dyn FnMut(*const c_char) -> bool| {
        p.split(s, |piece| sp.string([piece]).is_some_and(&mut *put))
    };
    // SAFETY: the caller's contract.
    unsafe { write_rows(x, y, n, cols, cols, row, |_| empty()) }
}

/// Row `i` of `y` (`cols` slots) for each of the `n` strings `x[i]`: `row(x[i], put)` puts
/// at most `limit ≤ cols` strings (`put` refuses more) and returns false when one does not
/// fit; slot `j` after them gets `fill(j)`. A row that does not fit is
/// `ONNXC_ERR_STRINGS`.
///
/// # Safety
/// `x` holds `n` null or NUL-terminated strings, `y` `n · cols` slots.
pub(crate) unsafe fn write_rows(
    x: *const *const c_char,
    y: *mut *const c_char,
    n: usize,
    cols: usize,
    limit: usize,
    mut row: impl FnMut(&[u8], &mut dyn FnMut(*const c_char) -> bool) -> bool,
    fill: impl Fn(usize) -> *const c_char,
) -> Status {
    let limit = limit.min(cols);
    for i in 0..n {
        // SAFETY: the caller's contract.
        let (s, out) = unsafe { (c_str(*x.add(i)), y.add(i * cols)) };
        let mut k = 0;
        let mut put = |q: *const c_char| {
            if k >= limit {
                return false;
            }
            // SAFETY: k < limit ≤ cols.
            unsafe { *out.add(k) = q };
            k += 1;
            true
        };
        if !row(s, &mut put) {
            return ONNXC_ERR_STRINGS;
        }
        for j in k..cols {
            // SAFETY: j < cols.
            unsafe { *out.add(j) = fill(j) };
        }
    }
    ONNXC_OK
}

/// Checks a split blob (`kernels::planned_scratch`).
pub fn check_split(blob: &[i64]) -> Result<(), ParamError> {
    SplitParams::decode(blob).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::{CStr, CString};

    fn ptrs(v: &[CString]) -> Vec<*const c_char> {
        v.iter().map(|s| s.as_ptr()).collect()
    }

    fn owned(v: &[&str]) -> Vec<CString> {
        v.iter().map(|s| CString::new(*s).unwrap()).collect()
    }

    fn read(p: &[*const c_char]) -> Vec<String> {
        // SAFETY: every pointer is a NUL-terminated string.
        p.iter()
            .map(|&q| unsafe { CStr::from_ptr(q) }.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn case_maps_code_points_one_to_one() {
        assert_eq!(
            change_case("Straße ÉTÉ İx".as_bytes(), false),
            "straße été ix".as_bytes()
        );
        assert_eq!(
            change_case("straße été ǆ".as_bytes(), true),
            "STRAßE ÉTÉ Ǆ".as_bytes()
        );
        // Bytes that are not UTF-8 pass through.
        assert_eq!(change_case(b"A\xffB", false), b"a\xffb");
    }

    #[test]
    fn case_kernel_fills_the_space_and_reports_overflow() {
        let x = owned(&["Monday", "", "ÉTÉ"]);
        let mut px = ptrs(&x);
        px.push(std::ptr::null());
        let mut y = vec![std::ptr::null(); 4];
        let mut space = vec![0xaau8; 64];
        // SAFETY: four strings, four slots, 64 bytes of space.
        let rc = unsafe {
            onnxc_str_case(
                px.as_ptr(),
                y.as_mut_ptr(),
                4,
                LOWER,
                space.as_mut_ptr(),
                64,
            )
        };
        assert_eq!(rc, ONNXC_OK);
        assert_eq!(read(&y), ["monday", "", "été", ""]);
        // "monday\0" "\0" "été\0" (5 bytes + NUL) "\0": 7 + 1 + 6 + 1 bytes; one fewer fails.
        for cap in [15, 14] {
            space.fill(0xaa);
            // SAFETY: as above, with `cap` ≤ 64 bytes.
            let rc = unsafe {
                onnxc_str_case(
                    px.as_ptr(),
                    y.as_mut_ptr(),
                    4,
                    UPPER,
                    space.as_mut_ptr(),
                    cap,
                )
            };
            assert_eq!(
                rc,
                if cap == 15 {
                    ONNXC_OK
                } else {
                    ONNXC_ERR_STRINGS
                }
            );
            assert!(
                space[cap as usize..].iter().all(|&b| b == 0xaa),
                "wrote past cap"
            );
        }
        assert_eq!(read(&y[..3]), ["MONDAY", "", "ÉTÉ"]);
    }

    #[test]
    fn concat_joins_pairs() {
        let (a, b) = (owned(&["abc", "", "的"]), owned(&[".com", "abc", "的"]));
        let mut y = vec![std::ptr::null(); 3];
        let mut space = [0u8; 32];
        // SAFETY: three strings each, three slots, 32 bytes.
        let rc = unsafe {
            onnxc_str_concat(
                ptrs(&a).as_ptr(),
                ptrs(&b).as_ptr(),
                y.as_mut_ptr(),
                3,
                space.as_mut_ptr(),
                32,
            )
        };
        assert_eq!(rc, ONNXC_OK);
        assert_eq!(read(&y), ["abc.com", "abc", "的的"]);
        // SAFETY: as above, with no space at all.
        let rc = unsafe {
            onnxc_str_concat(
                ptrs(&a).as_ptr(),
                ptrs(&b).as_ptr(),
                y.as_mut_ptr(),
                3,
                std::ptr::null_mut(),
                32,
            )
        };
        assert_eq!(rc, ONNXC_ERR_STRINGS);
    }

    fn pieces(p: &SplitParams, s: &str) -> Vec<String> {
        let mut v = Vec::new();
        p.split(s.as_bytes(), |b| {
            v.push(String::from_utf8_lossy(b).into_owned());
            true
        });
        v
    }

    #[test]
    fn split_follows_python() {
        let by = |d: &str, maxsplit| SplitParams {
            maxsplit,
            delimiter: d.as_bytes().to_vec(),
        };
        assert_eq!(
            pieces(&by("-", -1), "o-n-n--x-"),
            ["o", "n", "n", "", "x", ""]
        );
        assert_eq!(pieces(&by("-", -1), ""), [""]);
        assert_eq!(pieces(&by("ab", 1), "xabyabz"), ["x", "yabz"]);
        assert_eq!(
            pieces(&by("", -1), "  hello   world ! "),
            ["hello", "world", "!"]
        );
        assert_eq!(pieces(&by("", -1), "   "), Vec::<String>::new());
        assert_eq!(pieces(&by("", 1), " a b  c "), ["a", "b  c "]);
        assert_eq!(pieces(&by("", 0), "  a b"), ["a b"]);
        let p = by("<>", 3);
        assert_eq!(SplitParams::decode(&p.encode()), Ok(p));
        let mut bad = by("a", 1).encode();
        bad[2] = 9;
        assert!(SplitParams::decode(&bad).is_err());
    }

    #[test]
    fn split_kernel_pads_rows_and_bounds_them() {
        let p = SplitParams {
            maxsplit: -1,
            delimiter: b".".to_vec(),
        }
        .encode();
        let x = owned(&["a.b.c", "d"]);
        let px = ptrs(&x);
        let mut z = [0i64; 2];
        // SAFETY: a split blob, two strings, two slots.
        let rc = unsafe { onnxc_str_split_count(p.as_ptr(), px.as_ptr(), z.as_mut_ptr(), 2) };
        assert_eq!(rc, ONNXC_OK);
        assert_eq!(z, [3, 1]);
        let mut y = vec![std::ptr::null(); 8];
        let mut space = [0u8; 32];
        let mut call = |cols: i64| {
            // SAFETY: two rows of at most four slots, 32 bytes of space.
            unsafe {
                onnxc_str_split(
                    p.as_ptr(),
                    px.as_ptr(),
                    y.as_mut_ptr(),
                    2,
                    cols,
                    space.as_mut_ptr(),
                    32,
                )
            }
        };
        // Rows of two slots: the first string has three pieces.
        assert_eq!(call(2), ONNXC_ERR_STRINGS);
        assert_eq!(call(4), ONNXC_OK);
        assert_eq!(read(&y), ["a", "b", "c", "", "d", "", "", ""]);
    }
}
