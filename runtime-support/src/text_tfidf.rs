//! A text pipeline's n-gram features in one kernel (`onnxc_text_tfidf_f32`): each string of
//! a column read in lower or upper case (StringNormalizer), cut into tokens (the
//! Tokenizer, `tokenize`), each token looked up among the pool's strings and the n-grams
//! counted (TfIdfVectorizer, `tfidf`), with the results the three kernels give one after
//! the other, but without making the case-changed strings or the rows of tokens: no string
//! space is needed and no string is too long or has too many tokens.
//!
//! The case-changed string is read through `Cased` (a `regex::Text`), the tokens walked as
//! positions in it (`Tokenizer::walk`), each copied out only up to the pool's longest
//! string (a longer token is in no pool). The n-gram walks need the last `window` tokens
//! of a row (`(max_n − 1)(max_skip + 1) + 1`), kept in a ring in the worker's scratch: a
//! walk from token `s` runs once token `s + window − 1` is known, or at the row's end.
//!
//! As the Tokenizer does, every row is framed by the marks when `mark` is set and padded
//! with the pad value to the most tokens of any string of the call (none at all: an empty
//! row); the marks and the pad value count as the pool has them. Walks run start by start
//! (the three kernels run skip by skip), so a column that two n-grams share could see
//! another last weight or another sum: the compiler fuses the three only where each
//! n-gram has a column of its own.

use crate::abi::{ONNXC_ERR_PARAMS, ONNXC_OK};
use crate::kernels::Status;
use crate::par::{Par, ScratchNeed, Threads};
use crate::params;
use crate::regex::Text;
use crate::strings::{Table, c_str};
use crate::tfidf::TfIdfParams;
use crate::tokenize::Tokenizer;
use std::ffi::c_char;
use std::sync::atomic::{AtomicI64, Ordering};

/// How the strings read: as given, in lower case or in upper case (`string_make`'s
/// mapping).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    Keep = 0,
    Lower = 1,
    Upper = 2,
}

/// Most tokens the n-gram walks look back over (`window`); the compiler fuses nothing
/// wider.
pub const MAX_WINDOW: usize = 1 << 16;

/// Longest pool string a token is compared with; the compiler fuses no longer pool.
pub const MAX_LONGEST: usize = 1 << 20;

/// `onnxc_text_tfidf_f32`'s parameters, decoded from its blob `[case, rows, longest,
/// tokenizer words, table words, tfidf words, slots]` then the three sealed blobs: the
/// Tokenizer's (`tokenize::encode`), the pool's strings (`strings::encode`) and the
/// TfIdfVectorizer's (`tfidf::encode`, `n` 0: rows are streamed); then an open-addressing
/// hash of the pool's strings by their bytes (`hash`; 0 empty, else the first position of
/// the string + 1), a power of two at least twice the strings, `u32` two a word.
pub struct TextTfIdf<'a> {
    pub case: Case,
    pub rows: usize,
    /// Bytes of the pool's longest string.
    pub longest: usize,
    pub tokenizer: Tokenizer<'a>,
    pub(crate) pool: Table,
    pub tfidf: TfIdfParams<'a>,
    /// The sealed blob of the pool's strings (checked in full by `strings::check`).
    pub pool_words: &'a [i64],
    /// The pool's hash slots, `u32` two a word.
    slots: &'a [i64],
}

/// Hash slots for `n` strings: a power of two, at least twice as many and at least 2.
fn slots_for(n: usize) -> usize {
    (2 * n).next_power_of_two().max(2)
}

/// FNV-1a of `s`.
fn hash(s: &[u8]) -> usize {
    s.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) as usize
}

/// The sealed blob of a fused text pipeline; `tokenizer`, `pool` and `tfidf` are the
/// sealed blobs of its parts.
pub fn encode(
    case: Case,
    rows: usize,
    longest: usize,
    tokenizer: &[i64],
    pool: &[i64],
    tfidf: &[i64],
) -> Vec<i64> {
    let strings = Table::new(pool).expect("a table strings::encode made");
    let n = slots_for(strings.len());
    let mut slots = vec![0u32; n];
    for k in 0..strings.len() {
        let s = strings.at(k);
        let mut h = hash(s) & (n - 1);
        loop {
            match slots[h] {
                0 => {
                    slots[h] = k as u32 + 1;
                    break;
                }
                // A string given again keeps its first position.
                t if strings.at(t as usize - 1) == s => break,
                _ => h = (h + 1) & (n - 1),
            }
        }
    }
    let head = [
        case as i64,
        rows as i64,
        longest as i64,
        tokenizer.len() as i64,
        pool.len() as i64,
        tfidf.len() as i64,
        n as i64,
    ];
    params::seal(
        head.into_iter()
            .chain(tokenizer.iter().copied())
            .chain(pool.iter().copied())
            .chain(tfidf.iter().copied())
            .chain(params::pack_u32(&slots)),
    )
}

impl<'a> TextTfIdf<'a> {
    /// Decodes and checks `blob` and its parts (the pool's table in its header only, as
    /// `strings` checks per call), the window and the longest string in range.
    pub fn decode(blob: &'a [i64]) -> params::Result<TextTfIdf<'a>> {
        let mut r = params::Reader::new(blob)?;
        let [case, rows, longest, tok, pool, tfidf, slots] = r.array()?;
        let case = match case {
            0 => Case::Keep,
            1 => Case::Lower,
            2 => Case::Upper,
            _ => return Err(params::ParamError("unknown case")),
        };
        let words = |v: i64| params::in_range(v, 0, params::MAX_WORDS, "a count is out of range");
        let rows = words(rows)? as usize;
        let longest =
            params::in_range(longest, 0, MAX_LONGEST as i64, "longest is out of range")? as usize;
        let (tok, pool, tfidf) = (words(tok)?, words(pool)?, words(tfidf)?);
        let tokenizer = Tokenizer::decode(r.words(tok as usize)?)?;
        let pool_words = r.words(pool as usize)?;
        let pool = Table::new(pool_words)?;
        let tfidf = TfIdfParams::decode(r.words(tfidf as usize)?)?;
        params::ensure(
            u64::try_from(slots) == Ok(slots_for(pool.len()) as u64),
            "the hash slots do not fit the pool",
        )?;
        let slots = r.words(slots as usize / 2)?;
        r.finish()?;
        params::ensure(tfidf.rows == rows, "the n-gram counts have other rows")?;
        params::ensure(tfidf.n == 0, "the n-gram counts have a row length")?;
        let p = TextTfIdf {
            case,
            rows,
            longest,
            tokenizer,
            pool,
            tfidf,
            pool_words,
            slots,
        };
        params::ensure(p.window() <= MAX_WINDOW, "the n-gram window is too wide")?;
        Ok(p)
    }

    /// Tokens an n-gram walk spans: `(max_n − 1)(max_skip + 1) + 1`.
    pub fn window(&self) -> usize {
        let t = &self.tfidf;
        (t.max_n - 1)
            .saturating_mul(t.max_skip.saturating_add(1))
            .saturating_add(1)
    }

    /// Each worker's ring of token ids and its copy of a token.
    pub fn scratch(&self) -> ScratchNeed {
        ScratchNeed {
            shared: 0,
            per_worker: self.window() * 8 + self.longest.next_multiple_of(8),
        }
    }

    /// Tokens of string `s` (no marks).
    fn count(&self, s: &[u8]) -> i64 {
        match self.view(s) {
            View::Bytes(s) => self.tokenizer.count(s),
            View::Ascii(a) => self.tokenizer.count(&a),
            View::Cased(c) => self.tokenizer.count(&c),
        }
    }

    /// How string `s` reads: as it is, ASCII in another case byte by byte, or in general.
    fn view<'s>(&self, s: &'s [u8]) -> View<'s> {
        match self.case {
            Case::Keep => View::Bytes(s),
            c if s.is_ascii() => View::Ascii(Ascii {
                s,
                upper: c == Case::Upper,
            }),
            c => View::Cased(Cased {
                s,
                upper: c == Case::Upper,
            }),
        }
    }

    /// Whether a row's tokens count the same whatever the row length: no marks or pad
    /// value the pool holds (an id the pool lacks ends every walk that meets it, and a
    /// row with no tokens at all has no marks).
    fn length_free(&self, ids: [i64; 3]) -> bool {
        ids[2] < 0 && (!self.tokenizer.mark || (ids[0] < 0 && ids[1] < 0))
    }

    /// Row `y` (zeroed first) of string `s`: its tokens, framed and padded to `len` tokens
    /// (0: no tokens at all; None: framed, not padded, where the length changes no count),
    /// counted as n-grams. `ids`: the pool positions of the start mark, the end mark and
    /// the pad value; `ring` and `token` the worker's scratch.
    #[allow(clippy::too_many_arguments)]
    fn row(
        &self,
        s: &[u8],
        len: Option<usize>,
        ids: [i64; 3],
        ring: &mut [i64],
        token: &mut [u8],
        y: &mut [f32],
        weights: Option<&[f32]>,
    ) {
        y.fill(0.0);
        if len == Some(0) {
            return;
        }
        let mut row = Row {
            p: &self.tfidf,
            ring,
            len: 0,
            y,
            weights,
        };
        match self.view(s) {
            View::Bytes(s) => self.tokens(s, len, ids, &mut row, token),
            View::Ascii(a) => self.tokens(&a, len, ids, &mut row, token),
            View::Cased(c) => self.tokens(&c, len, ids, &mut row, token),
        }
        row.finish();
    }

    /// Pushes the row's tokens of `s` (marks and pads included) into `row`.
    fn tokens<T: Text + ?Sized>(
        &self,
        s: &T,
        len: Option<usize>,
        [start, end, pad]: [i64; 3],
        row: &mut Row,
        token: &mut [u8],
    ) {
        let mark = self.tokenizer.mark;
        if mark {
            row.push(start);
        }
        self.tokenizer
            .walk(s, |a, e| self.take(s, a, e, row, token));
        if mark {
            row.push(end);
        }
        while len.is_some_and(|len| row.len < len) {
            row.push(pad);
        }
    }

    /// Pushes the token of `s` from `a` to `e` into `row`; true (the walk goes on). A
    /// function of its own, called once a token (as a closure it would be compiled apart
    /// all the same: `tests/runtime_inlining.rs`).
    #[inline(never)]
    fn take<T: Text + ?Sized>(
        &self,
        s: &T,
        a: T::Pos,
        e: T::Pos,
        row: &mut Row,
        token: &mut [u8],
    ) -> bool {
        row.push(self.position(s, a, e, token));
        true
    }

    /// The pool position of the token of `s` from `a` to `e` (−1 if the pool lacks it),
    /// copied into `buf` (the pool's longest string) to be looked up.
    fn position<T: Text + ?Sized>(&self, s: &T, mut a: T::Pos, e: T::Pos, buf: &mut [u8]) -> i64 {
        let mut k = 0;
        while a != e {
            let Some((b, next)) = s.next(a) else { break };
            let Some(slot) = buf.get_mut(k) else {
                return -1;
            };
            *slot = b;
            k += 1;
            a = next;
        }
        self.find(&buf[..k])
    }

    /// The first position of `s` in the pool, −1 if absent: probes the hash slots until an
    /// empty one, at most all of them (a corrupt table can miss, never loop or read
    /// outside the blob).
    fn find(&self, s: &[u8]) -> i64 {
        let n = self.slots.len() * 2;
        let mut h = hash(s) & (n - 1);
        for _ in 0..n {
            let t = params::u32_at(self.slots, h) as usize;
            if t == 0 {
                return -1;
            }
            if t <= self.pool.len() && self.pool.at(t - 1) == s {
                return t as i64 - 1;
            }
            h = (h + 1) & (n - 1);
        }
        -1
    }
}

/// One row's tokens as the n-gram walks read them: the last `ring.len()` token ids, and the
/// walks run so far.
struct Row<'r, 'a> {
    p: &'r TfIdfParams<'a>,
    ring: &'r mut [i64],
    /// Tokens pushed so far.
    len: usize,
    y: &'r mut [f32],
    weights: Option<&'r [f32]>,
}

impl Row<'_, '_> {
    fn push(&mut self, id: i64) {
        let w = self.ring.len();
        self.ring[self.len % w] = id;
        self.len += 1;
        if self.len >= w {
            self.walks(self.len - w);
        }
    }

    /// The walks from the starts the pushes left (the last `window − 1`).
    fn finish(&mut self) {
        let from = (self.len + 1).saturating_sub(self.ring.len());
        for start in from..self.len {
            self.walks(start);
        }
    }

    /// Every skip distance's walk from token `start`, over the tokens pushed so far (all a
    /// walk reads once `window` tokens follow `start`).
    fn walks(&mut self, start: usize) {
        let (w, len) = (self.ring.len(), self.len);
        for d in 1..=self.p.max_skip + 1 {
            let Some(min_n) = self.p.least_at(d) else {
                break;
            };
            if start + d * (min_n - 1) >= len {
                break;
            }
            let ring = &*self.ring;
            let token = |k: usize| (k < len).then(|| ring[k % w]);
            self.p.walk(token, start, d, min_n, self.y, self.weights);
        }
    }
}

/// A string as `TextTfIdf::view` reads it.
enum View<'s> {
    Bytes(&'s [u8]),
    Ascii(Ascii<'s>),
    Cased(Cased<'s>),
}

/// An ASCII string in lower (or upper) case.
struct Ascii<'s> {
    s: &'s [u8],
    upper: bool,
}

impl Text for Ascii<'_> {
    type Pos = usize;

    fn start(&self) -> usize {
        0
    }

    fn next(&self, p: usize) -> Option<(u8, usize)> {
        let b = *self.s.get(p)?;
        let b = if self.upper {
            b.to_ascii_uppercase()
        } else {
            b.to_ascii_lowercase()
        };
        Some((b, p + 1))
    }
}

/// A string as it reads in lower (or upper) case, one code point mapped to one as
/// `string_make` maps them, bytes that are not UTF-8 as they are. A position is where a
/// source character starts and how many bytes of its mapping were read.
struct Cased<'s> {
    s: &'s [u8],
    upper: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct At {
    at: usize,
    sub: usize,
}

impl Cased<'_> {
    /// The mapped bytes of the source character at `at` (their count in the buffer) and
    /// the source bytes it takes.
    fn unit(&self, at: usize) -> ([u8; 4], usize, usize) {
        let b = self.s[at];
        if b.is_ascii() {
            let m = if self.upper {
                b.to_ascii_uppercase()
            } else {
                b.to_ascii_lowercase()
            };
            return ([m, 0, 0, 0], 1, 1);
        }
        let n = match b {
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf7 => 4,
            _ => 1,
        };
        let c = self
            .s
            .get(at..at + n)
            .and_then(|x| std::str::from_utf8(x).ok())
            .and_then(|x| x.chars().next());
        match c {
            Some(c) => {
                let mut buf = [0u8; 4];
                let len = crate::string_make::map_char(c, self.upper)
                    .encode_utf8(&mut buf)
                    .len();
                (buf, len, n)
            }
            None => ([b, 0, 0, 0], 1, 1),
        }
    }
}

impl Text for Cased<'_> {
    type Pos = At;

    fn start(&self) -> At {
        At { at: 0, sub: 0 }
    }

    fn next(&self, p: At) -> Option<(u8, At)> {
        if p.at >= self.s.len() {
            return None;
        }
        let (buf, len, step) = self.unit(p.at);
        let next = if p.sub + 1 < len {
            At {
                at: p.at,
                sub: p.sub + 1,
            }
        } else {
            At {
                at: p.at + step,
                sub: 0,
            }
        };
        Some((buf[p.sub.min(len - 1)], next))
    }
}

/// The fused pipeline of `p` over `x` (`rows` strings) into `y` `[rows, out]`, the rows
/// split over `par`, each worker's ring and token copy in its slot of `scratch`
/// (`TextTfIdf::scratch`). `weights` as `tfidf::tfidf_f32`'s.
///
/// # Safety
/// `x` holds `rows` null or NUL-terminated strings; `y` holds `rows · out` floats;
/// `scratch` holds `p.scratch()` for every worker of `par`.
pub unsafe fn text_tfidf_f32(
    p: &TextTfIdf,
    weights: Option<&[f32]>,
    x: *const *const c_char,
    y: &mut [f32],
    scratch: *mut f32,
    par: Par,
) {
    let out = p.tfidf.out;
    // SAFETY: the caller's contract: `x` holds `rows` strings.
    let string = |i: usize| unsafe { c_str(*x.add(i)) };
    let cost = 256 * (p.tfidf.max_skip + 1) * p.tfidf.max_n + out;
    let ids = [&b"\x02"[..], b"\x03", &p.tokenizer.pad].map(|s| p.find(s));
    // The row length: the most tokens of a string, with the marks (its own tokens for
    // each row where the length changes no count, which saves a pass).
    let most = AtomicI64::new(0);
    let count = |rows: std::ops::Range<usize>, _: usize| {
        for i in rows {
            most.fetch_max(p.count(string(i)), Ordering::Relaxed);
        }
    };
    let free = p.length_free(ids);
    if !free {
        // SAFETY: the tasks only read.
        unsafe { par.for_ranges(p.rows, cost, &count) };
    }
    let len = p.tokenizer.row_len(most.into_inner()) as usize;
    let (_, slots) = p.scratch().layout(scratch);
    let window = p.window();
    let ya = y.as_mut_ptr();
    let job = |rows: std::ops::Range<usize>, w: usize| {
        let slot = slots.at(w) as *mut u8;
        // SAFETY: worker w's slot holds the ring then the token copy (`scratch`), and
        // only this worker uses it.
        let (ring, token) = unsafe {
            (
                std::slice::from_raw_parts_mut(slot as *mut i64, window),
                std::slice::from_raw_parts_mut(slot.add(window * 8), p.longest),
            )
        };
        for r in rows {
            // SAFETY: row r < rows lies inside `y`; only this task writes it.
            let yr = unsafe { std::slice::from_raw_parts_mut(ya.add(r * out), out) };
            p.row(
                string(r),
                (!free).then_some(len),
                ids,
                ring,
                token,
                yr,
                weights,
            );
        }
    };
    // SAFETY: each task writes only its own rows and its worker's slot.
    unsafe { par.for_ranges(p.rows, cost, &job) };
}

/// C ABI entry point (`kernels::TEXT_TFIDF_F32`): `params` is `encode`'s blob, `weights`
/// null or one float per n-gram, `x` `rows` strings, `y` `[rows, out]`, `scratch` as
/// `TextTfIdf::scratch` lays it out per worker. Returns `ONNXC_ERR_PARAMS`, writing
/// nothing, for a refused blob.
///
/// # Safety
/// `params` points to a sealed blob; `weights` is null or holds one float per n-gram; `x`,
/// `y` and `scratch` hold what the blob describes; `threads` as `Par::from_raw`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_text_tfidf_f32(
    params: *const i64,
    weights: *const f32,
    x: *const *const c_char,
    y: *mut f32,
    scratch: *mut f32,
    threads: *const Threads,
) -> Status {
    let p = params::decode_blob!(params, TextTfIdf::decode);
    let yn = p.rows * p.tfidf.out;
    if p.rows > 0 && (x.is_null() || scratch.is_null()) || (yn > 0 && y.is_null()) {
        return ONNXC_ERR_PARAMS;
    }
    // SAFETY: the caller's contract: the buffers hold what the blob describes.
    let (y, weights) = unsafe {
        (
            if yn == 0 {
                &mut [][..]
            } else {
                std::slice::from_raw_parts_mut(y, yn)
            },
            (!weights.is_null())
                .then(|| std::slice::from_raw_parts(weights, p.tfidf.indexes.len())),
        )
    };
    // SAFETY: the caller's contract.
    unsafe {
        let par = Par::from_raw(threads);
        text_tfidf_f32(&p, weights, x, y, scratch, par);
    }
    ONNXC_OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::par::same_bits_on_every_pool;
    use crate::tokenize::Mode;

    /// Runs of `[a-z0-9]` bytes (and any non-ASCII byte) as a search automaton.
    fn words() -> Vec<i64> {
        crate::tokenize::tests::runs(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b >= 0x80)
    }

    /// The three kernels one after the other, as the unfused graph runs them: case change,
    /// tokens padded to the most of any string, lookup, n-gram counts.
    fn unfused(p: &TextTfIdf, docs: &[&[u8]], weights: Option<&[f32]>) -> Vec<f32> {
        let cased: Vec<Vec<u8>> = docs
            .iter()
            .map(|d| match p.case {
                Case::Keep => d.to_vec(),
                c => crate::string_make::change_case(d, c == Case::Upper),
            })
            .collect();
        let most = cased.iter().map(|d| p.tokenizer.count(&d[..])).max();
        let len = p.tokenizer.row_len(most.unwrap_or(0)) as usize;
        let mut x = Vec::new();
        for d in &cased {
            let mut row: Vec<i64> = Vec::new();
            if len > 0 {
                if p.tokenizer.mark {
                    row.push(p.pool.find(b"\x02"));
                }
                p.tokenizer.tokens(d, |t| {
                    row.push(p.pool.find(t));
                    true
                });
                if p.tokenizer.mark {
                    row.push(p.pool.find(b"\x03"));
                }
                row.resize(len, p.pool.find(&p.tokenizer.pad));
            }
            x.extend(row);
        }
        let t = &p.tfidf;
        let blob = crate::tfidf::encode(
            docs.len(),
            len,
            t.out,
            t.min_n,
            t.max_n,
            t.max_skip,
            t.mode,
            t.entries,
            t.indexes,
        );
        let q = TfIdfParams::decode(&blob).unwrap();
        let mut y = vec![0f32; docs.len() * t.out];
        crate::tfidf::tfidf_f32(&q, weights, &x, &mut y, Par::SEQ);
        y
    }

    fn fused(
        blob: &[i64],
        docs: &[&[u8]],
        weights: Option<&[f32]>,
        threads: *const Threads,
    ) -> Vec<f32> {
        let p = TextTfIdf::decode(blob).unwrap();
        let cs: Vec<std::ffi::CString> = docs
            .iter()
            .map(|d| std::ffi::CString::new(*d).unwrap())
            .collect();
        let ptrs: Vec<*const c_char> = cs.iter().map(|c| c.as_ptr()).collect();
        let need = p.scratch().rounded();
        let mut scratch = vec![0f32; (need.shared + 8 * need.per_worker) / 4];
        let mut y = vec![f32::NAN; p.rows * p.tfidf.out];
        // SAFETY: a sealed blob, `rows` strings, `[rows, out]` floats and eight workers'
        // scratch.
        let s = unsafe {
            onnxc_text_tfidf_f32(
                blob.as_ptr(),
                weights.map_or(std::ptr::null(), |w| w.as_ptr()),
                ptrs.as_ptr(),
                y.as_mut_ptr(),
                scratch.as_mut_ptr(),
                threads,
            )
        };
        assert_eq!(s, ONNXC_OK);
        y
    }

    /// A pipeline over `pool` (its strings) counting `grams` (lists of pool positions).
    #[allow(clippy::too_many_arguments)]
    fn pipeline(
        case: Case,
        mode: Mode,
        mark: bool,
        pool: &[&[u8]],
        grams: &[&[i64]],
        rows: usize,
        n: (usize, usize),
        skip: usize,
    ) -> Vec<i64> {
        let automaton = if mode == Mode::Chars { vec![] } else { words() };
        let tok = crate::tokenize::encode(mode, mark, 1, b"#", &automaton);
        let table = crate::strings::encode(pool);
        let cols: Vec<i64> = (0..grams.len() as i64).collect();
        let tfidf = crate::tfidf::encode(
            rows,
            0,
            grams.len(),
            n.0,
            n.1,
            skip,
            crate::tfidf::Mode::TfIdf,
            &crate::tfidf::tests::trie(grams),
            &cols,
        );
        let longest = pool.iter().map(|s| s.len()).max().unwrap_or(0);
        encode(case, rows, longest, &tok, &table, &tfidf)
    }

    #[test]
    fn equals_the_three_kernels_in_a_row() {
        // The pad value and a mark in the pool (rows padded to the longest), or not (rows
        // as long as their own tokens); a string given twice.
        let padded: &[&[u8]] = &[
            b"the",
            b"fox",
            b"dog",
            b"\xc3\xa9t\xc3\xa9",
            b"#",
            b"\x02",
            b"a",
        ];
        let free: &[&[u8]] = &[
            b"the",
            b"fox",
            b"dog",
            b"\xc3\xa9t\xc3\xa9",
            b"fox",
            b"z",
            b"a",
        ];
        let grams: &[&[i64]] = &[
            &[0],
            &[1],
            &[3],
            &[4],
            &[0, 1],
            &[1, 2],
            &[5, 0],
            &[4, 4],
            &[0, 6, 1],
        ];
        let long = "the fox ".repeat(700);
        let docs: Vec<&[u8]> = vec![
            b"The FOX the dog",
            b"",
            "\u{c9}T\u{c9} the Fox a fox".as_bytes(),
            long.as_bytes(),
            b"\xff\xfeTHE fox\xc3",
            b"dog dog dog",
        ];
        let weights: Vec<f32> = (0..grams.len()).map(|k| 0.5 + k as f32 * 0.25).collect();
        for (pool, case) in [padded, free]
            .into_iter()
            .flat_map(|p| [Case::Keep, Case::Lower, Case::Upper].map(|c| (p, c)))
        {
            for mode in [Mode::Matches, Mode::Separators, Mode::Chars] {
                for mark in [false, true] {
                    for (n, skip) in [((1, 1), 0), ((1, 3), 1), ((2, 3), 2)] {
                        let blob = pipeline(case, mode, mark, pool, grams, docs.len(), n, skip);
                        let p = TextTfIdf::decode(&blob).unwrap();
                        let want = unfused(&p, &docs, Some(&weights));
                        let what = format!(
                            "{case:?} {mode:?} mark {mark} n {n:?} skip {skip} pads {}",
                            pool == padded
                        );
                        same_bits_on_every_pool(&what, |_, threads| {
                            let got = fused(&blob, &docs, Some(&weights), threads);
                            assert_eq!(
                                got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                                want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                                "{what}"
                            );
                            got
                        });
                    }
                }
            }
        }
    }

    #[test]
    fn a_long_document_is_counted_whole() {
        // 20000 tokens: far past what a row of tokens in a string space would hold.
        let blob = pipeline(
            Case::Lower,
            Mode::Matches,
            false,
            &[b"the", b"fox"],
            &[&[0], &[1], &[0, 1]],
            1,
            (1, 2),
            0,
        );
        let doc = "The Fox ".repeat(10_000);
        let y = fused(&blob, &[doc.as_bytes()], None, std::ptr::null());
        assert_eq!(y, [10_000.0, 10_000.0, 10_000.0]);
    }

    #[test]
    fn refuses_corrupt_blobs() {
        let blob = pipeline(
            Case::Lower,
            Mode::Matches,
            false,
            &[b"a"],
            &[&[0]],
            2,
            (1, 1),
            0,
        );
        assert!(TextTfIdf::decode(&blob).is_ok());
        let mut bad = blob.clone();
        bad[1] = 7; // case
        assert!(TextTfIdf::decode(&bad).is_err());
        let mut bad = blob.clone();
        bad[2] = 3; // rows differ from the counts'
        assert!(TextTfIdf::decode(&bad).is_err());
        let mut bad = blob.clone();
        bad[4] += 1; // the tokenizer's words
        assert!(TextTfIdf::decode(&bad).is_err());
        let mut y = [9f32; 2];
        let mut scratch = [0f32; 64];
        let x = [c"a".as_ptr(), c"b".as_ptr()];
        let mut bad = blob.clone();
        bad[3] = MAX_LONGEST as i64 + 1;
        // SAFETY: a sealed (refused) blob; two strings, two outputs.
        let s = unsafe {
            onnxc_text_tfidf_f32(
                bad.as_ptr(),
                std::ptr::null(),
                x.as_ptr(),
                y.as_mut_ptr(),
                scratch.as_mut_ptr(),
                std::ptr::null(),
            )
        };
        assert_eq!((s, y), (ONNXC_ERR_PARAMS, [9.0, 9.0]));
    }
}
