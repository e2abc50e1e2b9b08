//! String elements: at run time a string tensor is an array of `const char *` (NUL-terminated
//! UTF-8). Input strings are the caller's; output strings point into a table stored in the
//! model's read-only data (a classifier's labels, a label encoder's values), valid for the
//! life of the program. Generated code only moves the pointers; these two kernels are where
//! strings are read or made:
//! - `onnxc_str_lookup`: each string's position in a table (−1 if absent), by binary search
//!   over the table's bytes in sorted order;
//! - `onnxc_str_gather`: the table's string at each position.
//!
//! A table is one `i64` array (`encode`): `[MAGIC, n, bytes_offset]`, then `n + 1` byte
//! offsets (u32, the strings back to back, each NUL-terminated, a last empty string after
//! them), then the positions in byte order (u32), then the bytes.

use std::ffi::{CStr, c_char};

const MAGIC: i64 = 0x6f6e_6e78_7374_7273; // "onnxstrs"

/// Lays out `strings` (none may hold a NUL byte) for the kernels.
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
    let bytes_offset = 24 + words.len();
    words.extend_from_slice(&bytes);
    while !words.len().is_multiple_of(8) {
        words.push(0);
    }
    let mut out = vec![MAGIC, n as i64, bytes_offset as i64];
    out.extend(
        words
            .chunks(8)
            .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes"))),
    );
    out
}

struct Table {
    n: usize,
    offsets: *const u32,
    order: *const u32,
    bytes: *const u8,
}

impl Table {
    /// # Safety
    /// `p` comes from `encode`.
    unsafe fn new(p: *const i64) -> Table {
        // SAFETY: the layout `encode` writes.
        unsafe {
            let n = *p.add(1) as usize;
            let offsets = p.add(3) as *const u32;
            Table {
                n,
                offsets,
                order: offsets.add(n + 1),
                bytes: (p as *const u8).add(*p.add(2) as usize),
            }
        }
    }

    /// String `k` (k ≤ n; n is the empty string after the others).
    fn at(&self, k: usize) -> &[u8] {
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

    fn find(&self, s: &[u8]) -> i64 {
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

/// `y[i]` = the position of string `x[i]` in `table` (its first occurrence), −1 if absent;
/// a null `x[i]` reads as the empty string.
///
/// # Safety
/// `table` comes from `encode`; `x` holds `n` null or NUL-terminated strings, `y` `n` slots.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_str_lookup(
    table: *const i64,
    x: *const *const c_char,
    y: *mut i64,
    n: i64,
) {
    // SAFETY: the caller's contract.
    unsafe {
        let t = Table::new(table);
        for i in 0..n.max(0) as usize {
            let p = *x.add(i);
            let s: &[u8] = if p.is_null() {
                b""
            } else {
                CStr::from_ptr(p).to_bytes()
            };
            *y.add(i) = t.find(s);
        }
    }
}

/// `y[i]` = `table`'s string at position `idx[i]` (the empty string for a position out of
/// range, which the compiler never passes).
///
/// # Safety
/// `table` comes from `encode`; `idx` holds `n` positions, `y` `n` slots.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_str_gather(
    table: *const i64,
    idx: *const i64,
    y: *mut *const c_char,
    n: i64,
) {
    // SAFETY: the caller's contract.
    unsafe {
        let t = Table::new(table);
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
        unsafe {
            onnxc_str_lookup(
                t.as_ptr(),
                ptrs.as_ptr(),
                pos.as_mut_ptr(),
                ptrs.len() as i64,
            )
        };
        assert_eq!(pos, [1, 0, 2, 3, -1, -1, 2]);
        let idx = [3i64, 0, 4, 7, -1];
        let mut out = vec![std::ptr::null(); idx.len()];
        // SAFETY: t is an encoded table; idx and out hold idx.len() entries.
        unsafe { onnxc_str_gather(t.as_ptr(), idx.as_ptr(), out.as_mut_ptr(), idx.len() as i64) };
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
        unsafe { onnxc_str_lookup(t.as_ptr(), ptrs.as_ptr(), pos.as_mut_ptr(), 1) };
        assert_eq!(pos, [-1]);
    }
}
