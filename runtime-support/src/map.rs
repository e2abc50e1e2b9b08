//! Map inputs (ONNX-ML's `map(K, V)`, which DictVectorizer and CastMap read). The caller
//! passes a map as an `onnxc_map` (`Map`): its entry count and two arrays of that many keys
//! (`int64_t` or `const char *`) and values (`float`, `double`, `int64_t` or `const char
//! *`), the caller's, read during the call. The compiled program sees the descriptor as an
//! int64 `[3]` tensor and hands it to these kernels, which alone read the arrays:
//! - `onnxc_dict_vectorize`: DictVectorizer, each key's value at its position in the
//!   vocabulary (a table compiled into the object), zero (or a null string) elsewhere;
//! - `onnxc_cast_map_sparse`: CastMap's SPARSE form, each int64 key's value at the position
//!   the key gives, below a maximum.
//!
//! A negative count, or a null array with entries, returns `ONNXC_ERR_VALUE` before any
//! output is written.

use crate::abi::{ONNXC_ERR_VALUE, ONNXC_OK};
use crate::kernels::Status;
use crate::params;
use crate::strings;
use std::ffi::{c_char, c_void};

/// The C `onnxc_map`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Map {
    pub size: i64,
    pub keys: *const c_void,
    pub values: *const c_void,
}

/// First word of an integer vocabulary (`encode_ints`).
const INT_MAGIC: i64 = 0x6f6e_6e78_6d61_7031;

/// Lays out an integer vocabulary for `onnxc_dict_vectorize`, as a sealed blob: `[INT_MAGIC,
/// n]`, the keys in ascending order, then each one's position in `keys` (the first of
/// equal keys).
pub fn encode_ints(keys: &[i64]) -> Vec<i64> {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by_key(|&i| (keys[i], i));
    order.dedup_by_key(|i| keys[*i]);
    let mut body = vec![INT_MAGIC, keys.len() as i64, order.len() as i64];
    body.extend(order.iter().map(|&i| keys[i]));
    body.extend(order.iter().map(|&i| i as i64));
    params::seal(body)
}

/// Checks an integer vocabulary `encode_ints` made (all of it: keys sorted, positions in
/// range), where it is compiled into a call.
pub fn check_ints(blob: &[i64]) -> params::Result<()> {
    Ints::new(blob).map(|_| ())
}

/// An integer vocabulary: `n` positions, `keys` sorted and distinct, `at` their positions.
struct Ints<'a> {
    n: usize,
    keys: &'a [i64],
    at: &'a [i64],
}

impl<'a> Ints<'a> {
    fn new(blob: &'a [i64]) -> params::Result<Ints<'a>> {
        let mut r = params::Reader::new(blob)?;
        let [magic, n, distinct] = r.array()?;
        params::ensure(magic == INT_MAGIC, "not an integer vocabulary")?;
        let n = params::in_range(n, 0, i32::MAX as i64, "vocabulary size out of range")?;
        let d = params::in_range(distinct, 0, n, "distinct keys out of range")? as usize;
        let keys = r.words(d)?;
        let at = r.words(d)?;
        r.finish()?;
        params::ensure(
            keys.windows(2).all(|w| w[0] < w[1]) && at.iter().all(|&p| (0..n).contains(&p)),
            "the vocabulary is not sorted or its positions are out of range",
        )?;
        Ok(Ints {
            n: n as usize,
            keys,
            at,
        })
    }

    fn find(&self, key: i64) -> Option<usize> {
        self.keys
            .binary_search(&key)
            .ok()
            .map(|i| self.at[i] as usize)
    }
}

/// The caller's map and its entry count, or `None` when its arrays cannot be read (a
/// negative count, or a null array with entries).
///
/// # Safety
/// `map` points to a readable `onnxc_map`.
unsafe fn read(map: *const i64) -> Option<(Map, usize)> {
    // SAFETY: the caller's contract.
    let m = unsafe { *(map as *const Map) };
    let n = usize::try_from(m.size).ok()?;
    (n == 0 || (!m.keys.is_null() && !m.values.is_null())).then_some((m, n))
}

/// Bytes of one value: `value_bytes` is 4 or 8.
fn width(value_bytes: i64) -> usize {
    if value_bytes == 4 { 4 } else { 8 }
}

/// Copies value `i` of the map (`bytes` wide) to slot `at` of `y`.
///
/// # Safety
/// `values` holds more than `i` values and `y` more than `at` slots, `bytes` each.
unsafe fn put(y: *mut u8, at: usize, values: *const c_void, i: usize, bytes: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        std::ptr::copy_nonoverlapping(
            (values as *const u8).add(i * bytes),
            y.add(at * bytes),
            bytes,
        );
    }
}

/// DictVectorizer: `y[p]` = the value of the key at position `p` of the vocabulary `table`
/// (`strings::encode`'s table when `string_keys` is 1, else `encode_ints`'), all-zero bytes
/// (0, 0.0 or a null string) where the map has no such key; keys not in the vocabulary are
/// ignored, and of keys given twice the last counts. `value_bytes` is 4 or 8.
///
/// # Safety
/// `table` is a sealed blob of the kind `string_keys` says; `map` points to an `onnxc_map`
/// whose arrays hold `size` keys and values when `size` > 0; `y` holds as many
/// `value_bytes`-wide slots as the vocabulary has entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_dict_vectorize(
    table: *const i64,
    map: *const i64,
    y: *mut u8,
    value_bytes: i64,
    string_keys: i64,
) -> Status {
    // SAFETY: the caller's contract: a readable onnxc_map.
    let Some((m, n)) = (unsafe { read(map) }) else {
        return ONNXC_ERR_VALUE;
    };
    let vb = width(value_bytes);
    if string_keys != 0 {
        let t = params::decode_blob!(table, strings::Table::new);
        // SAFETY: `y` has one slot per vocabulary entry; positions are below that count.
        unsafe {
            std::ptr::write_bytes(y, 0, t.len() * vb);
            let keys = m.keys as *const *const c_char;
            for i in 0..n {
                let p = t.find(strings::c_str(*keys.add(i)));
                if p >= 0 {
                    put(y, p as usize, m.values, i, vb);
                }
            }
        }
    } else {
        let t = params::decode_blob!(table, Ints::new);
        // SAFETY: as above.
        unsafe {
            std::ptr::write_bytes(y, 0, t.n * vb);
            let keys = m.keys as *const i64;
            for i in 0..n {
                if let Some(p) = t.find(*keys.add(i)) {
                    put(y, p, m.values, i, vb);
                }
            }
        }
    }
    ONNXC_OK
}

/// CastMap with `map_form` SPARSE: `y[k]` = the value of int64 key `k` for `0 <= k < max`,
/// all-zero bytes where the map has none; keys from `max` on are ignored, and of keys given
/// twice the last counts. A negative key is `ONNXC_ERR_VALUE` (as onnxruntime refuses it),
/// found before any write. `value_bytes` is 4 or 8 (the compiler casts the values after).
///
/// # Safety
/// `map` points to an `onnxc_map` with int64 keys whose arrays hold `size` entries when
/// `size` > 0; `y` holds `max` slots of `value_bytes` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_cast_map_sparse(
    map: *const i64,
    y: *mut u8,
    max: i64,
    value_bytes: i64,
) -> Status {
    // SAFETY: the caller's contract: a readable onnxc_map.
    let Some((m, n)) = (unsafe { read(map) }) else {
        return ONNXC_ERR_VALUE;
    };
    let vb = width(value_bytes);
    let max = max.max(0);
    let keys = m.keys as *const i64;
    // SAFETY: the map holds `n` keys.
    if (0..n).any(|i| unsafe { *keys.add(i) } < 0) {
        return ONNXC_ERR_VALUE;
    }
    // SAFETY: `y` holds `max` slots; keys are range-checked before they index it.
    unsafe {
        std::ptr::write_bytes(y, 0, max as usize * vb);
        for i in 0..n {
            let k = *keys.add(i);
            if (0..max).contains(&k) {
                put(y, k as usize, m.values, i, vb);
            }
        }
    }
    ONNXC_OK
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_ints(vocab: &[i64], keys: &[i64], values: &[f32]) -> (Status, Vec<f32>) {
        let blob = encode_ints(vocab);
        let m = Map {
            size: keys.len() as i64,
            keys: keys.as_ptr() as *const c_void,
            values: values.as_ptr() as *const c_void,
        };
        let mut y = vec![f32::NAN; vocab.len()];
        // SAFETY: a sealed vocabulary, a map of keys.len() entries, y of vocab.len() slots.
        let s = unsafe {
            onnxc_dict_vectorize(
                blob.as_ptr(),
                &m as *const Map as *const i64,
                y.as_mut_ptr() as *mut u8,
                4,
                0,
            )
        };
        (s, y)
    }

    #[test]
    fn integer_keys_land_at_their_vocabulary_positions() {
        let (s, y) = run_ints(&[30, 10, 20], &[20, 99, 30], &[2.0, 9.0, 3.0]);
        assert_eq!(s, ONNXC_OK);
        assert_eq!(y, [3.0, 0.0, 2.0]);
    }

    #[test]
    fn string_keys_and_string_values() {
        let blob = strings::encode(&[b"b", b"a"]);
        let keys = [c"a".as_ptr(), c"zz".as_ptr()];
        let values = [c"x".as_ptr(), c"y".as_ptr()];
        let m = Map {
            size: 2,
            keys: keys.as_ptr() as *const c_void,
            values: values.as_ptr() as *const c_void,
        };
        let mut y = [c"junk".as_ptr(); 2];
        // SAFETY: as above, string values being 8-byte pointers.
        let s = unsafe {
            onnxc_dict_vectorize(
                blob.as_ptr(),
                &m as *const Map as *const i64,
                y.as_mut_ptr() as *mut u8,
                8,
                1,
            )
        };
        assert_eq!(s, ONNXC_OK);
        assert!(y[0].is_null(), "no value for \"b\": a null (empty) string");
        assert_eq!(y[1], values[0]);
    }

    #[test]
    fn bad_maps_are_refused_before_writing() {
        let blob = encode_ints(&[1]);
        for m in [
            Map {
                size: -1,
                keys: std::ptr::null(),
                values: std::ptr::null(),
            },
            Map {
                size: 1,
                keys: std::ptr::null(),
                values: [1.0f32].as_ptr() as *const c_void,
            },
        ] {
            let mut y = [7.0f32];
            // SAFETY: the map is refused before its arrays are read.
            let s = unsafe {
                onnxc_dict_vectorize(
                    blob.as_ptr(),
                    &m as *const Map as *const i64,
                    y.as_mut_ptr() as *mut u8,
                    4,
                    0,
                )
            };
            assert_eq!((s, y[0]), (ONNXC_ERR_VALUE, 7.0));
        }
    }

    #[test]
    fn sparse_cast_keeps_keys_below_the_maximum() {
        let keys = [3i64, 0, 7];
        let values = [1.5f64, 4.0, 8.0];
        let m = Map {
            size: 3,
            keys: keys.as_ptr() as *const c_void,
            values: values.as_ptr() as *const c_void,
        };
        let mut y = [9.0f64; 5];
        // SAFETY: a map of 4 entries, y of 5 slots.
        let s = unsafe {
            onnxc_cast_map_sparse(
                &m as *const Map as *const i64,
                y.as_mut_ptr() as *mut u8,
                5,
                8,
            )
        };
        assert_eq!(s, ONNXC_OK);
        assert_eq!(y, [4.0, 0.0, 0.0, 1.5, 0.0]);
        let negative = [2i64, -1];
        let m = Map {
            keys: negative.as_ptr() as *const c_void,
            size: 2,
            ..m
        };
        let mut y = [9.0f64; 5];
        // SAFETY: as above, 2 entries.
        let s = unsafe {
            onnxc_cast_map_sparse(
                &m as *const Map as *const i64,
                y.as_mut_ptr() as *mut u8,
                5,
                8,
            )
        };
        assert_eq!(
            (s, y[2]),
            (ONNXC_ERR_VALUE, 9.0),
            "refused before any write"
        );
    }

    #[test]
    fn corrupt_vocabularies_are_refused() {
        let mut blob = encode_ints(&[1, 2]);
        blob[4] = 5; // keys out of order
        assert!(Ints::new(&blob).is_err());
        assert!(Ints::new(&encode_ints(&[1, 2])).is_ok());
    }
}
