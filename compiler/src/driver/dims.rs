//! Dims taken at run time (`loops::dims`): which symbolic dims the options leave to run
//! time, the values the model is lowered at for one dim or two, the least value each takes
//! and the programs of single values below it.

use super::{Emit, Lowered, Lowering, Options, lower_model, print_warning};
use crate::error::{Error, Result};
use crate::frontend::{self, ImportOptions, tensor::DataDir};
use crate::loops::{self, Program};
use crate::schedule::layout::ConvSizes;
use std::cell::RefCell;
use std::sync::Arc;

/// The sizes a model lowered at its bounds chose its convolutions by, replayed at every
/// other value (`Lowering::Probe`); None until the bounds are lowered.
type Decide = RefCell<Option<Arc<[ConvSizes]>>>;

/// `model` lowered at the run-time dims' values `at` (names and values), its convolutions'
/// choices made at `decide`'s sizes if set.
#[allow(clippy::too_many_arguments)]
fn lower_probe(
    model: &frontend::Model,
    dir: &DataDir,
    import: &ImportOptions,
    opts: &Options,
    prefix: &str,
    at: &[(&str, i64)],
    decide: &Decide,
    dump: Option<Emit>,
    warn: bool,
) -> Result<Lowered> {
    let mut with = import.clone();
    with.dim_values
        .extend(at.iter().map(|&(n, v)| (n.to_string(), v)));
    let decide_at = decide.borrow().clone();
    lower_model(
        model.clone(),
        dir,
        &with,
        opts,
        dump,
        prefix,
        warn,
        Lowering::Probe(decide_at),
    )
}

/// The symbolic dims the options leave to run time, with their bounds (at most two): those
/// not only at the front of the inputs (a leading one is a run-time batch, `batch`).
pub(super) fn run_time_dims(
    model: &frontend::Model,
    import: &ImportOptions,
    opts: &Options,
) -> Result<Vec<(String, i64)>> {
    let names = run_time_names(model, import, opts);
    if names.len() > 2 {
        return Err(Error::NeedShape(format!(
            "symbolic dims {} must be fixed at compile time: onnxc takes two dims at run time \
             besides a leading batch dim; fix the others with --dim SYMBOL=N or --shape \
             INPUT=D0,D1,…",
            names
                .iter()
                .map(|n| format!("'{n}'"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    names
        .iter()
        .map(|name| {
            let bound = opts
                .dim_bounds
                .iter()
                .find(|(n, _)| n == name)
                .map_or(DEFAULT_DIM_BOUND, |&(_, b)| b);
            if bound < loops::dims::MIN_BOUND {
                return Err(Error::NeedShape(format!(
                    "dim '{name}' is bounded by {bound}; onnxc takes a dim at run time when its \
                     bound is at least {}: fix it with --dim {name}=N",
                    loops::dims::MIN_BOUND
                )));
            }
            Ok((name.to_string(), bound))
        })
        .collect()
}

/// The symbolic input dims `import` leaves to run time (`run_time_dims`), by name: those
/// not only at the front of the inputs (a leading one is a run-time batch, `batch`) or
/// given a bound.
fn run_time_names(model: &frontend::Model, import: &ImportOptions, opts: &Options) -> Vec<String> {
    let unbound = frontend::unbound_dims(model, &import.input_shapes, &import.dim_values);
    let mut names: Vec<String> = unbound
        .into_iter()
        .filter(|u| u.axis != 0 || opts.dim_bounds.iter().any(|(n, _)| *n == u.symbol))
        .map(|u| u.symbol)
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// Values of the two other dims `summed_symbols` imports a model at, the candidate sum
/// one below, at and one above theirs.
const SUM_PROBES: [(i64, i64); 2] = [(9, 4), (12, 7)];

/// Where the runtime inputs leave three named dims to run time, one of which the model is
/// valid at only as the sum of the other two (onnxruntime's GPT-2 export names its mask and
/// presents `total_seq_len`, its cache `past_seq_len` and its tokens `seq_len`, as
/// independent symbols): the model with that symbol written as their sum, which it then
/// follows (`frontend::io_types::derived_dim`), and a warning saying so. Found by importing
/// the model with the other two at `SUM_PROBES`: valid at their sum and not one above or
/// below it. None when no symbol is such a sum.
pub(super) fn summed_symbols(
    model: &frontend::Model,
    dir: &DataDir,
    import: &ImportOptions,
    opts: &Options,
) -> Option<(frontend::Model, String)> {
    // A bounded batch symbol is the run-time batch's (`as_run_time_batch`), not a term.
    let batch = as_run_time_batch(model, import, opts);
    let names = run_time_names(model, import, batch.as_ref().unwrap_or(opts));
    // Unnamed dims (`INPUT:AXIS`) cannot be written as a sum.
    if names.len() != 3 || names.iter().any(|n| n.contains(':')) {
        return None;
    }
    let valid = |at: [(&str, i64); 3]| {
        let at = at.map(|(n, v)| (n.to_string(), v));
        import_error(model, dir, import, &at).is_none()
    };
    for k in 0..3 {
        let (total, a, b) = (&names[k], &names[(k + 1) % 3], &names[(k + 2) % 3]);
        if opts.dim_bounds.iter().any(|(n, _)| n == total) {
            continue;
        }
        let is_sum = |(x, y): (i64, i64)| {
            [x + y - 1, x + y, x + y + 1].map(|t| valid([(a, x), (b, y), (total, t)]))
                == [false, true, false]
        };
        if !SUM_PROBES.into_iter().all(is_sum) {
            continue;
        }
        let (a, b) = if a < b { (a, b) } else { (b, a) };
        let sum = format!("{a} + {b}");
        let mut m = model.clone();
        frontend::rename_dim(&mut m, total, &sum);
        let warning = format!(
            "dim '{total}' is taken as '{sum}' (the model is valid only where it is their \
             sum): it follows '{a}' and '{b}'; give \
             all three with --dim NAME=N to fix them"
        );
        return Some((m, warning));
    }
    None
}

/// The options that take a model's symbolic leading input dims at run time as other dims
/// are (each up to `DEFAULT_DIM_BOUND`) instead of as a run-time batch, and those dims
/// (`Leading::warning`), for a model that does not compile with them as a batch: a recurrence's
/// `[seq, batch, input]` input, a model that mixes its items. None when the options leave
/// no such dim, the model has more than `LEADING_MAX_NODES` nodes, or it would then take
/// more than two dims at run time.
pub(super) fn leading_at_run_time(
    model: &frontend::Model,
    import: &ImportOptions,
    opts: &Options,
) -> Option<Leading> {
    let unbound = frontend::unbound_dims(model, &import.input_shapes, &import.dim_values);
    let mut leading: Vec<&str> = unbound
        .iter()
        .filter(|u| u.axis == 0 && !opts.dim_bounds.iter().any(|(n, _)| *n == u.symbol))
        .map(|u| u.symbol.as_str())
        .collect();
    leading.sort_unstable();
    leading.dedup();
    if leading.is_empty() || model.graph.as_ref().map_or(0, nodes_within) > LEADING_MAX_NODES {
        return None;
    }
    let mut wider = opts.clone();
    wider
        .dim_bounds
        .extend(leading.iter().map(|&n| (n.to_string(), DEFAULT_DIM_BOUND)));
    if run_time_dims(model, import, &wider).is_err() {
        return None;
    }
    let names: Vec<String> = leading.iter().map(|n| format!("'{n}'")).collect();
    Some(Leading {
        opts: wider,
        names: names.join(", "),
        plural: leading.len() > 1,
    })
}

/// The options with the bounds they give symbolic leading input dims (`--dim N=..B` where
/// `N` is only ever dim 0 of the inputs) taken as the bound of a run-time batch
/// (`Options::batch_bound`, the least of them) instead of as bounds of dims taken at run
/// time: a run-time batch runs its items in a workspace of one item's (or one chunk's), so
/// a bounded batch dim keeps that workspace, and a bound below `loops::dims::MIN_BOUND` is
/// no error. None when the options bound no such dim. Where the model does not compute its
/// items on their own, the driver compiles it as the options ask (the dims taken at run
/// time up to their bounds).
pub(super) fn as_run_time_batch(
    model: &frontend::Model,
    import: &ImportOptions,
    opts: &Options,
) -> Option<Options> {
    let unbound = frontend::unbound_dims(model, &import.input_shapes, &import.dim_values);
    let leading_only = |name: &str| {
        unbound.iter().any(|u| u.symbol == name)
            && unbound.iter().all(|u| u.symbol != name || u.axis == 0)
    };
    let bounds: Vec<i64> = opts
        .dim_bounds
        .iter()
        .filter(|(n, _)| leading_only(n))
        .map(|&(_, b)| b)
        .collect();
    let least = bounds.iter().copied().min()?;
    let mut batch = opts.clone();
    batch.dim_bounds.retain(|(n, _)| !leading_only(n));
    batch.batch_bound = Some(least);
    Some(batch)
}

/// The most nodes (subgraphs' included) of a model whose leading dims `leading_at_run_time`
/// takes at run time when they make no run-time batch: a dim taken at run time lowers the
/// model at a dozen values or more, each about 150 µs per node (a chain of 200000 nodes
/// took 31 s to lower once). Past it, the batch's error stands and says which flag to give.
pub(super) const LEADING_MAX_NODES: usize = 20_000;

/// Nodes of `g` and of the subgraphs its nodes hold (protobuf decoding bounds the nesting).
pub(super) fn nodes_within(g: &onnxc_proto::GraphProto) -> usize {
    g.node
        .iter()
        .map(|n| {
            1 + n
                .attribute
                .iter()
                .flat_map(|a| a.g.iter().chain(&a.graphs))
                .map(nodes_within)
                .sum::<usize>()
        })
        .sum()
}

/// `leading_at_run_time`'s options, and the dims they take at run time (quoted, for the
/// warning).
pub(super) struct Leading {
    pub opts: Options,
    names: String,
    plural: bool,
}

impl Leading {
    /// The warning that the dims are taken at run time, with the workspace at their bounds
    /// when it is known (`workspace` bytes) and a megabyte or more: with two such dims it
    /// can reach gigabytes (an encoder's attention scores at 512 × 512), which a user should
    /// see at compile time.
    pub fn warning(&self, workspace: Option<u64>) -> String {
        let (s, them) = if self.plural {
            ("s", "them")
        } else {
            ("", "it")
        };
        let sized = match workspace {
            Some(b) if b >= 1 << 20 => format!(": {}", super::byte_size(b)),
            _ => String::new(),
        };
        format!(
            "the symbolic leading input dim{s} {} cannot be a run-time batch (the model does \
             not compute its items on their own), so onnxc takes {them} at run time up to \
             {DEFAULT_DIM_BOUND}, the workspace sized for that{sized}; bound {them} with --dim \
             SYMBOL=..N or fix {them} with --dim SYMBOL=N",
            self.names
        )
    }
}

/// Two dims taken at run time (an image's height and width, `loops::dims::generalize_dims`):
/// the model lowered at their bounds, then at every pair of their probe values, each dim
/// from its least probe (no value below the probes is checked, so none is taken).
#[allow(clippy::too_many_arguments)]
pub(super) fn two_dims(
    model: &frontend::Model,
    dir: &DataDir,
    import: &ImportOptions,
    opts: &Options,
    emit: Option<Emit>,
    prefix: &str,
    a: &(String, i64),
    b: &(String, i64),
) -> Result<Lowered> {
    with_retries(import, opts, true, |import, from| {
        two_dims_at(model, dir, import, opts, emit, prefix, a, b, from)
    })
}

/// `two_dims`, each dim taken in multiples of at least `from` (`grid`).
#[allow(clippy::too_many_arguments)]
fn two_dims_at(
    model: &frontend::Model,
    dir: &DataDir,
    import: &ImportOptions,
    opts: &Options,
    emit: Option<Emit>,
    prefix: &str,
    (na, ba): &(String, i64),
    (nb, bb): &(String, i64),
    from: i64,
) -> Result<Lowered> {
    let (ba, bb) = (*ba, *bb);
    // The other dim at a value the model is valid at: its bound, or the largest multiple
    // of one of `MULTIPLES` below it.
    let valid_near = |other: &str, other_bound: i64| {
        let candidates = MULTIPLES.iter().map(|&m| other_bound / m * m);
        candidates
            .filter(|&v| v > 0)
            .find(|&v| imports_at(model, dir, import, other, v))
            .unwrap_or(other_bound)
    };
    // Each dim's grid from its least valid value, the other at (near) its bound.
    let probes = |name: &str, bound: i64, other: &str, other_bound: i64| {
        let mut at = import.clone();
        at.dim_values
            .push((other.to_string(), valid_near(other, other_bound)));
        grid(model, dir, &at, name, bound, from).ok_or_else(|| {
            let least = least_value(model, dir, &at, name, bound);
            Error::NeedShape(format!(
                "dim '{name}' would be taken at run time, but the model is valid only from {} \
                 to its bound {bound}: too few values to compile it for all of them; raise the \
                 bound with --dim {name}=..N or fix it with --dim {name}=N",
                least.unwrap_or(1)
            ))
        })
    };
    let ga = probes(na, ba, nb, bb)?;
    let gb = probes(nb, bb, na, ba)?;
    let (ma, mb) = (ga.multiple, gb.multiple);
    let (pa, pb) = (&ga.probes, &gb.probes);
    let (ba, bb) = (pa[pa.len() - 1], pb[pb.len() - 1]);
    let (pa, pb) = (&pa[..pa.len() - 1], &pb[..pb.len() - 1]);
    let mut points: Vec<Vec<i64>> = Vec::new();
    for &a in pa {
        for &b in pb {
            points.push(vec![a, b]);
        }
    }
    points.push(vec![ba, bb]);
    let least_point = [
        (na.clone(), ma * pa.iter().copied().min().expect("probes")),
        (nb.clone(), mb * pb.iter().copied().min().expect("probes")),
    ];
    let decide = Decide::default();
    let lower_at = |p: &[i64], dump: Option<Emit>, warn: bool| {
        let at = [(&na[..], ma * p[0]), (&nb[..], mb * p[1])];
        lower_probe(model, dir, import, opts, prefix, &at, &decide, dump, warn).map_err(|e| match e
        {
            Error::Unsupported(_) | Error::Parse(_) | Error::Usage(_) => e,
            // What fails at the dims' least probes too is not the bounds' doing (a leading
            // batch that is no run-time batch: its error says what to fix).
            e if import_error(model, dir, import, &least_point).is_some() => e,
            e => Error::NeedShape(format!(
                "dims '{na}' and '{nb}' are taken at run time up to {} and {}, but at {} \
                 and {} the model fails: {e}; give smaller bounds with --dim NAME=..N, or fix \
                 them with --dim NAME=N",
                ma * ba,
                mb * bb,
                ma * p[0],
                mb * p[1]
            )),
        })
    };
    // The decision point's convolution sizes choose every point's layouts and paths, the
    // bounds' included (when it fails to lower, the bounds' choose).
    let (bound_point, grid) = points.split_last().expect("points");
    let low = |p: &[i64]| p.iter().copied().min().expect("probes");
    let decision = [
        decision_value(low(pa), bound_point[0]),
        decision_value(low(pb), bound_point[1]),
    ];
    if let Ok(Lowered::Program(p)) = lower_at(&decision, None, false) {
        *decide.borrow_mut() = Some(p.conv_sizes.clone().into());
    }
    let at_bound = match lower_at(bound_point, emit.filter(|&e| e != Emit::Loops), true)? {
        Lowered::Program(p) => p,
        dump => return Ok(dump),
    };
    if decide.borrow().is_none() {
        *decide.borrow_mut() = Some(at_bound.conv_sizes.clone().into());
    }
    let mut programs = Vec::new();
    for p in grid {
        match lower_at(p, None, false)? {
            Lowered::Program(p) => programs.push(p),
            dump => return Ok(dump),
        }
    }
    programs.push(at_bound);
    let refs: Vec<&Program> = programs.iter().collect();
    let least = [
        pa.iter().copied().min().expect("probes"),
        pb.iter().copied().min().expect("probes"),
    ];
    let mut general =
        loops::dims::generalize_dims(&[na, nb], &least, &points, &refs).map_err(|why| {
            Error::NeedShape(format!(
                "dims '{na}' and '{nb}' would be taken at run time, but the compiled model is \
                 not one program for all their values: {why}; fix one with --dim NAME=N"
            ))
        })?;
    general.run_dims[0].multiple = ma;
    general.run_dims[1].multiple = mb;
    // Below the least probes: the programs lowered there, and the programs of each value
    // of one dim that the formulas do not serve, taking the other at run time.
    let lower_small = |q: &[i64]| match lower_at(q, None, false) {
        Ok(Lowered::Program(p)) => Some(p),
        _ => None,
    };
    let one_fixed = |k: usize, v: i64| {
        let ((name, m), (other, mo, bo)) = if k == 0 {
            ((na, ma), (nb, mb, bb))
        } else {
            ((nb, mb), (na, ma, ba))
        };
        let mut at = import.clone();
        at.dim_values.push((name.clone(), m * v));
        // Retried as a model of that one dim is (at this value a table the other dim
        // selects from may fold: a decoder's position rows at one new token).
        let sub = with_retries(&at, opts, false, |import, from| {
            one_dim_at(
                model,
                dir,
                import,
                opts,
                None,
                prefix,
                other,
                mo * bo,
                from.max(mo),
                false,
            )
        });
        match sub {
            Ok(Lowered::Program(p)) => Some(p),
            _ => None,
        }
    };
    let below = Below {
        names: [na, nb],
        floors: [ga.least.unwrap_or(1).max(1), gb.least.unwrap_or(1).max(1)],
        probes: [pa, pb],
        points: &points,
        programs: &refs,
    };
    let program = below.extend(general, lower_small, one_fixed);
    Ok(Lowered::Program(with_empty_cache(program, one_fixed)))
}

/// `program` (two run-time dims, `two_dims`) also at 0 of a dim its outputs carry only
/// added to the other dim: a KV cache's length, whose presents are `past + seq` long while
/// the logits are `seq` long, is 0 on a decoder's first step (an empty cache). Where the
/// model lowers with that dim at 0 and the other taken at run time (`one_fixed(dim, 0)`),
/// that program, and those of its own it carries for the other dim's small values, become
/// programs of `program`'s (`Program::fixed`) and the dim's least value is 0. Other dims
/// keep their least: a program at 0 for every run-time dim the model allows there (a
/// sequence of no tokens, an image of no columns) would grow every object for a size
/// nothing computes on.
fn with_empty_cache(
    mut program: Program,
    one_fixed: impl Fn(usize, i64) -> Option<Program>,
) -> Program {
    for k in 0..2 {
        let o = 1 - k;
        let d = &program.run_dims[k];
        if d.least != 1 || d.multiple != 1 || !only_added(&program, k as u32) {
            continue;
        }
        let Some(sub) = at_zero(|| one_fixed(k, 0)) else {
            continue;
        };
        // The sub-program must serve the other dim from its least value on (0 when the
        // first dim took 0 already: then one symmetric in its dims takes it for that one).
        if sub.run_dims.len() != 1 || sub.run_dims[0].least > program.run_dims[o].least {
            continue;
        }
        let mut these = at_one_value(k, 0, sub);
        // A pair of values another program serves already keeps that program.
        these.retain(|f| program.fixed.iter().all(|g| g.at != f.at));
        if program.fixed.len() + these.len() > MAX_FIXED_TWO + MAX_EMPTY_CACHE
            || (these.iter()).any(|f| loops::dims::fixed_fits(&program, &f.at, &f.program).is_err())
        {
            continue;
        }
        program.fixed.extend(these);
        program.run_dims[k].least = 0;
        // Programs for both dims' values first: the run takes the first that matches.
        (program.fixed).sort_by_key(|f| f.at.iter().filter(|v| v.is_none()).count());
    }
    program
}

/// Most programs an empty cache adds to those of `Below::extend` (`MAX_FIXED_TWO`): its own
/// and those it carries for the other dim's small values (a decoder's one new token).
const MAX_EMPTY_CACHE: usize = 2;

/// `sub`, a two-dim model's program at value `v` of dim `k` taking the other dim at run time
/// (`one_fixed`), with the programs it carries for the other dim's small values, as programs
/// of the two-dim model (`Program::fixed`: `at` both values, or dim `k`'s alone, last).
fn at_one_value(k: usize, v: i64, mut sub: Program) -> Vec<loops::Fixed> {
    let at = |w: Option<i64>| {
        let mut at = vec![None; 2];
        at[k] = Some(v);
        at[1 - k] = w;
        at
    };
    let inner = std::mem::take(&mut sub.fixed);
    let mut these: Vec<loops::Fixed> = (inner.into_iter())
        .filter_map(|f| {
            Some(loops::Fixed {
                at: at(Some(f.at.first().copied().flatten()?)),
                program: f.program,
            })
        })
        .collect();
    these.push(loops::Fixed {
        at: at(None),
        program: sub,
    });
    these
}

/// `lower()`, the model lowered with a dim at 0 for a program of its own (an empty cache),
/// None where that panics: a value no probe took must not fail the compile of the others.
fn at_zero(lower: impl FnOnce() -> Option<Program>) -> Option<Program> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(lower))
        .ok()
        .flatten()
}

/// Whether `program`'s outputs carry its run-time dim `k` only added to its other one
/// (`past + seq`), and some output does.
fn only_added(program: &Program, k: u32) -> bool {
    let mut added = false;
    for r in program
        .outputs
        .iter()
        .flat_map(|o| o.run_dims.iter().flatten())
    {
        let mentions = r.dim == k || r.other.is_some_and(|t| t.dim == k);
        if !mentions {
            continue;
        }
        match r.other {
            Some(t) if r.mul > 0 && t.mul > 0 && t.prod == 0 => added = true,
            _ => return false,
        }
    }
    added
}

/// Most programs of their own that values below two run-time dims' formulas get: a dim
/// whose values would take more (each value's program with programs of its own for values
/// of the other dim) gets none, and starts where its formulas do.
const MAX_FIXED_TWO: usize = 2 * MAX_FIXED as usize;

/// Two run-time dims generalized from the programs lowered at `points` (`two_dims`), and
/// what their values below the least probes need.
struct Below<'a> {
    names: [&'a str; 2],
    /// The least value of each dim the model is valid at (its other dim near its bound).
    floors: [i64; 2],
    /// Each dim's probe values, the bound left out.
    probes: [&'a [i64]; 2],
    points: &'a [Vec<i64>],
    programs: &'a [&'a Program],
}

impl Below<'_> {
    /// Whether the programs, with `extra` at their points, are one program for every value
    /// from `least` to the bounds.
    fn one_program(&self, least: [i64; 2], extra: Option<(&[i64], &Program)>) -> bool {
        let (mut points, mut programs) = (self.points.to_vec(), self.programs.to_vec());
        if let Some((q, p)) = extra {
            // The bounds stay last.
            points.insert(points.len() - 1, q.to_vec());
            programs.insert(programs.len() - 1, p);
        }
        loops::dims::generalize_dims(&self.names, &least, &points, &programs).is_ok()
    }

    /// `general` (at the least probes, the multiples set) taken below its least probes, as
    /// one dim is (`verified_least`, `fixed_programs`): each dim's values down to its floor
    /// are lowered (`lower_at`, the other dim at one of its probes) and checked to give the
    /// generalized program, and the values below the first that does not (at most
    /// `MAX_FIXED` of them, `MAX_FIXED_TWO` programs in all) get programs of their own that
    /// take the other dim at run time over its whole range (`one_fixed(dim, value)`;
    /// `Fixed::at` a value and None), theirs for the other dim's values below their formulas
    /// flattened into `general`'s. Where both dims go below their probes, the corner of the
    /// two least values is checked too; when that fails, `general` stays as it was. A
    /// breakpoint that needs both dims small but not at their least (`H·W < 40`) is not
    /// looked for.
    fn extend(
        &self,
        general: Program,
        lower_at: impl Fn(&[i64]) -> Option<Program>,
        one_fixed: impl Fn(usize, i64) -> Option<Program>,
    ) -> Program {
        let low = [general.run_dims[0].least, general.run_dims[1].least];
        let mut least = low;
        let mut failed: [Option<i64>; 2] = [None, None];
        for k in 0..2 {
            let o = 1 - k;
            for n in (self.floors[k]..low[k]).rev() {
                let mut q = [0; 2];
                q[k] = n;
                q[o] = self.probes[o][n as usize % self.probes[o].len()];
                let Some(p) = lower_at(&q) else {
                    break;
                };
                let mut at = low;
                at[k] = n;
                if !self.one_program(at, Some((&q, &p))) {
                    failed[k] = Some(n);
                    break;
                }
                least[k] = n;
            }
        }
        // The corner of the two least values: the formulas', or a program of its own (an
        // LSTM over `[seq, batch, …]` multiplies seq·batch rows, a matrix-vector product at
        // 1 × 1).
        let mut corner = None;
        if least[0] < low[0] && least[1] < low[1] {
            match lower_at(&least) {
                Some(p) if self.one_program(least, Some((&least, &p))) => {}
                Some(p) => corner = Some(p),
                None => return general,
            }
        }
        if least == low && failed == [None, None] {
            return general;
        }
        let Ok(mut wider) =
            loops::dims::generalize_dims(&self.names, &least, self.points, self.programs)
        else {
            return general;
        };
        for (w, g) in wider.run_dims.iter_mut().zip(&general.run_dims) {
            w.multiple = g.multiple;
        }
        // Each sub-program must serve the other dim from the least value it may take.
        let served = |o: usize| {
            if failed[o].is_some() {
                self.floors[o]
            } else {
                least[o]
            }
        };
        let mut fixed: Vec<loops::Fixed> = Vec::new();
        for (k, top) in failed.iter().enumerate() {
            let Some(top) = *top else {
                continue;
            };
            let o = 1 - k;
            if top - self.floors[k] >= MAX_FIXED {
                continue;
            }
            let mut mine = Vec::new();
            for v in self.floors[k]..=top {
                let Some(sub) = one_fixed(k, v) else {
                    mine.clear();
                    break;
                };
                let serves = sub.run_dims.len() == 1 && sub.run_dims[0].least <= served(o);
                let these = at_one_value(k, v, sub);
                let fits = (these.iter())
                    .all(|f| loops::dims::fixed_fits(&wider, &f.at, &f.program).is_ok());
                if !serves || !fits {
                    mine.clear();
                    break;
                }
                mine.extend(these);
            }
            // A pair of values both dims' programs hold (each serves it) once.
            mine.retain(|f: &loops::Fixed| fixed.iter().all(|g| g.at != f.at));
            if !mine.is_empty() && fixed.len() + mine.len() <= MAX_FIXED_TWO {
                wider.run_dims[k].least = self.floors[k];
                fixed.extend(mine);
            }
        }
        if let Some(p) = corner {
            let at = vec![Some(least[0]), Some(least[1])];
            if loops::dims::fixed_fits(&wider, &at, &p).is_err() || fixed.len() >= MAX_FIXED_TWO {
                return general;
            }
            fixed.retain(|f| f.at != at);
            fixed.push(loops::Fixed { at, program: p });
        }
        // Programs for both dims' values first: the run takes the first that matches.
        fixed.sort_by_key(|f| f.at.iter().filter(|v| v.is_none()).count());
        wider.fixed = fixed;
        wider
    }
}

/// The value a run-time dim's size-based choices are made at (its convolutions' layouts and
/// kernel paths, `schedule::layout::ConvSizes`), between its least probe `low` and its
/// bound: their geometric mean, as the sizes a model runs at span orders of magnitude. The
/// bound's own choices serve small sizes badly (a DBNet detector compiled up to 640 × 640
/// ran 2.2× its specialized object at 64 × 64) and large ones no better than the middle's.
fn decision_value(low: i64, bound: i64) -> i64 {
    let mid = ((low.max(1) as f64) * (bound as f64)).sqrt().round() as i64;
    mid.clamp(low.max(1), bound)
}

/// Whether `model` imports with its dim `name` at `n` (`import_error`).
fn imports_at(
    model: &frontend::Model,
    dir: &DataDir,
    import: &ImportOptions,
    name: &str,
    n: i64,
) -> bool {
    import_error(model, dir, import, &[(name.to_string(), n)]).is_none()
}

/// Why `model` does not import with the dims `at` bound besides `import`'s (a symbolic
/// leading batch left unbound imported as the run-time batch's one-item program, as
/// `lower_model` does); None when it imports.
pub(super) fn import_error(
    model: &frontend::Model,
    dir: &DataDir,
    import: &ImportOptions,
    at: &[(String, i64)],
) -> Option<Error> {
    let mut with = import.clone();
    with.dim_values.extend(at.iter().cloned());
    super::import_model(model.clone(), dir, &with, false).err()
}

/// The bounds of the run-time dims `dims`, each given with `--dim NAME=..N` or the
/// default. A model invalid at the default bound (a position table of 64 rows read at
/// every position of a sequence) but valid at 1 gets the largest value it is valid at
/// instead (the model taken to be valid from 1 up to it), with a warning naming what fails
/// beyond (returned with the bounds); given bounds are kept (a failure there is reported
/// as such).
///
/// A dim is tried with the other run-time dims at 1, and a model counts as valid at a
/// value where its import fails only for want of fixed dims (`Error::NeedShape`: a leading
/// batch that is no run-time batch, which the compile then takes at run time too): that
/// failure is not the value's, and the search must still find the value's own limit.
pub(super) fn valid_bounds(
    model: &frontend::Model,
    dir: &DataDir,
    import: &ImportOptions,
    opts: &Options,
    dims: Vec<(String, i64)>,
) -> (Vec<(String, i64)>, Vec<String>) {
    let mut warnings = Vec::new();
    let names: Vec<String> = dims.iter().map(|(n, _)| n.clone()).collect();
    let bounds = dims
        .into_iter()
        .map(|(name, bound)| {
            let given = opts.dim_bounds.iter().any(|(n, _)| *n == name);
            // The run-time dims with this one at `n`, the others at 1.
            let at = |n: i64| -> Vec<(String, i64)> {
                (names.iter())
                    .map(|o| (o.clone(), if *o == name { n } else { 1 }))
                    .collect()
            };
            let valid = |n: i64| {
                matches!(
                    import_error(model, dir, import, &at(n)),
                    None | Some(Error::NeedShape(_))
                )
            };
            if given || valid(bound) || !valid(1) {
                return (name, bound);
            }
            let (lo, hi) = bisect(1, bound, true, valid);
            if lo < loops::dims::MIN_BOUND {
                return (name, bound);
            }
            let why = import_error(model, dir, import, &at(hi))
                .map_or_else(String::new, |e| format!(" (at {hi}: {e})"));
            warnings.push(format!(
                "dim '{name}' is taken at run time up to {lo}, the largest value the model \
                 is valid at{why}; set another bound with --dim {name}=..N or fix it with \
                 --dim {name}=N"
            ));
            (name, lo)
        })
        .collect();
    let bounds = valid_together(model, dir, import, opts, bounds, &mut warnings);
    (bounds, warnings)
}

/// `bounds` (`valid_bounds`') lowered together where the model is valid at each alone but
/// not at all of them at once (a decoder's cache and new tokens, `past + seq`, read from a
/// position table of 256 rows): the dims not given with `--dim NAME=..N` get the largest
/// common bound `t` (each dim at most its own) the model is valid at, with a warning.
fn valid_together(
    model: &frontend::Model,
    dir: &DataDir,
    import: &ImportOptions,
    opts: &Options,
    bounds: Vec<(String, i64)>,
    warnings: &mut Vec<String>,
) -> Vec<(String, i64)> {
    let given = |name: &str| opts.dim_bounds.iter().any(|(n, _)| n == name);
    let at = |t: i64| -> Vec<(String, i64)> {
        (bounds.iter())
            .map(|(n, b)| (n.clone(), if given(n) { *b } else { t.min(*b) }))
            .collect()
    };
    // As in `valid_bounds`: a failure for want of fixed dims is not the values'.
    let valid = |t: i64| {
        matches!(
            import_error(model, dir, import, &at(t)),
            None | Some(Error::NeedShape(_))
        )
    };
    let top = bounds.iter().map(|(_, b)| *b).max().unwrap_or(0);
    let free: Vec<&str> = (bounds.iter())
        .filter(|(n, _)| !given(n))
        .map(|(n, _)| n.as_str())
        .collect();
    if bounds.len() < 2 || free.is_empty() || valid(top) || !valid(1) {
        return bounds;
    }
    let (lo, hi) = bisect(1, top, true, valid);
    if lo < loops::dims::MIN_BOUND {
        return bounds;
    }
    let why = import_error(model, dir, import, &at(hi))
        .map_or_else(String::new, |e| format!(" (at {hi}: {e})"));
    let names: Vec<String> = free.iter().map(|n| format!("'{n}'")).collect();
    warnings.push(format!(
        "dims {} are taken at run time up to {lo}, the largest value the model is valid at \
         with all its run-time dims at their bounds together{why}; set other bounds with \
         --dim NAME=..N or fix one with --dim NAME=N",
        names.join(" and ")
    ));
    at(lo)
}

/// The least value of run-time dim `name` in `1..=bound` at which `model` imports (at
/// smaller values a window or a kernel does not fit in it), taking the model to be valid
/// from there to the bound; None when it does not import at the bound either.
fn least_value(
    model: &frontend::Model,
    dir: &DataDir,
    import: &ImportOptions,
    name: &str,
    bound: i64,
) -> Option<i64> {
    let valid = |n: i64| imports_at(model, dir, import, name, n);
    if valid(1) {
        return Some(1);
    }
    if !valid(bound) {
        return None;
    }
    Some(bisect(1, bound, false, valid).1)
}

/// Where `valid` changes between `lo` and `hi` (`valid(lo)` is `at_lo`, `valid(hi)` its
/// opposite, both known): adjacent values `(a, a + 1)` with `valid(a) == at_lo` and
/// `valid(a + 1) != at_lo`, taking `valid` to change once in the range.
fn bisect(mut lo: i64, mut hi: i64, at_lo: bool, valid: impl Fn(i64) -> bool) -> (i64, i64) {
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if valid(mid) == at_lo {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo, hi)
}

/// The multiples a run-time dim may be taken in, smallest first: a model valid only at
/// multiples of its strides' product (an FPN adding ×2 upsamplings to its laterals, valid
/// at multiples of 32) is lowered at multiples of the least that serves.
const MULTIPLES: [i64; 7] = [1, 2, 4, 8, 16, 32, 64];

/// How a run-time dim is taken: the dim is `multiple ×` a value from `least` (None: the
/// model was not found valid at the bound) to `bound`, and the model is lowered at the
/// values `probes` (the bound last).
struct Grid {
    multiple: i64,
    least: Option<i64>,
    probes: Vec<i64>,
}

/// The grid of run-time dim `name` up to `bound`: every value from the least the model is
/// valid at, when it is valid at each probe; else multiples of the least of `MULTIPLES`
/// at whose probes (and least) it is; else (to fail at the probe where it is not valid) the
/// first. A retry's `from` above 1 skips every value and the multiples below it. None when
/// too few values lie below the bound.
fn grid(
    model: &frontend::Model,
    dir: &DataDir,
    import: &ImportOptions,
    name: &str,
    bound: i64,
    from: i64,
) -> Option<Grid> {
    let valid = |n: i64| imports_at(model, dir, import, name, n);
    // Every value, unless a retry asks for multiples.
    let mut every = None;
    if from <= 1 {
        let least = least_value(model, dir, import, name, bound);
        let probes = loops::dims::probe_sizes(least.unwrap_or(1), bound)?;
        if probes.iter().all(|&n| valid(n)) {
            return Some(Grid {
                multiple: 1,
                least,
                probes,
            });
        }
        every = Some(Grid {
            multiple: 1,
            least,
            probes,
        });
    }
    for m in MULTIPLES[1..].iter().copied().filter(|&m| m >= from) {
        let top = bound / m;
        let Some(low) = (1..=top.min(8)).find(|&k| valid(m * k)) else {
            continue;
        };
        // Four values above the least, which take every remainder modulo 2, 3 and 4 (the
        // dims inside are multiples of the values: the strides are in the multiple), and
        // leave the least itself, where loops of extent 1 fall away, and the value above
        // it, where the deepest maps are two wide (a 5×5 pool over a map of two takes
        // another layout), to be checked below, when the range has room.
        if top - low < 5 {
            continue;
        }
        let first = if top - low >= 6 { low + 2 } else { low + 1 };
        let probes = vec![first, first + 1, first + 2, first + 3, top];
        if probes.iter().all(|&k| valid(m * k)) {
            return Some(Grid {
                multiple: m,
                least: Some(low),
                probes,
            });
        }
    }
    every
}

/// Multiples a run-time dim is retried in when its constants are no polynomials of a step
/// of it (a stride of 8 or more: `loops::dims::NOT_POLYNOMIAL`).
const RETRY_MULTIPLES: [i64; 2] = [8, 32];

/// `attempt` with `import` and its dims taken in multiples of at least 1, retried while the
/// compiled model is not one program for all their values and a retry may make it one:
/// with expanding maps computed at run time when their folded tables followed the dims
/// (`ImportOptions::keep_expanding`), with float scalars loaded where the code runs when a
/// scale was folded with a count of the dims (`ImportOptions::keep_scales`), with quantized
/// products of run-time operands split alike at every depth when the steps differ
/// (`ImportOptions::split_products`), with tables over one dim at most when constants
/// differ in number (`ImportOptions::narrow_tables`), with
/// selections from float tables computed at run time too when a folded table or float
/// still differs (`ImportOptions::keep_selections`: a decoder's position rows), in multiples
/// of 8, then 32, when a constant is no polynomial of a step of them (a detector's
/// stride-8 head), and in multiples of 32 when those of 8 fail for another reason too
/// (their least values leave a deep map one wide, where loops of extent 1 fall away:
/// DenseNet's last block at 32 to 64). The first error when none does. `warn`: say so when
/// the dims end up taken in multiples.
fn with_retries(
    import: &ImportOptions,
    opts: &Options,
    warn: bool,
    attempt: impl Fn(&ImportOptions, i64) -> Result<Lowered>,
) -> Result<Lowered> {
    let first = match attempt(import, 1) {
        Ok(l) => return Ok(l),
        Err(e) => e,
    };
    let Error::NeedShape(why) = &first else {
        return Err(first);
    };
    let (mut import, mut from, mut why) = (import.clone(), 1, why.clone());
    loop {
        if why.contains(loops::dims::FOLDED_TABLE) && !import.keep_expanding {
            import.keep_expanding = true;
        } else if why.contains(loops::dims::FOLDED_SCALE) && !import.keep_scales {
            import.keep_scales = true;
        } else if why.contains(loops::dims::CONSTANTS_DIFFER) && !import.narrow_tables {
            // A table folded at some values and not at others, over a constant that
            // follows the dims: tables then take rows over a channel at most.
            import.narrow_tables = true;
        } else if why.contains(loops::dims::STEPS_DIFFER) && !import.split_products {
            // A quantized product over a depth that follows the dims (attention's keys)
            // took the direct plan below 258 and the split one above.
            import.split_products = true;
        } else if (why.contains(loops::dims::FOLDED_TABLE)
            || why.contains(loops::dims::FOLDED_SCALE))
            && !import.keep_selections
        {
            // A table's rows Gathered at the dims (a decoder's position rows at its cache
            // length), folded into a table or inlined as literals: kept from folding too.
            // Last, so that the models the retries above serve keep their programs.
            import.keep_expanding = true;
            import.keep_selections = true;
        } else if (why.contains(loops::dims::NOT_POLYNOMIAL) || from > 1)
            && let Some(&m) = RETRY_MULTIPLES.iter().find(|&&m| m > from)
        {
            from = m;
        } else {
            return Err(first);
        }
        match attempt(&import, from) {
            Ok(l) => {
                if from > 1 && warn {
                    // The model is valid at other values: say why they are refused.
                    let w = format!(
                        "the dims taken at run time are taken in multiples of {from} (or of \
                         a larger power of two; the header says): at other values the model's \
                         sizes follow strides the compiler cannot tell apart, and it would not \
                         be one program; fix them with --dim NAME=N to run other sizes"
                    );
                    print_warning(opts, &w);
                }
                return Ok(l);
            }
            Err(Error::NeedShape(next)) => why = next,
            Err(_) => return Err(first),
        }
    }
}

/// The least value from which the program generalized from `programs` (lowered at `sizes`,
/// `loops::dims`) is the model's program: each value below the least probe down to `least`
/// is lowered (`lower_at`) and checked to give the generalized program, and the first that
/// does not (a Slice that clamps to the dim, a crop that pads below its size, loops of
/// extent 1 at 1) sets the least to the value above it; that value's program comes with it
/// when it was lowered (`fixed_programs`). Values from the least probe up follow the
/// polynomials, which a breakpoint between the probes would break.
fn verified_least(
    name: &str,
    least: i64,
    sizes: &[i64],
    programs: &[&Program],
    lower_at: impl Fn(i64) -> Option<Program>,
) -> (i64, Option<Program>) {
    let low = sizes.iter().copied().min().unwrap_or(least);
    for n in (least..low).rev() {
        let Some(p) = lower_at(n) else {
            return (n + 1, None);
        };
        // Checked at `n` besides the probes: the bound stays last.
        let mut at = sizes.to_vec();
        at.insert(at.len() - 1, n);
        let mut ps = programs.to_vec();
        ps.insert(ps.len() - 1, &p);
        if loops::dims::generalize(name, n, &at, &ps).is_err() {
            return (n + 1, Some(p));
        }
    }
    (least, None)
}

/// Most values below a run-time dim's verified least that get programs of their own.
const MAX_FIXED: i64 = 4;

/// Programs of their own for the values from `floor` (where the model is valid) up to the
/// one below `general`'s least, whose program is `next` (`Program::fixed`, in increasing
/// order): all of them or, when there are more than `MAX_FIXED`, one fails to lower (`lower_at`)
/// or one's inputs or outputs are not `general`'s at its value, none.
fn fixed_programs(
    general: &Program,
    floor: i64,
    next: Program,
    lower_at: impl Fn(i64) -> Option<Program>,
) -> Vec<loops::Fixed> {
    let top = general.run_dims[0].least - 1;
    if top < floor || top - floor >= MAX_FIXED {
        return Vec::new();
    }
    let mut fixed = vec![loops::Fixed::one(top, next)];
    for n in (floor..top).rev() {
        let Some(program) = lower_at(n) else {
            return Vec::new();
        };
        fixed.push(loops::Fixed::one(n, program));
    }
    if (fixed.iter()).any(|f| loops::dims::fixed_fits(general, &f.at, &f.program).is_err()) {
        return Vec::new();
    }
    fixed.reverse();
    fixed
}

/// The error of a run-time dim `name` whose programs are not one (`why`).
fn not_one(name: &str, why: &str) -> Error {
    Error::NeedShape(format!(
        "dim '{name}' would be taken at run time, but the compiled model is not one program \
         for all its values: {why}; fix it with --dim {name}=N"
    ))
}

/// The largest value of a dim taken at run time when `--dim SYMBOL=..N` gives none.
pub const DEFAULT_DIM_BOUND: i64 = 512;

/// One dim taken at run time (`loops::dims::generalize`): the model lowered at its bound,
/// then at its probes, then at every value below them down to the least it is valid at
/// (`verified_least`), whose few failures get programs of their own (`fixed_programs`).
#[allow(clippy::too_many_arguments)]
pub(super) fn one_dim(
    model: &frontend::Model,
    dir: &DataDir,
    import: &ImportOptions,
    opts: &Options,
    emit: Option<Emit>,
    prefix: &str,
    name: &str,
    bound: i64,
) -> Result<Lowered> {
    with_retries(import, opts, true, |import, from| {
        one_dim_at(
            model, dir, import, opts, emit, prefix, name, bound, from, true,
        )
    })
}

/// `one_dim`, the dim taken in multiples of at least `from` (`grid`); `top`: the object's own
/// dim, not a sub-program's of two dims (`two_dims`): the import's warnings printed (once,
/// at the bound), and an empty cache taken (`only_appended`).
#[allow(clippy::too_many_arguments)]
fn one_dim_at(
    model: &frontend::Model,
    dir: &DataDir,
    import: &ImportOptions,
    opts: &Options,
    emit: Option<Emit>,
    prefix: &str,
    name: &str,
    bound: i64,
    from: i64,
    top: bool,
) -> Result<Lowered> {
    let name = name.to_string();
    // Lowered at each probe value from the model's least valid value, the bound
    // last (`loops::dims`); values count the dim's multiples (`Grid`).
    let Some(Grid {
        multiple,
        least,
        probes: sizes,
    }) = grid(model, dir, import, &name, bound, from)
    else {
        let least = least_value(model, dir, import, &name, bound);
        return Err(Error::NeedShape(format!(
            "dim '{name}' would be taken at run time, but the model is valid only \
             from {} to its bound {bound}: too few values to compile it for all of \
             them; raise the bound with --dim {name}=..N or fix it with --dim {name}=N",
            least.unwrap_or(1)
        )));
    };
    let bound = bound / multiple * multiple;
    // The decision value is lowered first: its convolutions' sizes choose their layouts
    // and kernel paths at every other value (`schedule::layout::ConvSizes`), the bound's
    // included, so that all take the same ones (when it fails to lower, the bound's
    // choose).
    let decide = Decide::default();
    let lower_at = |n: i64, dump: Option<Emit>, warn: bool| {
        let at = [(&name[..], multiple * n)];
        lower_probe(model, dir, import, opts, prefix, &at, &decide, dump, warn)
    };
    let lower_checked = |n: i64, dump: Option<Emit>, warn: bool| {
        lower_at(n, dump, warn).map_err(|e| match e {
            Error::Unsupported(_) | Error::Parse(_) | Error::Usage(_) => e,
            // What fails at the dim's least value too is not the bound's doing
            // (as `batch::import` reports it).
            e if !imports_at(model, dir, import, &name, 1) => e,
            e => Error::NeedShape(format!(
                "dim '{name}' is taken at run time up to {bound}, but at {} the \
                 model fails: {e}; give a smaller bound with --dim {name}=..N, or fix \
                 it with --dim {name}=N",
                multiple * n
            )),
        })
    };
    let (&bound_value, probes) = sizes.split_last().expect("probes");
    let low = probes.iter().copied().min().expect("probes");
    if let Ok(Lowered::Program(p)) = lower_at(decision_value(low, bound_value), None, false) {
        *decide.borrow_mut() = Some(p.conv_sizes.clone().into());
    }
    let at_bound = match lower_checked(bound_value, emit.filter(|&e| e != Emit::Loops), top)? {
        Lowered::Program(p) => p,
        dump => return Ok(dump),
    };
    if decide.borrow().is_none() {
        *decide.borrow_mut() = Some(at_bound.conv_sizes.clone().into());
    }
    let mut programs = Vec::new();
    for &n in probes {
        match lower_checked(n, None, false)? {
            Lowered::Program(p) => programs.push(p),
            dump => return Ok(dump),
        }
    }
    programs.push(at_bound);
    let refs: Vec<&Program> = programs.iter().collect();
    let lower_probe = |n| match lower_at(n, None, false) {
        Ok(Lowered::Program(p)) => Some(p),
        _ => None,
    };
    // The probes alone must be one program before the values below them are lowered (a
    // retry, `with_retries`, then comes without those lowerings).
    loops::dims::generalize(&name, low, &sizes, &refs).map_err(|why| not_one(&name, &why))?;
    let floor = least.unwrap_or(1);
    let (least, below) = verified_least(&name, floor, &sizes, &refs, lower_probe);
    let mut general =
        loops::dims::generalize(&name, least, &sizes, &refs).map_err(|why| not_one(&name, &why))?;
    if let Some(p) = below {
        let fixed = fixed_programs(&general, floor, p, lower_probe);
        if let Some(&Some(lo)) = fixed.first().and_then(|f| f.at.first()) {
            general.run_dims[0].least = lo;
        }
        general.fixed = fixed;
    }
    // A cache the outputs only append to (`past + 1`) may be empty: its program at 0.
    if top
        && general.run_dims[0].least == 1
        && multiple == 1
        && only_appended(&general)
        && let Some(p) = at_zero(|| lower_probe(0))
        && loops::dims::fixed_fits(&general, &[Some(0)], &p).is_ok()
    {
        general.fixed.insert(0, loops::Fixed::one(0, p));
        general.run_dims[0].least = 0;
    }
    general.run_dims[0].multiple = multiple;
    Ok(Lowered::Program(general))
}

/// Whether `program`'s outputs carry its one run-time dim only with rows appended
/// (`past + 1`: a KV cache a decoder step extends), and some output does: the dim may then
/// be 0, an empty cache on a decoder's first step (`with_empty_cache` for two dims).
fn only_appended(program: &Program) -> bool {
    let mut appended = false;
    for r in program
        .outputs
        .iter()
        .flat_map(|o| o.run_dims.iter().flatten())
    {
        match r {
            r if r.other.is_none() && r.mul == 1 && r.add > 0 && r.pre == 0 && r.div == 1 => {
                appended = true
            }
            _ => return false,
        }
    }
    appended
}
