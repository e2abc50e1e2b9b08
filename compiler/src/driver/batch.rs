//! Imports a model whose inputs leave a leading dim symbolic as the program for one item of
//! a run-time batch (`passes::batch` decides whether the model allows it).

use crate::error::{Error, Result};
use crate::frontend::{self, ImportOptions, tensor::DataDir};
use crate::ir::Graph;
use crate::passes::{self, PassOptions, batch::Batched};
use onnxc_proto::ModelProto;
use onnxc_proto::tensor_shape_proto::dimension::Value as DimValue;

/// A symbolic dim of a runtime input that no `--shape`/`--dim` binds.
pub struct Unbound {
    pub symbol: String,
    pub input: String,
    pub axis: usize,
}

/// The input dims the options leave symbolic, named as the importer names them
/// (`dim_param`, or `INPUT:AXIS` for an unnamed one).
pub fn unbound_dims(
    m: &ModelProto,
    shapes: &[(String, Vec<i64>)],
    dims: &[(String, i64)],
) -> Vec<Unbound> {
    let Some(g) = m.graph.as_ref() else {
        return vec![];
    };
    let inits: std::collections::HashSet<&str> = g
        .initializer
        .iter()
        .filter_map(|t| t.name.as_deref())
        .collect();
    let mut out = Vec::new();
    for vi in &g.input {
        let name = vi.name.clone().unwrap_or_default();
        if inits.contains(name.as_str()) || shapes.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let Some(onnxc_proto::type_proto::Value::TensorType(tt)) =
            vi.r#type.as_ref().and_then(|t| t.value.as_ref())
        else {
            continue;
        };
        let Some(shape) = &tt.shape else { continue };
        for (k, d) in shape.dim.iter().enumerate() {
            let symbol = match &d.value {
                Some(DimValue::DimValue(v)) if *v >= 0 => continue,
                Some(DimValue::DimParam(p)) if !p.is_empty() => p.clone(),
                _ => format!("{name}:{k}"),
            };
            if dims.iter().any(|(s, _)| *s == symbol) {
                continue;
            }
            out.push(Unbound {
                symbol,
                input: name.clone(),
                axis: k,
            });
        }
    }
    out
}

/// Imports `model` as the program for one item of a run-time batch: every symbol of
/// `unbound` (all leading dims) is the batch size. Fails, saying why and what to fix, when
/// a symbol is not a leading dim or the model does not compute its items independently.
pub fn import(
    model: ModelProto,
    dir: &DataDir,
    base: &ImportOptions,
    unbound: &[Unbound],
) -> Result<(Graph, Batched)> {
    let list = || {
        let mut v: Vec<String> = unbound
            .iter()
            .map(|u| format!("'{}' (dim {} of input '{}')", u.symbol, u.axis, u.input))
            .collect();
        v.dedup();
        v.join(", ")
    };
    let fix = "fix them at compile time with --dim SYMBOL=N or --shape INPUT=D0,D1,…";
    if let Some(u) = unbound.iter().find(|u| u.axis != 0) {
        return Err(Error::NeedShape(format!(
            "symbolic dim '{}' (dim {} of input '{}') must be fixed at compile time: onnxc \
             compiles run-time dims only as a leading batch dim; {fix}",
            u.symbol, u.axis, u.input
        )));
    }
    let mut symbols: Vec<&str> = unbound.iter().map(|u| u.symbol.as_str()).collect();
    symbols.sort_unstable();
    symbols.dedup();
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
    let probe = |n: i64| -> Result<Graph> {
        let g = frontend::import_owned(model.clone(), dir, &at(n))
            .and_then(|mut g| passes::optimize(&mut g, &passes).map(|()| g))
            .map_err(|e| match e {
                // What is wrong with the model whatever its batch size is reported as is.
                Error::Unsupported(_) | Error::Parse(_) => e,
                e => Error::NeedShape(format!(
                    "the model's leading input dims {} are symbolic; onnxc runs them as a \
                     run-time batch when the model computes each item on its own, but at batch \
                     size {n} the model fails: {e}; {fix}",
                    list()
                )),
            })?;
        Ok(g)
    };
    let [p, q] = passes::batch::SIZES;
    let (a, b) = (probe(p)?, probe(q)?);
    let batched = passes::batch::check(&a, &b).map_err(|why| {
        Error::NeedShape(format!(
            "the model's leading input dims {} are symbolic, and onnxc runs them as a \
             run-time batch only when the model computes each item on its own, but {why}; {fix}",
            list()
        ))
    })?;
    if batched.outputs.contains(&true) && !batched.inputs.contains(&true) {
        return Err(Error::NeedShape(format!(
            "the model's leading input dims {} are symbolic, but no input carries them as a \
             batch; {fix}",
            list()
        )));
    }
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
    Ok((one, batched))
}
