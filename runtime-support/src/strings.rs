//! String elements: at run time a string tensor is an array of `const char *` (NUL-terminated
//! UTF-8). Input strings are the caller's; output strings point into a table stored in the
//! model's read-only data (a classifier's labels, a label encoder's values), valid for the
//! life of the program. Generated code only moves the pointers; these two kernels are where
//! strings are read or made:
//! - `onnxc_str_lookup`: each string's position in a table (−1 if absent), by binary search
//!   over the table's bytes in sorted order;
//! - `onnxc_str_gather`: the table's string at each position.
//!
//! A table is one sealed `i64` blob (`encode`, `params::seal`): its length, `[MAGIC, n,
//! bytes_offset]`, then `n + 1` byte offsets (u32, the strings back to back, each
//! NUL-terminated, a last empty string after them), then the positions in byte order (u32),
//! then the bytes (`bytes_offset` and the tables addressed from the word after the length).

use crate::abi::ONNXC_OK;
use crate::kernels::Status;
use crate::params;
use std::ffi::{CStr, c_char};

const MAGIC: i64 = 0x6f6e_6e78_7374_7273; // "onnxstrs"

/// Lays out `strings` (none may hold a NUL byte) for the kernels, as a sealed blob
/// (`params::seal`); `check` holds for it.
pub fn encode(strings: &[&[u8]]) -> Vec<i64> {
    let n = strings.len();
    let mut offsets = Vec::with_capacity(n + 1);
    let mut bytes = Vec::new();
    for s in strings {
        offsets.push(bytes.len() as u32);
        bytes.extend_from_slice(s);
        bytes.push(0);
    }
    offsets.push(bytes.len() as u32);
    bytes.push(0);
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by(|&a, &b| strings[a as usize].cmp(strings[b as usize]).then(a.cmp(&b)));
    let mut words: Vec<u8> = Vec::new();
    for o in &offsets {
        words.extend_from_slice(&o.to_le_bytes());
    }
    for o in &order {
        words.extend_from_slice(&o.to_le_bytes());
    }
    while !words.len().is_multiple_of(8) {
        words.push(0);
    }
    let bytes_offset = 8 * HEADER + words.len();
    words.extend_from_slice(&bytes);
    while !words.len().is_multiple_of(8) {
        words.push(0);
    }
    let out = params::seal(
        [MAGIC, n as i64, bytes_offset as i64].into_iter().chain(
            words
                .chunks(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes"))),
        ),
    );
    debug_assert_eq!(check(&out), Ok(()), "{strings:?}");
    out
}

/// Strings in an encoded table (0 if `blob` is not one).
pub fn len(blob: &[i64]) -> usize {
    Table::new(blob).map_or(0, |t| t.n)
}

/// Checks all of an encoded table (what `encode` guarantees): the header and table bounds
/// (`Table::new`, what the kernels check per call), byte offsets in order, every string
/// NUL-terminated with no NUL inside, the positions in byte order a permutation. O(table):
/// run where a table is made or compiled into a call, not per call.
pub fn check(blob: &[i64]) -> params::Result<()> {
    let t = Table::new(blob)?;
    let bad = |m| Err(params::ParamError(m));
    let bytes = t.bytes_len;
    // SAFETY: `Table::new` checked that the offsets (n + 1) and the positions (n) are inside
    // the blob, and offsets[n] inside the bytes.
    let (offsets, order) = unsafe {
        (
            std::slice::from_raw_parts(t.offsets, t.n + 1),
            std::slice::from_raw_parts(t.order, t.n),
        )
    };
    // SAFETY: the bytes area lies inside the blob (`Table::new`).
    let data = unsafe { std::slice::from_raw_parts(t.bytes, bytes) };
    for k in 0..t.n {
        let (a, b) = (offsets[k] as usize, offsets[k + 1] as usize);
        if a >= b || b > bytes || data[a..b - 1].contains(&0) || data[b - 1] != 0 {
            return bad("a string is out of range or not NUL-terminated");
        }
    }
    let mut seen = vec![false; t.n];
    for &k in order {
        if k as usize >= t.n || std::mem::replace(&mut seen[k as usize], true) {
            return bad("the byte order is not a permutation of the strings");
        }
    }
    if order
        .windows(2)
        .any(|w| t.at(w[0] as usize) > t.at(w[1] as usize))
    {
        return bad("the byte order is not sorted");
    }
    Ok(())
}

/// Words of a table's header (after the length word): magic, count, offset of the bytes.
const HEADER: usize = 3;

pub(crate) struct Table {
    n: usize,
    offsets: *const u32,
    order: *const u32,
    bytes: *const u8,
    /// Bytes of the strings area (to the end of the blob).
    bytes_len: usize,
}

impl Table {
    /// The table in `blob`, its header and bounds checked: the magic, a count below 2³¹,
    /// the offsets and positions inside the blob, the bytes after them and the last
    /// (empty) string's NUL inside the blob. The strings' own offsets are `check`ed when
    /// the table is made (O(n)), not here (the kernels' per-call check is O(1)).
    pub(crate) fn new(blob: &[i64]) -> params::Result<Table> {
        use params::ensure;
        let mut r = params::Reader::new(blob)?;
        let [magic, n, bytes_offset] = r.array()?;
        ensure(magic == MAGIC, "not a string table")?;
        let n = params::in_range(n, 0, i32::MAX as i64, "string count out of range")? as usize;
        let body = r.body();
        let total = 8 * body.len();
        // Offsets (n + 1) then positions (n), u32 each, after the header.
        let tables_end = 8 * HEADER + 4 * (2 * n + 1);
        ensure(
            (tables_end as i64..total as i64).contains(&bytes_offset),
            "the strings' bytes are out of range",
        )?;
        let base = body.as_ptr() as *const u8;
        // SAFETY: the tables and the bytes lie inside the body (checked above); 8 * HEADER
        // keeps the u32 tables 4-byte aligned.
        let t = unsafe {
            let offsets = base.add(8 * HEADER) as *const u32;
            Table {
                n,
                offsets,
                order: offsets.add(n + 1),
                bytes: base.add(bytes_offset as usize),
                bytes_len: total - bytes_offset as usize,
            }
        };
        // SAFETY: offsets[n] is inside the offsets table.
        let last = unsafe { *t.offsets.add(n) } as usize;
        ensure(last < t.bytes_len, "the last string is out of range")?;
        Ok(t)
    }

    /// String `k` (k ≤ n; n is the empty string after the others).
    pub(crate) fn at(&self, k: usize) -> &[u8] {
        // SAFETY: k ≤ n and the offsets bound strings inside the bytes.
        unsafe {
            let a = *self.offsets.add(k) as usize;
            let len = if k < self.n {
                *self.offsets.add(k + 1) as usize - a - 1
            } else {
                0
            };
            std::slice::from_raw_parts(self.bytes.add(a), len)
        }
    }

    fn ptr(&self, k: usize) -> *const c_char {
        // SAFETY: as `at`.
        unsafe { self.bytes.add(*self.offsets.add(k) as usize) as *const c_char }
    }

    /// Strings in the table.
    pub(crate) fn len(&self) -> usize {
        self.n
    }

    /// The position of `s` (its first occurrence), −1 if absent.
    pub(crate) fn find(&self, s: &[u8]) -> i64 {
        let (mut lo, mut hi) = (0usize, self.n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            // SAFETY: mid < n.
            let k = unsafe { *self.order.add(mid) } as usize;
            match self.at(k).cmp(s) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                // The first of equal strings (positions sort them).
                std::cmp::Ordering::Equal => hi = mid,
            }
        }
        if lo < self.n {
            // SAFETY: lo < n.
            let k = unsafe { *self.order.add(lo) } as usize;
            if self.at(k) == s {
                return k as i64;
            }
        }
        -1
    }
}

/// The bytes of a C string, a null pointer reading as the empty string.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string that outlives `'a`.
pub(crate) unsafe fn c_str<'a>(p: *const c_char) -> &'a [u8] {
    if p.is_null() {
        b""
    } else {
        // SAFETY: the caller's contract.
        unsafe { CStr::from_ptr(p) }.to_bytes()
    }
}

/// `y[i]` = `f(x[i])` for the `n` strings of `x` (a null one reads as the empty string);
/// `ONNXC_OK`.
///
/// # Safety
/// `x` holds `n` null or NUL-terminated strings, `y` `n` slots.
pub(crate) unsafe fn map_strings<T>(
    x: *const *const c_char,
    y: *mut T,
    n: i64,
    f: impl Fn(&[u8]) -> T,
) -> Status {
    for i in 0..n.max(0) as usize {
        // SAFETY: the caller's contract.
        unsafe { *y.add(i) = f(c_str(*x.add(i))) };
    }
    ONNXC_OK
}

/// `y[i]` = the position of string `x[i]` in `table` (its first occurrence), −1 if absent;
/// a null `x[i]` reads as the empty string. Returns `ONNXC_ERR_PARAMS`, touching nothing,
/// when `table`'s header or bounds are not valid (`Table::new`).
///
/// # Safety
/// `table` points to a sealed blob `encode` made (`check` holds); `x` holds `n` null or
/// NUL-terminated strings, `y` `n` slots.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_str_lookup(
    table: *const i64,
    x: *const *const c_char,
    y: *mut i64,
    n: i64,
) -> Status {
    let t = params::decode_blob!(table, Table::new);
    // SAFETY: the caller's contract.
    unsafe { map_strings(x, y, n, |s| t.find(s)) }
}

/// `y[i]` = 1 when strings `a[i]` and `b[i]` hold the same bytes, else 0 (ONNX Equal on
/// strings); a null string reads as the empty string.
///
/// # Safety
/// `a` and `b` hold `n` null or NUL-terminated strings each, `y` `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_str_equal(
    a: *const *const c_char,
    b: *const *const c_char,
    y: *mut u8,
    n: i64,
) {
    // SAFETY: the caller's contract.
    unsafe {
        for i in 0..n.max(0) as usize {
            *y.add(i) = u8::from(c_str(*a.add(i)) == c_str(*b.add(i)));
        }
    }
}

/// `y[i]` = `table`'s string at position `idx[i]` (the empty string for a position out of
/// range, which the compiler never passes). Returns `ONNXC_ERR_PARAMS`, touching nothing,
/// when `table`'s header or bounds are not valid (`Table::new`).
///
/// # Safety
/// `table` points to a sealed blob `encode` made (`check` holds); `idx` holds `n`
/// positions, `y` `n` slots.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_str_gather(
    table: *const i64,
    idx: *const i64,
    y: *mut *const c_char,
    n: i64,
) -> Status {
    let t = params::decode_blob!(table, Table::new);
    // SAFETY: the caller's contract.
    unsafe {
        for i in 0..n.max(0) as usize {
            let k = *idx.add(i);
            let k = if k >= 0 && (k as usize) < t.n {
                k as usize
            } else {
                t.n
            };
            *y.add(i) = t.ptr(k);
        }
    }
    ONNXC_OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::ONNXC_ERR_PARAMS;

    #[test]
    fn equality_compares_bytes() {
        let c = |s: &str| std::ffi::CString::new(s).unwrap();
        let (a, b) = (
            [c("cat"), c("été"), c(""), c("cat"), c("a")],
            [c("cat"), c("été"), c(""), c("cats"), c("A")],
        );
        let mut pa: Vec<*const c_char> = a.iter().map(|s| s.as_ptr()).collect();
        let mut pb: Vec<*const c_char> = b.iter().map(|s| s.as_ptr()).collect();
        // A null string reads as the empty string.
        pa.push(std::ptr::null());
        pb.push(b[2].as_ptr());
        let mut y = [7u8; 6];
        // SAFETY: six strings (or nulls) each, six outputs.
        unsafe { onnxc_str_equal(pa.as_ptr(), pb.as_ptr(), y.as_mut_ptr(), 6) };
        assert_eq!(y, [1, 1, 1, 0, 0, 1]);
    }

    #[test]
    fn lookup_and_gather_round_trip() {
        let words: [&[u8]; 5] = [b"pear", b"apple", b"", b"\xc3\xa9t\xc3\xa9", b"apple"];
        let t = encode(&words);
        let inputs: Vec<std::ffi::CString> = ["apple", "pear", "", "été", "fig", "appl"]
            .iter()
            .map(|s| std::ffi::CString::new(*s).unwrap())
            .collect();
        let mut ptrs: Vec<*const c_char> = inputs.iter().map(|s| s.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        let mut pos = vec![0i64; ptrs.len()];
        // SAFETY: t is an encoded table; ptrs holds ptrs.len() C strings (or null) and pos as many
        // slots.
        let status = unsafe {
            onnxc_str_lookup(
                t.as_ptr(),
                ptrs.as_ptr(),
                pos.as_mut_ptr(),
                ptrs.len() as i64,
            )
        };
        assert_eq!(status, ONNXC_OK);
        assert_eq!(pos, [1, 0, 2, 3, -1, -1, 2]);
        let idx = [3i64, 0, 4, 7, -1];
        let mut out = vec![std::ptr::null(); idx.len()];
        // SAFETY: t is an encoded table; idx and out hold idx.len() entries.
        let status = unsafe {
            onnxc_str_gather(t.as_ptr(), idx.as_ptr(), out.as_mut_ptr(), idx.len() as i64)
        };
        assert_eq!(status, ONNXC_OK);
        let got: Vec<String> = out
            .iter()
            // SAFETY: onnxc_str_gather wrote a NUL-terminated string (kept alive by t) to every
            // slot.
            .map(|&p| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
            .collect();
        assert_eq!(got, ["été", "pear", "apple", "", ""]);
    }

    #[test]
    fn empty_table_finds_nothing() {
        let t = encode(&[]);
        let s = std::ffi::CString::new("x").unwrap();
        let ptrs = [s.as_ptr()];
        let mut pos = [7i64];
        // SAFETY: t is an encoded table; ptrs holds one C string, pos one slot.
        let status = unsafe { onnxc_str_lookup(t.as_ptr(), ptrs.as_ptr(), pos.as_mut_ptr(), 1) };
        assert_eq!((status, pos), (ONNXC_OK, [-1]));
        assert_eq!((len(&t), check(&t)), (0, Ok(())));
    }

    /// Corrupt tables are refused: headers and bounds by the kernels (which then write
    /// nothing), the strings' offsets and order by `check`.
    #[test]
    fn refuses_corrupt_tables() {
        let words: [&[u8]; 3] = [b"b", b"a", b"cc"];
        let t = encode(&words);
        assert_eq!((len(&t), check(&t)), (3, Ok(())));
        let with = |k: usize, v: i64| params::with_word(&t, k, v);
        // Body: magic, n, bytes_offset, then offsets (4 u32) and positions (3 u32) in 4
        // words, then the bytes.
        let headers = [
            params::short_blob(&t),
            params::seal(t[1..4].iter().copied()),
            with(0, 7),
            with(1, -1),
            with(1, 1 << 40),
            with(1, 40),
            with(2, 8),
            with(2, 8 * (t.len() as i64 - 1)),
            with(2, -8),
            // The last (empty) string past the blob: offsets[3] is the high half of word 4.
            with(4, (t[5] & 0xffff_ffff) | (1000 << 32)),
        ];
        let s = std::ffi::CString::new("a").unwrap();
        let ptrs = [s.as_ptr()];
        let mut pos = [7i64];
        let mut out = [std::ptr::null(); 1];
        for (i, b) in headers.iter().enumerate() {
            assert!(Table::new(b).is_err() && check(b).is_err(), "case {i}");
            // SAFETY: b is a sealed blob; ptrs holds one C string, pos and out one slot each.
            let status = unsafe {
                (
                    onnxc_str_lookup(b.as_ptr(), ptrs.as_ptr(), pos.as_mut_ptr(), 1),
                    onnxc_str_gather(b.as_ptr(), [0i64].as_ptr(), out.as_mut_ptr(), 1),
                )
            };
            assert_eq!(status, (ONNXC_ERR_PARAMS, ONNXC_ERR_PARAMS), "case {i}");
        }
        assert_eq!(
            (pos, out),
            ([7], [std::ptr::null()]),
            "the output was written"
        );
        // Offsets out of order, a position repeated: the kernels' header check passes,
        // `check` does not.
        for b in [
            with(3, (t[4] & !0xffff_ffff) | 5),
            with(5, t[6] & !0xffff_ffff),
        ] {
            assert!(Table::new(&b).is_ok() && check(&b).is_err());
        }
    }
}
