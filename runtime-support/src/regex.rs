//! RegexFullMatch (ONNX opset 20): whether each string matches a pattern as a whole
//! (`onnxc_regex_full_match`). The compiler turns the pattern into a deterministic
//! automaton over bytes (with `regex-automata`) and flattens it into the parameter blob;
//! the kernel only walks it, one table lookup per byte, so the runtime carries no regex
//! engine and a match costs O(length) whatever the pattern.
//!
//! The blob's body is `[MAGIC, states, start, accept words, transitions]`: state 0 is
//! dead, `accept` holds one bit per state (set where the string may end: the automaton's
//! end-of-input transition reaches a match), and each state has 256 `u32` transitions
//! packed two per word. A transition past the last state reads as the dead state, so a
//! corrupt table can give wrong answers but never read outside the blob.

use crate::kernels::Status;
use crate::params;
use std::ffi::c_char;

const MAGIC: i64 = 0x6f6e_6e78_7265_6765; // "onnxrege"
/// Words of transitions per state (256 `u32`s).
const ROW: usize = 128;
/// Most states a table may hold (64 MiB of transitions).
pub const MAX_STATES: usize = 1 << 16;

/// The sealed blob of an automaton with `accept[s]` and `next[s][byte]` for each state
/// (state 0 dead), starting in `start`.
pub fn encode(start: u32, accept: &[bool], next: &[[u32; 256]]) -> Vec<i64> {
    let n = next.len();
    let mut body = vec![MAGIC, n as i64, start as i64];
    body.extend(accept.chunks(64).map(|bits| {
        bits.iter()
            .enumerate()
            .fold(0u64, |w, (i, &b)| w | (u64::from(b) << i)) as i64
    }));
    for row in next {
        body.extend(
            row.chunks(2)
                .map(|p| (u64::from(p[0]) | (u64::from(p[1]) << 32)) as i64),
        );
    }
    params::seal(body)
}

/// A decoded automaton, borrowing the blob.
#[derive(Clone, Copy, Debug)]
pub struct Automaton<'a> {
    states: usize,
    start: u32,
    accept: &'a [i64],
    next: &'a [i64],
}

impl<'a> Automaton<'a> {
    /// Checks the header and that the tables fill the blob exactly.
    pub fn decode(blob: &'a [i64]) -> params::Result<Automaton<'a>> {
        let mut r = params::Reader::new(blob)?;
        let [magic, states, start] = r.array()?;
        params::ensure(magic == MAGIC, "not an automaton")?;
        let states =
            params::in_range(states, 1, MAX_STATES as i64, "state count out of range")? as usize;
        let start = params::in_range(start, 0, states as i64 - 1, "start state out of range")?;
        let accept = r.words(states.div_ceil(64))?;
        let next = r.words(states * ROW)?;
        r.finish()?;
        Ok(Automaton {
            states,
            start: start as u32,
            accept,
            next,
        })
    }

    fn step(&self, s: u32, byte: u8) -> u32 {
        let w = self.next[s as usize * ROW + byte as usize / 2] as u64;
        let t = if byte.is_multiple_of(2) {
            w as u32
        } else {
            (w >> 32) as u32
        };
        if (t as usize) < self.states { t } else { 0 }
    }

    /// Whether `s` matches as a whole.
    pub fn full_match(&self, s: &[u8]) -> bool {
        let mut state = self.start;
        for &b in s {
            state = self.step(state, b);
            if state == 0 {
                return false;
            }
        }
        (self.accept[state as usize / 64] >> (state % 64)) & 1 == 1
    }
}

/// A searching automaton: the matches of a pattern that start at a given position
/// (`Searcher::match_at`), for the Tokenizer (`tokenize`). Its words (not sealed: they end a
/// tokenizer's blob) are `[SEARCH_MAGIC, states, starts, match words, end words,
/// transitions]`: 257 start states (`u32`, two per word), one per byte before the start
/// position and the last for the start of the text (so that `\b` sees what precedes); state
/// 0 dead; a bit per state where a match ends one byte before (the automaton reports matches
/// a byte late) and a bit where one ends at the end of the text; 256 transitions per state.
pub fn encode_search(
    starts: &[u32; 257],
    matches: &[bool],
    ends: &[bool],
    next: &[[u32; 256]],
) -> Vec<i64> {
    let bits = |v: &[bool]| -> Vec<i64> {
        v.chunks(64)
            .map(|b| {
                b.iter()
                    .enumerate()
                    .fold(0u64, |w, (i, &x)| w | (u64::from(x) << i)) as i64
            })
            .collect()
    };
    let pairs = |row: &[u32]| -> Vec<i64> { params::pack_u32(row).collect() };
    let mut words = vec![SEARCH_MAGIC, next.len() as i64];
    words.extend(pairs(starts));
    words.extend(bits(matches));
    words.extend(bits(ends));
    for row in next {
        words.extend(pairs(row));
    }
    words
}

const SEARCH_MAGIC: i64 = 0x6f6e_6e78_7365_6172; // "onnxsear"
/// Words of the start states (257 `u32`s).
const STARTS: usize = 129;

/// A decoded searching automaton (`encode_search`), borrowing its words.
#[derive(Clone, Copy, Debug)]
pub struct Searcher<'a> {
    states: usize,
    starts: &'a [i64],
    matches: &'a [i64],
    ends: &'a [i64],
    next: &'a [i64],
}

impl<'a> Searcher<'a> {
    /// Checks the header and that the tables fill `words` exactly.
    pub fn decode(words: &'a [i64]) -> params::Result<Searcher<'a>> {
        let bad = params::ParamError;
        let [magic, states, rest @ ..] = words else {
            return Err(bad("a search automaton is too short"));
        };
        params::ensure(*magic == SEARCH_MAGIC, "not a search automaton")?;
        let states =
            params::in_range(*states, 1, MAX_STATES as i64, "state count out of range")? as usize;
        let bits = states.div_ceil(64);
        params::ensure(
            rest.len() == STARTS + 2 * bits + states * ROW,
            "a search automaton's tables do not fill it",
        )?;
        let (starts, rest) = rest.split_at(STARTS);
        let (matches, rest) = rest.split_at(bits);
        let (ends, next) = rest.split_at(bits);
        Ok(Searcher {
            states,
            starts,
            matches,
            ends,
            next,
        })
    }

    fn state(&self, t: u32) -> u32 {
        if (t as usize) < self.states { t } else { 0 }
    }

    fn bit(words: &[i64], s: u32) -> bool {
        (words[s as usize / 64] >> (s % 64)) & 1 == 1
    }

    /// The end of the match the automaton prefers among those starting at `i` in `s` (its
    /// last: the longest one for an automaton of all matches, the first alternative's for a
    /// leftmost-first one), if any.
    pub fn match_at(&self, s: &[u8], i: usize) -> Option<usize> {
        let before = if i == 0 { START } else { usize::from(s[i - 1]) };
        self.match_from(s, i, before).map(|(e, _)| e)
    }

    /// `match_at` over any `Text`: the end of the preferred match starting at `i`, `before`
    /// the byte before `i` (`START` at the start of the text), and the byte before that end.
    pub fn match_from<T: Text + ?Sized>(
        &self,
        s: &T,
        i: T::Pos,
        before: usize,
    ) -> Option<(T::Pos, usize)> {
        let mut state = self.state(params::u32_at(self.starts, before));
        let mut last = None;
        let (mut at, mut prev) = (i, before);
        while let Some((b, next)) = s.next(at) {
            if state == 0 {
                return last;
            }
            state = self.state(params::u32_at(
                &self.next[state as usize * ROW..],
                b as usize,
            ));
            if state != 0 && Self::bit(self.matches, state) {
                last = Some((at, prev));
            }
            (at, prev) = (next, usize::from(b));
        }
        if state != 0 && Self::bit(self.ends, state) {
            last = Some((at, prev));
        }
        last
    }
}

/// `Searcher::match_from`'s `before` at the start of a text (no byte precedes it).
pub const START: usize = 256;

/// Text a `Searcher` (and the Tokenizer, `tokenize`) reads forward byte by byte from a
/// position: a byte slice, or a string as it reads in another case (`text_tfidf`), which is
/// never written out.
pub trait Text {
    /// A position between two bytes; positions reached by any walk compare equal.
    type Pos: Copy + PartialEq;
    fn start(&self) -> Self::Pos;
    /// The byte at `p` and the position after it; None at the end.
    fn next(&self, p: Self::Pos) -> Option<(u8, Self::Pos)>;
}

impl Text for [u8] {
    type Pos = usize;

    fn start(&self) -> usize {
        0
    }

    fn next(&self, p: usize) -> Option<(u8, usize)> {
        self.get(p).map(|&b| (b, p + 1))
    }
}

/// `y[i]` = 1 when string `x[i]` matches the automaton in `table` as a whole, else 0; a
/// null string reads as the empty string. Returns `ONNXC_ERR_PARAMS`, touching nothing,
/// when the blob is not an automaton `encode` made.
///
/// # Safety
/// `table` points to a sealed blob; `x` holds `n` null or NUL-terminated strings, `y` `n`
/// bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_regex_full_match(
    table: *const i64,
    x: *const *const c_char,
    y: *mut u8,
    n: i64,
) -> Status {
    let a = params::decode_blob!(table, Automaton::decode);
    // SAFETY: the caller's contract.
    unsafe { crate::strings::map_strings(x, y, n, |s| u8::from(a.full_match(s))) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{ONNXC_ERR_PARAMS, ONNXC_OK};

    /// `ab*c` by hand: 1 start, 2 after a / b's, 3 after c (accepting).
    fn abc() -> Vec<i64> {
        let mut next = vec![[0u32; 256]; 4];
        next[1][b'a' as usize] = 2;
        next[2][b'b' as usize] = 2;
        next[2][b'c' as usize] = 3;
        encode(1, &[false, false, false, true], &next)
    }

    #[test]
    fn walks_the_automaton() {
        let blob = abc();
        let a = Automaton::decode(&blob).unwrap();
        for (s, m) in [
            ("ac", true),
            ("abbbc", true),
            ("abcx", false),
            ("", false),
            ("b", false),
        ] {
            assert_eq!(a.full_match(s.as_bytes()), m, "{s}");
        }
        let strs = [c"ac", c"abd", c"abc"];
        let mut ptrs: Vec<*const c_char> = strs.iter().map(|s| s.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        let mut y = [9u8; 4];
        // SAFETY: a sealed blob, four strings (or null) and four outputs.
        let s = unsafe { onnxc_regex_full_match(blob.as_ptr(), ptrs.as_ptr(), y.as_mut_ptr(), 4) };
        assert_eq!((s, y), (ONNXC_OK, [1, 0, 1, 0]));
    }

    #[test]
    fn corrupt_tables_stay_inside_the_blob() {
        let mut blob = abc();
        // Transitions past the last state read as dead.
        let row = 4 + 1 + 2 * ROW;
        blob[row + b'b' as usize / 2] = -1;
        let a = Automaton::decode(&blob).unwrap();
        assert!(!a.full_match(b"abc"));
        let mut bad = abc();
        bad[2] = MAX_STATES as i64 + 1;
        assert!(Automaton::decode(&bad).is_err());
        let mut bad = abc();
        bad[3] = 9; // start
        assert!(Automaton::decode(&bad).is_err());
        let mut y = [9u8; 1];
        let p = [c"ac".as_ptr()];
        // SAFETY: a sealed (refused) blob, one string and one output.
        let s = unsafe { onnxc_regex_full_match(bad.as_ptr(), p.as_ptr(), y.as_mut_ptr(), 1) };
        assert_eq!((s, y), (ONNXC_ERR_PARAMS, [9]));
    }
}
