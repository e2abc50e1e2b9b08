//! Symbolic dims a model pins: a graph exported with a dynamic axis that is valid at one
//! value of it only (a `Reshape` to the constant `[1, 9216]` under a dynamic batch, `Split`
//! sizes that add up to one length). Where neither a run-time batch nor a run-time dim
//! compiles it, the driver fixes the dim at that value (`pinned`) with a warning, as
//! `--dim NAME=N` would: the object runs at that value, and `NAME_run_shaped` returns
//! `ONNXC_ERR_SHAPE` at any other, where onnxruntime fails the same graph too.

use super::Options;
use super::dims::{LEADING_MAX_NODES, import_error, nodes_within};
use crate::frontend::{self, ImportOptions, tensor::DataDir};

/// The values `pinned` tries a dim at, in order: every small one, then the powers of two
/// up to `dims::DEFAULT_DIM_BOUND` (a sequence fixed at 128). A model valid at only one of
/// them is taken to be valid there only; 0 is tried when none is valid (an empty tensor
/// the graph reshapes), as a model valid at 0 is valid at others as a rule.
const SMALL: std::ops::RangeInclusive<i64> = 1..=16;
const POWERS: [i64; 5] = [32, 64, 128, 256, 512];

/// Most symbolic input dims among which `pinned` looks for one to fix: each dim tried
/// imports the model some twenty times.
const MAX_SYMBOLS: usize = 3;

/// The values the other symbolic input dims take while `pinned` tries one: values a model
/// exported with them dynamic is valid at as a rule (a sequence, an image side); the second
/// where the dim tried is valid at no value with the others at the first (a network whose
/// unpadded windows need 16 columns or more).
const OTHERS_AT: [i64; 2] = [8, 64];

/// The symbolic input dims `import` leaves unbound, named as the importer names them
/// (`dims::run_time_dims`' names and the leading ones), sorted; empty when there are more
/// than `MAX_SYMBOLS`.
pub(super) fn unbound_symbols(model: &frontend::Model, import: &ImportOptions) -> Vec<String> {
    let unbound = frontend::unbound_dims(model, &import.input_shapes, &import.dim_values);
    let mut names: Vec<String> = unbound.into_iter().map(|u| u.symbol).collect();
    names.sort_unstable();
    names.dedup();
    if names.len() > MAX_SYMBOLS {
        names.clear();
    }
    names
}

/// Where the options leave at most `MAX_SYMBOLS` symbolic input dims unbound and the model
/// imports at one value only of one of them (tried in name order, the others at
/// `OTHERS_AT`, or their bounds if below) among those tried (`SMALL`, `POWERS` up to the
/// dim's `--dim NAME=..N` bound, else 0): the options with that dim fixed there (the others
/// are left as they were), and the warning that says so and what fails at another value.
/// None otherwise, and for models of more than `dims::LEADING_MAX_NODES` nodes.
pub(super) fn pinned(
    model: &frontend::Model,
    dir: &DataDir,
    opts: &Options,
) -> Option<(Options, String)> {
    let import = opts.import_options();
    let names = unbound_symbols(model, &import);
    if names.is_empty() || model.graph.as_ref().map_or(0, nodes_within) > LEADING_MAX_NODES {
        return None;
    }
    let bound_of = |name: &str| {
        (opts.dim_bounds.iter())
            .find(|(n, _)| n == name)
            .map_or(i64::MAX, |&(_, b)| b)
    };
    for name in &names {
        for at in OTHERS_AT {
            let others: Vec<(String, i64)> = (names.iter())
                .filter(|n| *n != name)
                .map(|n| (n.clone(), at.min(bound_of(n))))
                .collect();
            match pin(model, dir, opts, &import, name, bound_of(name), &others) {
                Pin::Fixed(fixed, warning) => return Some((fixed, warning)),
                Pin::Several => break,
                Pin::None if others.is_empty() => break,
                Pin::None => {}
            }
        }
    }
    None
}

/// What `pin` found for one dim.
enum Pin {
    /// Valid at one value: the options with the dim fixed there, and the warning.
    Fixed(Options, String),
    /// Valid at several values.
    Several,
    /// Valid at none.
    None,
}

/// `pinned` for the dim `name` (bounded by `bound`), the other unbound dims at `others`.
fn pin(
    model: &frontend::Model,
    dir: &DataDir,
    opts: &Options,
    import: &ImportOptions,
    name: &str,
    bound: i64,
    others: &[(String, i64)],
) -> Pin {
    let error_at = |v: i64| {
        let mut at = others.to_vec();
        at.push((name.to_string(), v));
        import_error(model, dir, import, &at)
    };
    let mut valid = None;
    let mut failed = None;
    for v in candidates(bound) {
        match error_at(v) {
            None if valid.is_some() => return Pin::Several,
            None => valid = Some(v),
            Some(e) => {
                // The error of the value after the valid one, else of the first tried.
                if failed.is_none() || valid.is_some_and(|k| v == k + 1) {
                    failed = Some((v, e));
                }
            }
        }
    }
    let value = match valid {
        Some(v) => v,
        None if error_at(0).is_none() => 0,
        None => return Pin::None,
    };
    let Some((other, why)) = failed else {
        return Pin::None;
    };
    let mut fixed = opts.clone();
    fixed.dims.push((name.to_string(), value));
    fixed.dim_bounds.retain(|(n, _)| n != name);
    let tried = tried(bound);
    let tried = if value == 0 {
        format!("the only value but those {tried}")
    } else {
        format!("the only value {tried}")
    };
    let with_others = match others {
        [] => String::new(),
        [(n, v)] => format!(", with '{n}' at {v}"),
        _ => {
            let at: Vec<String> = others
                .iter()
                .map(|(n, v)| format!("'{n}' at {v}"))
                .collect();
            format!(", with {}", at.join(" and "))
        }
    };
    let warning = format!(
        "dim '{name}' is fixed at {value}: {tried} the model is valid at{with_others} (at \
         {other}: {why}); the object runs at {name} = {value} only, its shaped entry point \
         returning ONNXC_ERR_SHAPE at any other value; give --dim {name}=VALUE to fix it at \
         another"
    );
    Pin::Fixed(fixed, warning)
}

/// The values `pinned` tries below `bound`, in order.
fn candidates(bound: i64) -> impl Iterator<Item = i64> {
    SMALL.chain(POWERS).filter(move |&v| v <= bound)
}

/// The values `candidates(bound)` tries, for a message: "from 1 to 16 and the powers of
/// two to 512".
fn tried(bound: i64) -> String {
    let top = candidates(bound).last().unwrap_or(0);
    if top <= *SMALL.end() {
        format!("from 1 to {top}")
    } else {
        format!("from 1 to {} and the powers of two to {top}", SMALL.end())
    }
}
