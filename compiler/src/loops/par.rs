//! Which loops of generated code run in parallel chunks (`onnxc_runtime::par`).
//!
//! A top-level loop of a step whose iterations write disjoint elements (`Func::parallel`,
//! set by lowering for maps, reductions, copies and concatenations) is split into chunks of
//! its outermost iterations when it does enough work: codegen moves it into a function of
//! `(ctx, begin, end)` that `onnxc_parallel_loop` calls once per chunk. Each element is
//! computed by the code the whole loop would give it, so results do not depend on the
//! chunks. A loop whose iterations call kernels (a batched matmul's GEMM per matrix) is
//! split by whole iterations, each call single-threaded, when it has enough iterations for
//! the workers; otherwise it runs whole and its calls partition their own work.

use super::{Count, Func, Stmt};

/// Least work (elements stored or reduced over) of a loop worth splitting: below it the
/// fork and join of a parallel call (about 1-2 µs with spinning workers) costs more than
/// the split saves.
pub const MIN_WORK: i64 = 1 << 15;
/// Least work of one chunk.
pub const CHUNK_WORK: i64 = 1 << 13;

/// How a top-level statement runs in parallel chunks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParLoop {
    /// Iterations of the split loop (a run-time count is split as it comes, its largest
    /// value deciding whether to split).
    pub extent: Count,
    /// Least iterations per chunk.
    pub grain: i64,
    /// Chunk boundaries are multiples of this (4 for a vector loop, whose tail redoes its
    /// last four iterations; 1 otherwise).
    pub align: i64,
    /// Its iterations call kernels (`onnxc_parallel_loop`'s `calls`).
    pub calls: bool,
}

/// Work counted for one kernel call: enough to split a loop of two.
const CALL_WORK: i64 = MIN_WORK;

/// The statement's parallel form, if it has one: `Func::parallel` steps only.
pub fn parallel_loop(f: &Func, s: &Stmt) -> Option<ParLoop> {
    if !f.parallel {
        return None;
    }
    let (extent, vector, body) = target(s)?;
    let (inner, calls) = work(body);
    if extent.max() < 2 || inner.saturating_mul(extent.max()) < MIN_WORK {
        return None;
    }
    Some(ParLoop {
        extent: extent.clone(),
        grain: if calls {
            1
        } else {
            (CHUNK_WORK / inner.max(1)).max(1)
        },
        align: if vector { 4 } else { 1 },
        calls,
    })
}

/// The loop a parallel form splits: `s` itself, or the single statement inside loops of one
/// iteration. Returns its extent, whether it is a vector loop, and its body.
fn target(s: &Stmt) -> Option<(&Count, bool, &[Stmt])> {
    match s {
        Stmt::For {
            extent: Count::Fixed(1),
            body,
            ..
        } => match &body[..] {
            [inner] => target(inner),
            _ => None,
        },
        Stmt::For {
            extent,
            vector,
            body,
            ..
        } => Some((extent, *vector, body)),
        _ => None,
    }
}

/// Elements one execution of `body` stores or reduces over (a kernel call counting
/// `CALL_WORK`), and whether it calls a kernel.
fn work(body: &[Stmt]) -> (i64, bool) {
    let mut w: i64 = 0;
    let mut calls = false;
    for s in body {
        let k = match s {
            Stmt::For { extent, body, .. } => {
                let (k, c) = work(body);
                calls |= c;
                k.saturating_mul(extent.max())
            }
            Stmt::Store { .. } | Stmt::Check { .. } => 1,
            Stmt::Reduce { loops, .. } => loops
                .iter()
                .fold(1i64, |a, (_, e)| a.saturating_mul(e.max().max(1))),
            // A block copy moves about eight elements in the time a map computes one.
            Stmt::Copy { elems, .. } => (elems.max() / 8).max(1),
            Stmt::Call { .. } => {
                calls = true;
                CALL_WORK
            }
        };
        w = w.saturating_add(k);
    }
    (w, calls)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::expr;

    fn store() -> Stmt {
        Stmt::Store {
            buf: 0,
            offset: expr::var(0),
            value: expr::f(crate::ir::DType::F32, 1.0),
        }
    }

    fn func(parallel: bool, body: Vec<Stmt>) -> Func {
        Func {
            name: "step0".into(),
            origin: String::new(),
            body,
            parallel,
        }
    }

    fn for_(var: u32, extent: i64, vector: bool, body: Vec<Stmt>) -> Stmt {
        Stmt::For {
            var,
            extent: Count::Fixed(extent),
            vector,
            body,
        }
    }

    #[test]
    fn large_loops_of_parallel_steps_split_into_chunks_of_enough_work() {
        let f = func(true, vec![]);
        let s = for_(0, 1 << 20, true, vec![store()]);
        assert_eq!(
            parallel_loop(&f, &s),
            Some(ParLoop {
                extent: Count::Fixed(1 << 20),
                grain: CHUNK_WORK,
                align: 4,
                calls: false,
            })
        );
        // An outer loop over rows of 1000: chunks of whole rows.
        let s = for_(
            1,
            1,
            false,
            vec![for_(
                0,
                100,
                false,
                vec![for_(2, 1000, true, vec![store()])],
            )],
        );
        assert_eq!(
            parallel_loop(&f, &s),
            Some(ParLoop {
                extent: Count::Fixed(100),
                grain: CHUNK_WORK / 1000,
                align: 1,
                calls: false,
            })
        );
    }

    #[test]
    fn small_loops_calls_and_other_steps_stay_whole() {
        let small = for_(0, 1000, true, vec![store()]);
        assert_eq!(parallel_loop(&func(true, vec![]), &small), None);
        let big = for_(0, 1 << 20, true, vec![store()]);
        assert_eq!(parallel_loop(&func(false, vec![]), &big), None);
        let two = for_(1, 1, false, vec![big.clone(), big.clone()]);
        assert_eq!(parallel_loop(&func(true, vec![]), &two), None);
        assert_eq!(parallel_loop(&func(true, vec![]), &store()), None);
    }
}
