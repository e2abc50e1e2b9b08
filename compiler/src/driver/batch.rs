//! Imports a model whose inputs leave a leading dim symbolic as the program for one item of
//! a run-time batch (`passes::batch` decides whether the model allows it).

use crate::error::{Error, Result};
use crate::frontend::{self, ImportOptions, tensor::DataDir};
use crate::frontend::{Model, Unbound};
use crate::ir::Graph;
use crate::passes::{self, PassOptions, batch::Batched};

/// Items of the chunk programs compiled beside the one-item program, largest first
/// (`loops::Chunk`): a run of `n` items takes chunks of 64 and 8 while as many are left.
pub const CHUNKS: [i64; 2] = [64, 8];

/// The most workspace bytes a chunk program may take (or the one-item program's, if that
/// is more): a chunk's activations are its items' together, and the model's workspace
/// covers every program (an MLP's chunk of 64 needs about 0.5 MB; a network of AlexNet's
/// size would need 200 MB).
pub const CHUNK_WORKSPACE: u64 = 16 << 20;

/// Multiply-adds per byte of weights below which one item's run streams the weights more
/// than it computes with them (a matrix-vector product does 1/4: one multiply-add per
/// 4-byte weight), so that running items together pays: a chunk of items shares the
/// weights' traffic. Convolutional networks and transformers do 35-90 per byte at batch 1
/// (their activations have many rows; AlexNet and ZFNet, with their large fully connected
/// layers, 2.8 and 4.5); MLPs, linear models, nearest neighbours and SVMs (their stored
/// points read by maps and reductions, which count no multiply-adds) and tree ensembles
/// (whose forest counts as weights, `KernelOp::table_bytes`) 1/4 or less.
const CHUNK_MACS_PER_BYTE: u64 = 4;

/// A run-time batch's one-item program graph, which inputs and outputs carry the batch,
/// and the graphs of its chunk programs (`CHUNKS` items each, largest first).
pub struct Imported {
    pub item: Graph,
    pub batched: Batched,
    pub chunks: Vec<(i64, Graph)>,
}

/// What to give to fix the symbolic dims `symbols` at compile time: `--dim NAME=N` for each
/// named one (the flags a user copies), `--shape` for those with no name (`INPUT:AXIS`).
fn fix_hint(symbols: &[&str]) -> String {
    let them = if symbols.len() > 1 { "them" } else { "it" };
    let flags: Vec<String> = (symbols.iter())
        .filter(|s| !s.contains(':'))
        .map(|s| format!("--dim {s}=N"))
        .collect();
    if flags.is_empty() {
        format!("fix {them} at compile time with --shape INPUT=D0,D1,…")
    } else {
        format!(
            "fix {them} at compile time with {} (or --shape INPUT=D0,D1,…)",
            flags.join(" ")
        )
    }
}

/// Imports `model` as the program for one item of a run-time batch: every symbol of
/// `unbound` (all leading dims) is the batch size; with `chunks`, also as the programs for
/// chunks of items when the model's items share their weights' traffic (`wants_chunks`).
/// Fails, saying why and what to fix, when a symbol is not a leading dim or the model does
/// not compute its items independently.
pub fn import(
    model: Model,
    dir: &DataDir,
    base: &ImportOptions,
    unbound: &[Unbound],
    chunks: bool,
) -> Result<Imported> {
    // "'N' (dim 0 of inputs 'x', 'y'), 'M' (dim 0 of input 'z')".
    let list = || {
        let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
        for u in unbound {
            match groups.iter_mut().find(|g| g.0 == u.symbol) {
                Some(g) => g.1.push(&u.input),
                None => groups.push((&u.symbol, vec![&u.input])),
            }
        }
        let text: Vec<String> = groups
            .iter()
            .map(|(s, ins)| {
                let names: Vec<String> = ins.iter().map(|n| format!("'{n}'")).collect();
                let plural = if ins.len() > 1 { "s" } else { "" };
                format!("'{s}' (dim 0 of input{plural} {})", names.join(", "))
            })
            .collect();
        text.join(", ")
    };
    if let Some(u) = unbound.iter().find(|u| u.axis != 0) {
        return Err(Error::NeedShape(format!(
            "symbolic dim '{}' (dim {} of input '{}') must be fixed at compile time: onnxc \
             compiles run-time dims only as a leading batch dim; {}",
            u.symbol,
            u.axis,
            u.input,
            fix_hint(&[&u.symbol])
        )));
    }
    let mut symbols: Vec<&str> = unbound.iter().map(|u| u.symbol.as_str()).collect();
    symbols.sort_unstable();
    symbols.dedup();
    let fix = fix_hint(&symbols);
    let at = |n: i64| {
        let mut o = base.clone();
        o.dim_values
            .extend(symbols.iter().map(|s| (s.to_string(), n)));
        o
    };
    let passes = PassOptions {
        optimize: false,
        fold_limit: base.fold_limit,
    };
    let import_at = |n: i64| -> Result<Graph> {
        frontend::import_owned(model.clone(), dir, &at(n))
            .and_then(|mut g| passes::optimize(&mut g, &passes).map(|()| g))
    };
    let probe = |n: i64| -> Result<Graph> {
        import_at(n).map_err(|e| match e {
            // What is wrong with the model or the command line whatever the batch size
            // is reported as is.
            Error::Unsupported(_) | Error::Parse(_) | Error::Usage(_) => e,
            // So is what fails at batch size 1 as well: fixing the batch would not help.
            // Its shapes have the probe's batch size, which the note names.
            e if import_at(1).is_err() => {
                // Other dims the import was given a value for (the run-time dims' probes,
                // --dim values): unnamed ones may be meant to equal these.
                let others: Vec<String> = (base.dim_values.iter())
                    .filter(|(s, _)| !symbols.contains(&s.as_str()))
                    .map(|(s, v)| format!("'{s}' as {v}"))
                    .collect();
                if others.is_empty() {
                    e.noted(&format!(
                        "the shapes take the symbolic leading dims {} as {n}; the model \
                         fails at batch size 1 too",
                        list()
                    ))
                } else {
                    e.noted(&format!(
                        "the shapes take the symbolic leading dims {} as {n}, and {}; the \
                         model fails at batch size 1 too: where these dims are meant to be \
                         one (unnamed dims are each a dim of their own), fix them at \
                         compile time with --shape INPUT=D0,D1,… or --dim NAME=N",
                        list(),
                        others.join(", ")
                    ))
                }
            }
            e => Error::NeedShape(format!(
                "the model's leading input dims {} are symbolic; onnxc runs them as a \
                 run-time batch when the model computes each item on its own, but at batch \
                 size {n} the model fails: {e}; {fix}",
                list()
            )),
        })
    };
    let [p, q] = passes::batch::SIZES;
    let (a, b) = (probe(p)?, probe(q)?);
    if b.outputs.iter().any(|o| o.dims_at.is_some()) {
        return Err(Error::NeedShape(format!(
            "the model's leading input dims {} are symbolic, but some of its outputs have \
             as many rows as the data selects (NonZero, NonMaxSuppression, Unique, a TopK, \
             Slice or Loop sized at run time), and \
             onnxc runs such a model on one batch size only; {fix}",
            list()
        )));
    }
    let batched = passes::batch::check(&a, &b).map_err(|why| {
        Error::NeedShape(format!(
            "the model's leading input dims {} are symbolic, and onnxc runs them as a \
             run-time batch only when the model computes each item on its own, but {why}; {fix}",
            list()
        ))
    })?;
    if let Some(o) = b
        .outputs
        .iter()
        .zip(&batched.outputs)
        .find(|(o, c)| **c && made_strings(&b, o.value))
    {
        return Err(Error::NeedShape(format!(
            "the model's leading input dims {} are symbolic, and output '{}' holds strings \
             the model makes (StringNormalizer, StringConcat, StringSplit, Tokenizer), which \
             a run-time batch would make item by item in one workspace, each over the last; \
             {fix}",
            list(),
            o.0.name
        )));
    }
    if batched.outputs.contains(&true) && !batched.inputs.contains(&true) {
        return Err(Error::NeedShape(format!(
            "the model's leading input dims {} are symbolic, but no input carries them as a \
             batch; {fix}",
            list()
        )));
    }
    // Chunk programs, where they pay; a size the model cannot be built at is left out.
    let chunk_graphs: Vec<(i64, Graph)> = if chunks && wants_chunks(&a, p) {
        CHUNKS
            .iter()
            .filter_map(|&c| {
                let g = frontend::import_owned(model.clone(), dir, &at(c)).ok()?;
                Some((c, g))
            })
            .collect()
    } else {
        Vec::new()
    };
    let one = frontend::import_owned(model, dir, &at(1))?;
    // The one-item program must have the batch programs' inputs and outputs.
    let item = |io: &crate::ir::graph::GraphIo, g: &Graph, carries: bool| {
        let t = g.value_type(io.value);
        let mut s = t.shape.clone();
        if carries {
            s[0] = crate::ir::Dim::Known(1);
        }
        (t.dtype, s, io.packed.is_some())
    };
    let consistent = |mine: &[crate::ir::graph::GraphIo],
                      theirs: &[crate::ir::graph::GraphIo],
                      flags: &[bool]| {
        mine.len() == theirs.len()
            && mine.iter().zip(theirs).zip(flags).all(|((x, y), &c)| {
                let (dx, sx, px) = item(x, &one, false);
                let (dy, sy, py) = item(y, &b, c);
                dx == dy && sx == sy && !px && !py && x.keys == y.keys
            })
    };
    if !consistent(&one.inputs, &b.inputs, &batched.inputs)
        || !consistent(&one.outputs, &b.outputs, &batched.outputs)
    {
        return Err(Error::NeedShape(format!(
            "the model's leading input dims {} are symbolic, but its inputs or outputs at batch \
             size 1 are not one item of those at other sizes (or are packed 4- or 2-bit \
             tensors); {fix}",
            list()
        )));
    }
    // A chunk program's inputs and outputs are `c` items of the one-item program's.
    let chunks = chunk_graphs
        .into_iter()
        .filter(|(_, g)| {
            consistent(&one.inputs, &g.inputs, &batched.inputs)
                && consistent(&one.outputs, &g.outputs, &batched.outputs)
        })
        .collect();
    Ok(Imported {
        item: one,
        batched,
        chunks,
    })
}

/// Whether a model's items share enough of their work that chunk programs pay: its
/// multiply-adds per item (`g` computes `items` of them) against the bytes of the constants
/// its ops read (weights, tables, support vectors) and of its kernels' tables, below
/// `CHUNK_MACS_PER_BYTE`.
fn wants_chunks(g: &Graph, items: i64) -> bool {
    use crate::ir::graph::Op;
    let mut consts = std::collections::HashSet::new();
    let mut weights: u64 = 0;
    for id in g.node_ids() {
        let n = g.node(id);
        match &n.op {
            Op::Const(_) => continue,
            Op::Kernel(k) => weights = weights.saturating_add(k.table_bytes()),
            _ => {}
        }
        for v in &n.inputs {
            if let Op::Const(t) = &g.node(v.node).op
                && consts.insert(v.node)
            {
                weights = weights.saturating_add(t.data.len() as u64);
            }
        }
    }
    let macs = crate::ir::cost::multiply_adds(g).unwrap_or(u64::MAX) / items.max(1) as u64;
    weights > 0 && macs < CHUNK_MACS_PER_BYTE.saturating_mul(weights)
}

/// Whether string value `v` may hold strings made while the model runs: made by a kernel
/// that asks for string space (`KernelOp::string_bytes`), or moved (mapped, reshaped,
/// gathered, concatenated) from such strings; a table's strings live in the object.
fn made_strings(g: &Graph, v: crate::ir::ValueId) -> bool {
    use crate::ir::graph::Op;
    use crate::kernels::Operand;
    let mut stack = vec![v];
    let mut seen = std::collections::HashSet::new();
    while let Some(v) = stack.pop() {
        if !seen.insert(v) || g.value_type(v).dtype != crate::ir::DType::Str {
            continue;
        }
        let node = g.node(v.node);
        if let Op::Kernel(k) = &node.op {
            let known = |v: &crate::ir::ValueId| {
                let t = g.value_type(*v);
                crate::ir::dim::known_dims(&t.shape).map(|s| (t.dtype, s))
            };
            let types: Option<Vec<_>> = node.inputs.iter().map(known).collect();
            let made = match (types, known(&v)) {
                (Some(ins), Some(out)) => {
                    let ops: Vec<Operand> = ins
                        .iter()
                        .map(|(dtype, shape)| Operand {
                            dtype: *dtype,
                            shape,
                            constant: false,
                        })
                        .collect();
                    let result = Operand {
                        dtype: out.0,
                        shape: &out.1,
                        constant: false,
                    };
                    k.string_bytes(&ops, result) > 0
                }
                _ => true,
            };
            if made {
                return true;
            }
            continue;
        }
        stack.extend(node.inputs.iter().copied());
    }
    false
}
