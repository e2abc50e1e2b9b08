//! RegexFullMatch (opset 20): whether each string matches an RE2 pattern as a whole. The
//! pattern becomes a deterministic automaton over bytes here, at compile time
//! (`regex-automata`: all matches kept, anchored at the start, so the end-of-input state
//! says whether some match spans the string), flattened into a table the runtime walks
//! (`onnxc_runtime::regex`, `kernels::RegexFullMatch`).
//!
//! Syntax: RE2's and `regex`'s agree on what models use (classes, repetition, alternation,
//! anchors, groups). Where they differ, RE2's meaning is kept: `\w`, `\d`, `\s` and the word
//! boundaries `\b`, `\B` are ASCII (`regex` makes them Unicode), while `.` and negated
//! classes still match whole UTF-8 characters. A pattern `regex-automata` cannot compile
//! (backreferences and lookaround, which RE2 rejects too) is refused with its message.

use crate::error::Result;
use crate::frontend::build;
use crate::frontend::ctx::Ctx;
use crate::ir::{DType, Op, TypeInfo, ValueId};
use regex_automata::dfa::{Automaton, StartKind, dense};
use regex_automata::nfa::thompson;
use regex_automata::util::primitives::StateID;
use regex_automata::util::{start, syntax};
use regex_automata::{Anchored, MatchKind};
use std::collections::HashMap;
use std::sync::Arc;

/// Largest automaton onnxc builds (bytes): the NFA, and the DFA while determinizing.
const SIZE_LIMIT: usize = 64 << 20;

pub fn regex_full_match(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    build::expect_types(ctx, x, "X", &[DType::Str])?;
    let pattern = ctx
        .attr_s("pattern")?
        .ok_or_else(|| ctx.err("attribute pattern is required"))?;
    let table = compile(&ascii_perl_classes(&pattern))
        .map_err(|e| ctx.unsupported(format!("its pattern {pattern:?} does not compile: {e}")))?;
    let shape = ctx.shape(x);
    Ok(vec![ctx.add(
        Op::kernel(crate::kernels::RegexFullMatch(Arc::new(table))),
        vec![x],
        TypeInfo::new(DType::Bool, shape),
    )?])
}

/// `pattern` with RE2's ASCII meaning of `\w \W \d \D \s \S \b \B` spelled out for `regex`,
/// inside and outside bracketed classes.
fn ascii_perl_classes(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars().peekable();
    // Nesting of bracketed classes, and whether the next char opens a class body (where a
    // `]` is literal).
    let mut depth = 0usize;
    let mut class_start = false;
    while let Some(c) = chars.next() {
        let at_start = std::mem::take(&mut class_start);
        match c {
            '\\' => {
                let Some(e) = chars.next() else {
                    out.push('\\');
                    break;
                };
                let inside = depth > 0;
                let spelled = match (e, inside) {
                    ('w', false) => "[0-9A-Za-z_]",
                    ('W', false) => "[^0-9A-Za-z_]",
                    ('d', false) => "[0-9]",
                    ('D', false) => "[^0-9]",
                    ('s', false) => "[\\t\\n\\f\\r ]",
                    ('S', false) => "[^\\t\\n\\f\\r ]",
                    ('b', false) => "(?-u:\\b)",
                    ('B', false) => "(?-u:\\B)",
                    ('w', true) => "0-9A-Za-z_",
                    ('W', true) => "[:^word:]",
                    ('d', true) => "0-9",
                    ('D', true) => "[:^digit:]",
                    ('s', true) => "\\t\\n\\f\\r ",
                    ('S', true) => "[:^space:]",
                    _ => {
                        out.push('\\');
                        out.push(e);
                        continue;
                    }
                };
                out.push_str(spelled);
            }
            '[' => {
                out.push('[');
                if depth > 0 && chars.peek() == Some(&':') {
                    // A POSIX class `[:name:]` inside a bracket: copied whole.
                    for d in chars.by_ref() {
                        out.push(d);
                        if d == ']' {
                            break;
                        }
                    }
                    continue;
                }
                depth += 1;
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                class_start = true;
            }
            ']' if depth > 0 && !at_start => {
                depth -= 1;
                out.push(']');
            }
            _ => out.push(c),
        }
    }
    out
}

/// The anchored DFA of `pattern` (RE2's meanings already spelled out) with matches of
/// `kind`.
fn dfa(pattern: &str, kind: MatchKind) -> std::result::Result<dense::DFA<Vec<u32>>, String> {
    dense::Builder::new()
        .configure(
            dense::Config::new()
                .match_kind(kind)
                .start_kind(StartKind::Anchored)
                .dfa_size_limit(Some(SIZE_LIMIT))
                .determinize_size_limit(Some(SIZE_LIMIT)),
        )
        .syntax(syntax::Config::new().unicode(true).utf8(true))
        // The NFA has no size limit by default: `a{100000}{100000}` took 24 GB.
        .thompson(thompson::Config::new().nfa_size_limit(Some(SIZE_LIMIT)))
        .build(pattern)
        .map_err(|e| {
            // The build error's own text can be just "error building NFA": add its causes.
            let mut text = e.to_string();
            let mut cause = std::error::Error::source(&e);
            while let Some(c) = cause {
                text = format!("{text}: {c}");
                cause = c.source();
            }
            text
        })
}

/// A property of a DFA's state (a bit of the runtime's tables).
type StateBit = dyn Fn(&dense::DFA<Vec<u32>>, StateID) -> bool;

/// The transitions of the numbered states and, per property asked for, its bit per state.
type Closed = (Vec<[u32; 256]>, Vec<Vec<bool>>);

/// A DFA's states reachable from some start states, numbered for the runtime's tables
/// (0 dead), with their transitions.
struct Flat<'d> {
    dfa: &'d dense::DFA<Vec<u32>>,
    index: HashMap<StateID, u32>,
    order: Vec<StateID>,
}

impl<'d> Flat<'d> {
    fn new(dfa: &'d dense::DFA<Vec<u32>>) -> Flat<'d> {
        Flat {
            dfa,
            index: HashMap::new(),
            order: Vec::new(),
        }
    }

    /// The number of state `sid`, numbering it if new.
    fn number(&mut self, sid: StateID) -> std::result::Result<u32, String> {
        if self.dfa.is_dead_state(sid) {
            return Ok(0);
        }
        if self.dfa.is_quit_state(sid) {
            return Err("it needs Unicode word boundaries".into());
        }
        if let Some(&k) = self.index.get(&sid) {
            return Ok(k);
        }
        let k = self.order.len() as u32 + 1;
        if k as usize >= onnxc_runtime::regex::MAX_STATES {
            return Err(format!(
                "its automaton has more than {} states",
                onnxc_runtime::regex::MAX_STATES
            ));
        }
        self.index.insert(sid, k);
        self.order.push(sid);
        Ok(k)
    }

    /// Numbers every state reachable from those numbered so far; returns the transitions
    /// and, per state (the dead one first), whether `bit` holds of it.
    fn close(mut self, bits: &[&StateBit]) -> std::result::Result<Closed, String> {
        let mut next = vec![[0u32; 256]];
        let mut flags = vec![vec![false]; bits.len()];
        let mut at = 0;
        while at < self.order.len() {
            let sid = self.order[at];
            let mut row = [0u32; 256];
            for b in 0..=255u8 {
                row[b as usize] = self.number(self.dfa.next_state(sid, b))?;
            }
            next.push(row);
            for (f, bit) in flags.iter_mut().zip(bits) {
                f.push(bit(self.dfa, sid));
            }
            at += 1;
        }
        Ok((next, flags))
    }
}

/// Whether the text may end in `sid`: its end-of-input transition reaches a match.
fn ends_in(dfa: &dense::DFA<Vec<u32>>, sid: StateID) -> bool {
    dfa.is_match_state(dfa.next_eoi_state(sid))
}

/// The automaton of `pattern` as `onnxc_runtime::regex::encode`'s blob.
fn compile(pattern: &str) -> std::result::Result<Vec<i64>, String> {
    let dfa = dfa(pattern, MatchKind::All)?;
    let start = dfa
        .start_state(&start::Config::new().anchored(Anchored::Yes))
        .map_err(|e| e.to_string())?;
    let mut flat = Flat::new(&dfa);
    let first = flat.number(start)?;
    let (next, flags) = flat.close(&[&ends_in])?;
    Ok(onnxc_runtime::regex::encode(first, &flags[0], &next))
}

/// The searching automaton of `pattern` (RE2 syntax) as `onnxc_runtime::regex::encode_search`'s
/// words: the longest match at a position with `longest`, else the first alternative's
/// (leftmost-first).
pub fn compile_search(pattern: &str, longest: bool) -> std::result::Result<Vec<i64>, String> {
    let kind = if longest {
        MatchKind::All
    } else {
        MatchKind::LeftmostFirst
    };
    let dfa = dfa(&ascii_perl_classes(pattern), kind)?;
    let mut flat = Flat::new(&dfa);
    let mut starts = [0u32; 257];
    for (k, s) in starts.iter_mut().enumerate() {
        let before = u8::try_from(k).ok();
        let sid = dfa
            .start_state(
                &start::Config::new()
                    .anchored(Anchored::Yes)
                    .look_behind(before),
            )
            .map_err(|e| e.to_string())?;
        *s = flat.number(sid)?;
    }
    let is_match = |d: &dense::DFA<Vec<u32>>, sid| d.is_match_state(sid);
    let (next, flags) = flat.close(&[&is_match, &ends_in])?;
    Ok(onnxc_runtime::regex::encode_search(
        &starts, &flags[0], &flags[1], &next,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full_match(pattern: &str, s: &str) -> bool {
        let blob = compile(&ascii_perl_classes(pattern)).unwrap();
        onnxc_runtime::regex::Automaton::decode(&blob)
            .unwrap()
            .full_match(s.as_bytes())
    }

    #[test]
    fn re2_meanings() {
        assert_eq!(ascii_perl_classes(r"[\w.-]+\b"), r"[0-9A-Za-z_.-]+(?-u:\b)");
        assert_eq!(ascii_perl_classes(r"[]\d][^\S]"), r"[]0-9][^[:^space:]]");
        assert_eq!(
            ascii_perl_classes(r"[[:alpha:]\W]\\w"),
            r"[[:alpha:][:^word:]]\\w"
        );
        let email = r"(\W|^)[\w.\-]{0,25}@(yahoo|gmail)\.com(\W|$)";
        assert!(full_match(email, "john.doe@yahoo.com"));
        assert!(!full_match(email, "john.doe@hotmail.com"));
        assert!(full_match(r"www\.[\w.-]+\.\bcom\b", "www.example.com"));
        assert!(!full_match(r"www\.[\w.-]+\.\bcom\b", "www.example.co"));
        // Whole strings only; alternation keeps every match (not leftmost-first).
        assert!(!full_match("a+", "aab"));
        assert!(full_match("a|ab", "ab"));
        assert!(full_match("", ""));
        // `\w` is ASCII as in RE2; `.` takes a whole UTF-8 character.
        assert!(!full_match(r"\w", "é"));
        assert!(full_match(".", "é"));
        assert!(full_match(r"[^a]", "é"));
        assert!(compile(r"(a)\1").is_err());
    }

    /// The matches starting at each position where one does, as (start, text).
    fn search(pattern: &str, longest: bool, s: &str) -> Vec<(usize, String)> {
        let words = compile_search(pattern, longest).unwrap();
        let a = onnxc_runtime::regex::Searcher::decode(&words).unwrap();
        (0..=s.len())
            .filter_map(|i| {
                a.match_at(s.as_bytes(), i)
                    .map(|e| (i, s[i..e].to_string()))
            })
            .collect()
    }

    #[test]
    fn searches_take_the_longest_or_the_first_alternative() {
        assert_eq!(search("a|ab", true, "ab"), [(0, "ab".to_string())]);
        assert_eq!(search("a|ab", false, "ab"), [(0, "a".to_string())]);
        // \b sees the byte before the start.
        let words = search(r"\b\w\w+\b", true, "hi there, ab c");
        assert_eq!(
            words,
            [(0, "hi".into()), (3, "there".into()), (10, "ab".into())]
        );
        // Empty matches are matches; a dead start is none.
        assert_eq!(
            search("a*", true, "ba")[..2],
            [(0, String::new()), (1, "a".into())]
        );
        assert!(search("x", true, "ab").is_empty());
    }
}
