//! onnxruntime's Tokenizer (com.microsoft): each string's tokens, found by a pattern's
//! matches (`tokenexp`: the longest match at the leftmost position, then on after it),
//! between a pattern's matches (`separators`: the first listed alternative at the leftmost
//! position; empty pieces dropped) or one a character (a single empty separator). Tokens
//! of fewer than `mincharnum` characters are dropped. With `mark`, a row's tokens are
//! framed by the tokens "\x02" and "\x03"; rows are padded with `pad_value` to the most
//! tokens of any row (none at all: no columns, marks or not), as onnxruntime does.
//!
//! The patterns are compiled to automata at compile time (`regex::Searcher`); the kernels
//! walk them. `onnxc_tokenize_count` counts each string's tokens; `onnxc_tokenize` writes
//! them into rows of `cols` (the compile-time bound), in the step's string space
//! (`string_make`): `pad_value` up to the row length its strings give, null pointers past
//! it (columns that do not exist at run time, which `NAME_run_shaped` drops).

use crate::abi::ONNXC_ERR_STRINGS;
use crate::kernels::Status;
use crate::params;
use crate::regex::{START, Searcher, Text};
use crate::strings::c_str;
use std::ffi::c_char;

/// How a Tokenizer finds tokens.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The pattern's matches are the tokens (`tokenexp`).
    Matches = 0,
    /// The pattern's matches separate the tokens (`separators`).
    Separators = 1,
    /// Each character is a token (`separators` = `[""]`).
    Chars = 2,
}

/// A Tokenizer's attributes, decoded from its sealed blob `[mode, mark, mincharnum, pad
/// length, pad bytes packed in words, search automaton words (Matches and Separators)]`.
#[derive(Clone, Debug)]
pub struct Tokenizer<'a> {
    pub mode: Mode,
    pub mark: bool,
    pub mincharnum: usize,
    pub pad: Vec<u8>,
    search: Option<Searcher<'a>>,
}

/// The sealed blob of a Tokenizer; `automaton` is `regex::encode_search`'s words, empty for
/// `Mode::Chars`.
pub fn encode(
    mode: Mode,
    mark: bool,
    mincharnum: usize,
    pad: &[u8],
    automaton: &[i64],
) -> Vec<i64> {
    let words = pad.chunks(8).map(|c| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        i64::from_le_bytes(w)
    });
    params::seal(
        [
            mode as i64,
            i64::from(mark),
            mincharnum as i64,
            pad.len() as i64,
        ]
        .into_iter()
        .chain(words)
        .chain(automaton.iter().copied()),
    )
}

/// The position after the character at `p` in `s` and that character's last byte, None at
/// the end: a UTF-8 lead byte with as many continuation bytes as it announces (fewer at the
/// end of `s`) is one character, any other byte one on its own.
fn char_at<T: Text + ?Sized>(s: &T, p: T::Pos) -> Option<(T::Pos, u8)> {
    let (b0, p1) = s.next(p)?;
    let n = match b0 {
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => 1,
    };
    let (mut q, mut last) = (p1, b0);
    for _ in 1..n {
        match s.next(q) {
            Some((b, r)) if b & 0xc0 == 0x80 => (q, last) = (r, b),
            Some(_) => return Some((p1, b0)),
            None => break,
        }
    }
    Some((q, last))
}

/// `token(a, e)` for a token of `s` from `a` to `e` that is kept (not empty, at least `k`
/// characters), else true: whether the walk goes on. Inlined: it runs once a token.
#[inline(always)]
fn emit<T: Text + ?Sized>(
    s: &T,
    k: usize,
    a: T::Pos,
    e: T::Pos,
    token: &mut impl FnMut(T::Pos, T::Pos) -> bool,
) -> bool {
    a == e || !has_chars(s, a, e, k) || token(a, e)
}

/// Whether `s` from `a` to `e` holds at least `k` UTF-8 characters (a byte that starts no
/// character counts as one).
fn has_chars<T: Text + ?Sized>(s: &T, mut a: T::Pos, e: T::Pos, k: usize) -> bool {
    let mut n = 0;
    while n < k && a != e {
        let Some((b, next)) = s.next(a) else { break };
        n += usize::from((b as i8) >= -0x40);
        a = next;
    }
    n >= k
}

impl<'a> Tokenizer<'a> {
    /// Decodes and checks `blob`: a known mode, flags 0 or 1, a pad without NUL and an
    /// automaton for the modes that search.
    pub fn decode(blob: &'a [i64]) -> params::Result<Tokenizer<'a>> {
        let mut r = params::Reader::new(blob)?;
        let [mode, mark, mincharnum, pad_len] = r.array()?;
        let mode = match mode {
            0 => Mode::Matches,
            1 => Mode::Separators,
            2 => Mode::Chars,
            _ => return Err(params::ParamError("unknown tokenizer mode")),
        };
        let mark = params::flag(mark, "mark is not 0 or 1")?;
        let mincharnum =
            params::in_range(mincharnum, 1, i32::MAX as i64, "mincharnum out of range")? as usize;
        let pad_len = params::in_range(pad_len, 0, 1 << 20, "pad length out of range")? as usize;
        let pad: Vec<u8> = r
            .words(pad_len.div_ceil(8))?
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .take(pad_len)
            .collect();
        params::ensure(!pad.contains(&0), "the pad value holds a NUL byte")?;
        let left = r.remaining();
        let rest = r.words(left)?;
        r.finish()?;
        let search = match mode {
            Mode::Chars => {
                params::ensure(rest.is_empty(), "a character tokenizer has no automaton")?;
                None
            }
            _ => Some(Searcher::decode(rest)?),
        };
        Ok(Tokenizer {
            mode,
            mark,
            mincharnum,
            pad,
            search,
        })
    }

    /// Calls `token` with each token of `s` (no marks) until it returns false; returns
    /// whether it never did.
    pub fn tokens<'s>(&self, s: &'s [u8], mut token: impl FnMut(&'s [u8]) -> bool) -> bool {
        self.walk(s, |a, e| token(&s[a..e]))
    }

    /// `tokens` over any `Text`: `token` gets each token's start and end.
    pub fn walk<T: Text + ?Sized>(
        &self,
        s: &T,
        mut token: impl FnMut(T::Pos, T::Pos) -> bool,
    ) -> bool {
        let k = self.mincharnum;
        match (self.mode, &self.search) {
            (Mode::Chars, _) | (_, None) => {
                let mut i = s.start();
                while let Some((e, _)) = char_at(s, i) {
                    if !emit(s, k, i, e, &mut token) {
                        return false;
                    }
                    i = e;
                }
                true
            }
            (Mode::Matches, Some(a)) => {
                let (mut i, mut before) = (s.start(), START);
                while s.next(i).is_some() {
                    match a.match_from(s, i, before) {
                        Some((e, b)) if e != i => {
                            if !emit(s, k, i, e, &mut token) {
                                return false;
                            }
                            (i, before) = (e, b);
                        }
                        _ => {
                            let (e, b) = char_at(s, i).expect("a byte follows");
                            (i, before) = (e, usize::from(b));
                        }
                    }
                }
                true
            }
            (Mode::Separators, Some(a)) => {
                let (mut start, mut i, mut before) = (s.start(), s.start(), START);
                while s.next(i).is_some() {
                    match a.match_from(s, i, before) {
                        Some((e, b)) if e != i => {
                            if !emit(s, k, start, i, &mut token) {
                                return false;
                            }
                            (start, i, before) = (e, e, b);
                        }
                        _ => {
                            let (e, b) = char_at(s, i).expect("a byte follows");
                            (i, before) = (e, usize::from(b));
                        }
                    }
                }
                emit(s, k, start, i, &mut token)
            }
        }
    }

    /// The tokens of `s` (no marks).
    pub fn count<T: Text + ?Sized>(&self, s: &T) -> i64 {
        let mut k = 0;
        self.walk(s, |_, _| {
            k += 1;
            true
        });
        k
    }

    /// A row's length, given the most tokens of any string: none when no string has any,
    /// else with the marks.
    pub fn row_len(&self, most: i64) -> i64 {
        if most <= 0 {
            0
        } else {
            most + 2 * i64::from(self.mark)
        }
    }
}

/// `z[i]` = the tokens of string `x[i]` (marks not counted).
///
/// # Safety
/// `params` points to a sealed blob (`encode`); `x` holds `n` null or NUL-terminated
/// strings, `z` `n` slots.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_tokenize_count(
    params: *const i64,
    x: *const *const c_char,
    z: *mut i64,
    n: i64,
) -> Status {
    let t = params::decode_blob!(params, Tokenizer::decode);
    // SAFETY: the caller's contract.
    unsafe { crate::strings::map_strings(x, z, n, |s| t.count(s)) }
}

/// Row `i` of `y` (`cols` slots) = the tokens of string `x[i]` (with the marks), then the
/// pad value up to the row length (`row_len` of the most tokens of a string), then null
/// pointers; the strings made in `space`. A row longer than `cols` is
/// `ONNXC_ERR_STRINGS`.
///
/// # Safety
/// As `onnxc_tokenize_count`, with `y` holding `n · cols` slots and `space` null or `cap`
/// writable bytes that outlive the pointers written.
#[unsafe(no_mangle)]
#[allow(
    clippy::too_many_arguments,
    reason = "the kernel ABI: one word an argument"
)]
pub unsafe extern "C" fn onnxc_tokenize(
    params: *const i64,
    x: *const *const c_char,
    y: *mut *const c_char,
    n: i64,
    cols: i64,
    space: *mut u8,
    cap: i64,
) -> Status {
    let t = params::decode_blob!(params, Tokenizer::decode);
    let (n, cols) = (n.max(0) as usize, cols.max(0) as usize);
    // The most tokens of a string, over this call's strings (one item's in a run-time
    // batch: the row length then follows the item, which only the padding shows).
    // SAFETY: the caller's contract.
    let most = (0..n)
        .map(|i| t.count(unsafe { c_str(*x.add(i)) }))
        .max()
        .unwrap_or(0);
    let len = t.row_len(most);
    if len as u64 > cols as u64 {
        return ONNXC_ERR_STRINGS;
    }
    let len = len as usize;
    let mut sp = crate::string_make::Space::new(space, cap);
    let (Some(pad), Some(start), Some(end)) = (
        sp.string([&t.pad[..]]),
        sp.string([&b"\x02"[..]]),
        sp.string([&b"\x03"[..]]),
    ) else {
        return ONNXC_ERR_STRINGS;
    };
    let row = |s: &[u8], put: &mut dyn FnMut(*const c_char) -> bool| {
        len == 0
            || ((!t.mark || put(start))
                && t.tokens(s, |tok| sp.string([tok]).is_some_and(&mut *put))
                && (!t.mark || put(end)))
    };
    let fill = |j: usize| if j < len { pad } else { std::ptr::null() };
    // SAFETY: the caller's contract.
    unsafe { crate::string_make::write_rows(x, y, n, cols, len, row, fill) }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::abi::ONNXC_OK;

    /// A searcher for runs of `class` bytes: 1 starts, 2 is one byte in, 3 two or more (a
    /// match ended before the byte), 4 the byte after a run (a match ended before it), then
    /// dead.
    pub(crate) fn runs(class: impl Fn(u8) -> bool) -> Vec<i64> {
        let mut next = vec![[0u32; 256]; 5];
        for b in 0..=255u8 {
            let (inside, after) = if class(b) { (3, 2) } else { (4, 0) };
            next[1][b as usize] = after;
            next[2][b as usize] = inside;
            next[3][b as usize] = inside;
        }
        let matches = [false, false, false, true, true];
        let ends = [false, false, true, true, false];
        crate::regex::encode_search(&[1; 257], &matches, &ends, &next)
    }

    fn tokens(t: &Tokenizer, s: &str) -> Vec<String> {
        let mut v = Vec::new();
        t.tokens(s.as_bytes(), |b| {
            v.push(String::from_utf8_lossy(b).into_owned());
            true
        });
        v
    }

    #[test]
    fn modes_follow_onnxruntime() {
        let words = encode(
            Mode::Matches,
            false,
            1,
            b"#",
            &runs(|b| b.is_ascii_alphanumeric()),
        );
        let t = Tokenizer::decode(&words).unwrap();
        assert_eq!(tokens(&t, "hello, world 42!"), ["hello", "world", "42"]);
        assert_eq!(tokens(&t, ""), Vec::<String>::new());
        let seps = encode(
            Mode::Separators,
            false,
            2,
            b"#",
            &runs(|b| b == b' ' || b == b';'),
        );
        let t = Tokenizer::decode(&seps).unwrap();
        assert_eq!(tokens(&t, "a;;bc  def ;g"), ["bc", "def"]);
        let chars = encode(Mode::Chars, true, 1, b"<pad>", &[]);
        let t = Tokenizer::decode(&chars).unwrap();
        assert_eq!(tokens(&t, "héllo"), ["h", "é", "l", "l", "o"]);
        assert_eq!(
            (t.row_len(0), t.row_len(5), t.pad.as_slice()),
            (0, 7, &b"<pad>"[..])
        );
        let mut bad = chars.clone();
        bad[1] = 7;
        assert!(Tokenizer::decode(&bad).is_err());
    }

    #[test]
    fn rows_are_marked_padded_and_bounded() {
        let words = encode(
            Mode::Matches,
            true,
            1,
            b"#",
            &runs(|b| b.is_ascii_lowercase()),
        );
        let x: Vec<std::ffi::CString> = ["ab cd", "", "e"]
            .iter()
            .map(|s| std::ffi::CString::new(*s).unwrap())
            .collect();
        let px: Vec<*const c_char> = x.iter().map(|s| s.as_ptr()).collect();
        let mut z = [0i64; 3];
        // SAFETY: a tokenizer blob, three strings, three slots.
        let rc = unsafe { onnxc_tokenize_count(words.as_ptr(), px.as_ptr(), z.as_mut_ptr(), 3) };
        assert_eq!((rc, z), (ONNXC_OK, [2, 0, 1]));
        let mut y = vec![std::ptr::null(); 15];
        let mut space = [0u8; 64];
        let mut call = |cols: i64| {
            // SAFETY: three rows of at most five slots, 64 bytes of space.
            unsafe {
                onnxc_tokenize(
                    words.as_ptr(),
                    px.as_ptr(),
                    y.as_mut_ptr(),
                    3,
                    cols,
                    space.as_mut_ptr(),
                    64,
                )
            }
        };
        // Rows of three slots cannot hold four tokens.
        assert_eq!(call(3), ONNXC_ERR_STRINGS);
        let rc = call(5);
        assert_eq!(rc, ONNXC_OK);
        let read: Vec<Option<String>> = y
            .iter()
            .map(|&p| {
                (!p.is_null()).then(|| {
                    // SAFETY: non-null pointers are NUL-terminated strings in `space`.
                    unsafe { std::ffi::CStr::from_ptr(p) }
                        .to_string_lossy()
                        .into_owned()
                })
            })
            .collect();
        let s = |v: &str| Some(v.to_string());
        assert_eq!(
            read,
            [
                s("\x02"),
                s("ab"),
                s("cd"),
                s("\x03"),
                None,
                s("\x02"),
                s("\x03"),
                s("#"),
                s("#"),
                None,
                s("\x02"),
                s("e"),
                s("\x03"),
                s("#"),
                None,
            ]
        );
    }
}
