//! The types of graph inputs and outputs as the model declares them: tensor types with
//! their dims (symbolic ones named by `dim_param`, or `INPUT:AXIS` when unnamed), map
//! inputs, the packed dims of 4- and 2-bit values, and the dims the options leave unbound.

use crate::error::{Error, Result, Unsupported};
use crate::ir::DType;
use crate::ir::dim::Dim;
use onnxc_proto::{ModelProto, TypeProto, ValueInfoProto, type_proto};
use std::collections::HashSet;

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
    // Every runtime input's symbolic dims, as the importer names them (a sum of others,
    // `derived_dim`, is bound with them).
    let standalone = standalone_symbols(g);
    let mut all: Vec<(String, Unbound)> = Vec::new();
    for (name, dims_of) in runtime_input_dims(g) {
        let name = name.to_string();
        for (k, d) in dims_of.iter().enumerate() {
            let symbol = match &d.value {
                Some(onnxc_proto::tensor_shape_proto::dimension::Value::DimValue(v)) if *v >= 0 => {
                    continue;
                }
                Some(onnxc_proto::tensor_shape_proto::dimension::Value::DimParam(p))
                    if derived_dim(p, &standalone).is_some() =>
                {
                    continue;
                }
                Some(onnxc_proto::tensor_shape_proto::dimension::Value::DimParam(p))
                    if is_named_dim(p) =>
                {
                    p.clone()
                }
                _ => format!("{name}:{k}"),
            };
            all.push((
                name.clone(),
                Unbound {
                    symbol,
                    input: name.clone(),
                    axis: k,
                },
            ));
        }
    }
    // Bound: by --dim, and by a --shape of an input that uses the symbol.
    let shaped = |input: &str| shapes.iter().any(|(n, _)| n == input);
    let bound = |u: &Unbound| {
        dims.iter().any(|(s, _)| *s == u.symbol)
            || all.iter().any(|(i, v)| shaped(i) && v.symbol == u.symbol)
    };
    all.iter()
        .filter(|(input, u)| !shaped(input) && !bound(u))
        .map(|(_, u)| Unbound {
            symbol: u.symbol.clone(),
            input: u.input.clone(),
            axis: u.axis,
        })
        .collect()
}

/// Names `to` every dim of the top-level graph's inputs, outputs and value_infos named
/// `from` (a symbol found to be a sum of others, written as that sum: `derived_dim`).
pub fn rename_dim(m: &mut ModelProto, from: &str, to: &str) {
    use onnxc_proto::tensor_shape_proto::dimension::Value;
    let Some(g) = m.graph.as_mut() else {
        return;
    };
    let infos = (g.input.iter_mut())
        .chain(g.output.iter_mut())
        .chain(g.value_info.iter_mut());
    for vi in infos {
        let Some(type_proto::Value::TensorType(t)) =
            vi.r#type.as_mut().and_then(|t| t.value.as_mut())
        else {
            continue;
        };
        for d in t.shape.iter_mut().flat_map(|s| s.dim.iter_mut()) {
            if let Some(Value::DimParam(p)) = &mut d.value
                && p == from
            {
                *p = to.to_string();
            }
        }
    }
}

/// Refuses a runtime input dim declared with a negative dim_value other than -1 that the
/// options leave unbound. Exporters write -1 for an unknown size, which onnxc takes as
/// symbolic (`tensor_type_of`), as onnxruntime does; any other negative value is no
/// convention, and taken as symbolic it showed only as the probe sizes of a run-time batch.
/// Bound by `--shape` or `--dim INPUT:AXIS=N`, its value no longer matters.
pub fn check_negative_dims(
    m: &ModelProto,
    shapes: &[(String, Vec<i64>)],
    dims: &[(String, i64)],
) -> Result<()> {
    let Some(g) = m.graph.as_ref() else {
        return Ok(());
    };
    for (name, dims_of) in runtime_input_dims(g) {
        if shapes.iter().any(|(n, _)| n == name) {
            continue;
        }
        for (k, d) in dims_of.iter().enumerate() {
            if let Some(onnxc_proto::tensor_shape_proto::dimension::Value::DimValue(v)) = d.value
                && v < -1
                && !dims.iter().any(|(s, _)| *s == format!("{name}:{k}"))
            {
                return Err(Error::Model(format!(
                    "graph input '{name}' declares dim {k} as {v}, which is no size (a \
                     dim_value is at least 0; exporters write -1 for an unknown size, which \
                     onnxc takes as symbolic, as onnxruntime does); set dim {k} in the model, \
                     or give it at compile time with --dim {name}:{k}=N or --shape \
                     {name}=D0,D1,…"
                )));
            }
        }
    }
    Ok(())
}

/// The named symbols the runtime inputs of `g` declare as whole dims (not sums:
/// `derived_dim`).
pub(crate) fn standalone_symbols(g: &onnxc_proto::GraphProto) -> HashSet<String> {
    let mut out = HashSet::new();
    for (_, dims) in runtime_input_dims(g) {
        for d in dims {
            if let Some(onnxc_proto::tensor_shape_proto::dimension::Value::DimParam(p)) = &d.value
                && is_named_dim(p)
                && sum_terms(p).is_none()
            {
                out.insert(p.clone());
            }
        }
    }
    out
}

/// Each runtime input of `g` (not an initializer) that declares a tensor shape: its name
/// and declared dims.
fn runtime_input_dims(
    g: &onnxc_proto::GraphProto,
) -> impl Iterator<Item = (&str, &[onnxc_proto::tensor_shape_proto::Dimension])> {
    let inits: HashSet<&str> = g
        .initializer
        .iter()
        .filter_map(|t| t.name.as_deref())
        .collect();
    g.input.iter().filter_map(move |vi| {
        let name = vi.name.as_deref().unwrap_or_default();
        let Some(type_proto::Value::TensorType(tt)) =
            vi.r#type.as_ref().and_then(|t| t.value.as_ref())
        else {
            return None;
        };
        let shape = tt.shape.as_ref()?;
        (!inits.contains(name)).then_some((name, &shape.dim[..]))
    })
}

/// The terms of a `dim_param` written as a sum (`past_sequence_length + sequence_length`,
/// `past + 1`, `total - 1`, as exporters name the dims of a KV cache): each a symbol or an
/// integer, with its sign. None for a name of one term.
fn sum_terms(p: &str) -> Option<Vec<(bool, &str)>> {
    let mut terms = Vec::new();
    let mut rest = p;
    let mut negative = false;
    loop {
        let cut = rest.find(['+', '-']).filter(|&i| {
            // A sign between spaces or after a term (not a name's own hyphen: `seq-len`).
            rest[i..].starts_with('+') || (i > 0 && rest[..i].ends_with(' '))
        });
        let (term, next) = match cut {
            Some(i) => (
                &rest[..i],
                Some((rest[i..].starts_with('-'), &rest[i + 1..])),
            ),
            None => (rest, None),
        };
        let term = term.trim();
        let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
        if term.is_empty() || !term.chars().all(word) {
            return None;
        }
        terms.push((negative, term));
        match next {
            Some((neg, r)) => (negative, rest) = (neg, r),
            None => break,
        }
    }
    (terms.len() > 1).then_some(terms)
}

/// The dim a `dim_param` written as a sum of `standalone` symbols and integers stands for
/// (`past + seq` is the sum of dims `past` and `seq`), None for any other name: a sum
/// whose symbols the inputs do not declare on their own stays a symbol of its own.
pub(crate) fn derived_dim(p: &str, standalone: &HashSet<String>) -> Option<Dim> {
    let terms = sum_terms(p)?;
    let mut dim = Dim::Known(0);
    let mut symbols = 0;
    for (negative, t) in terms {
        let d = match t.parse::<i64>() {
            Ok(v) => Dim::Known(v),
            Err(_) if standalone.contains(t) => {
                symbols += 1;
                Dim::sym(t)
            }
            Err(_) => return None,
        };
        dim = if negative { dim.sub(d) } else { dim.add(d) };
    }
    (symbols > 0).then_some(dim)
}

/// `shape` with each dim named as a sum of `standalone` symbols made that sum
/// (`derived_dim`).
pub(crate) fn with_sums(shape: Vec<Dim>, standalone: &HashSet<String>) -> Vec<Dim> {
    shape
        .into_iter()
        .map(|d| {
            let mut names = Vec::new();
            d.symbols(&mut names);
            match names.as_slice() {
                [p] if d == Dim::sym(p.as_str()) => derived_dim(p, standalone).unwrap_or(d),
                _ => d,
            }
        })
        .collect()
}

/// Whether a `dim_param` names a symbol. An empty name or `?` (as PaddlePaddle writes an
/// unknown dim) is an unknown of its own, like a dim with no value: two of them need not
/// agree.
pub(crate) fn is_named_dim(p: &str) -> bool {
    !p.is_empty() && p != "?"
}

/// The key and value types of a graph input of type map(K, V), None for other types.
/// onnxc takes int64 or string keys and float, double, int64 or string values (the maps
/// DictVectorizer and CastMap read).
pub(super) fn map_type(v: &ValueInfoProto) -> Result<Option<crate::ir::graph::MapInput>> {
    let Some(type_proto::Value::MapType(m)) = v.r#type.as_ref().and_then(|t| t.value.as_ref())
    else {
        return Ok(None);
    };
    let name = v.name.clone().unwrap_or_default();
    let value = match m.value_type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(type_proto::Value::TensorType(tt)) => DType::from_onnx(tt.elem_type.unwrap_or(0)),
        _ => None,
    };
    let key = DType::from_onnx(m.key_type.unwrap_or(0));
    match (key, value) {
        (
            Some(key @ (DType::I64 | DType::Str)),
            Some(value @ (DType::F32 | DType::F64 | DType::I64 | DType::Str)),
        ) => Ok(Some(crate::ir::graph::MapInput { key, value })),
        _ => Err(Error::Unsupported(vec![Unsupported {
            node: name.clone(),
            op_type: "graph input of type a map".into(),
            domain: String::new(),
            opset: 0,
            reason: format!(
                "graph input '{name}' is a map of key type {} to {}; onnxc takes maps of int64 or \
                 string keys to float, double, int64 or string values",
                DType::onnx_code_name(m.key_type.unwrap_or(0)),
                match m.value_type.as_ref().and_then(|t| t.value.as_ref()) {
                    Some(type_proto::Value::TensorType(tt)) =>
                        DType::onnx_code_name(tt.elem_type.unwrap_or(0)).to_string(),
                    _ => "a non-tensor type".to_string(),
                }
            ),
        }])),
    }
}

/// Whether a value_info declares an optional, and the type it holds (the declared type
/// itself for any other).
pub(super) fn unwrap_optional(v: &ValueInfoProto) -> (bool, Option<&TypeProto>) {
    let ty = v.r#type.as_ref();
    match ty.and_then(|t| t.value.as_ref()) {
        Some(type_proto::Value::OptionalType(o)) => (true, o.elem_type.as_deref()),
        _ => (false, ty),
    }
}

/// For a sequence type: its elements' tensor type (dims as `tensor_type` gives them; none
/// when the model declares no element shape). `None` for any other type.
pub(super) fn sequence_type(
    name: &str,
    ty: Option<&TypeProto>,
    what: &str,
) -> Result<Option<(DType, Option<Vec<Dim>>)>> {
    let Some(type_proto::Value::SequenceType(s)) = ty.and_then(|t| t.value.as_ref()) else {
        return Ok(None);
    };
    let elem = s.elem_type.as_deref();
    let Some(type_proto::Value::TensorType(tt)) = elem.and_then(|t| t.value.as_ref()) else {
        return Err(Error::Unsupported(vec![Unsupported {
            node: name.to_string(),
            op_type: format!("{what} of type a sequence of non-tensors"),
            domain: String::new(),
            opset: 0,
            reason: format!(
                "{what} '{name}' is a sequence of sequences, maps or optionals; onnxc takes \
                 sequences of tensors"
            ),
        }]));
    };
    if tt.shape.is_some() {
        let (dtype, dims) = tensor_type_of(name, elem, what)?;
        return Ok(Some((dtype, Some(dims))));
    }
    let code = tt.elem_type.unwrap_or(0);
    let dtype = DType::from_onnx(code).ok_or_else(|| {
        Error::Model(format!(
            "{what} '{name}': sequence element type {} is not supported",
            DType::onnx_code_name(code)
        ))
    })?;
    Ok(Some((dtype, None)))
}

/// The tensor type of a value_info, or an error naming it.
pub(super) fn tensor_type(v: &ValueInfoProto, what: &str) -> Result<(DType, Vec<Dim>)> {
    let name = v.name.clone().unwrap_or_default();
    tensor_type_of(&name, v.r#type.as_ref(), what)
}

/// The element type `v` declares, when it is a tensor of a type onnxc has (None for no
/// type, UNDEFINED, or a non-tensor type: `tensor_type` reports those).
pub(super) fn declared_elem_type(v: &ValueInfoProto) -> Option<DType> {
    match v.r#type.as_ref()?.value.as_ref()? {
        type_proto::Value::TensorType(tt) => DType::from_onnx(tt.elem_type?),
        _ => None,
    }
}

/// A declared type as a tensor type, or an error naming the value.
pub(super) fn tensor_type_of(
    name: &str,
    ty: Option<&TypeProto>,
    what: &str,
) -> Result<(DType, Vec<Dim>)> {
    let name = name.to_string();
    let tt = match ty.and_then(|t| t.value.as_ref()) {
        Some(type_proto::Value::TensorType(tt)) => tt,
        Some(other) => {
            let kind = match other {
                type_proto::Value::SequenceType(_) => "a sequence",
                type_proto::Value::MapType(_) => "a map",
                type_proto::Value::OptionalType(_) => "an optional",
                type_proto::Value::SparseTensorType(_) => "a sparse tensor",
                _ => "a non-tensor type",
            };
            return Err(Error::Unsupported(vec![Unsupported {
                node: name.clone(),
                op_type: format!("{what} of type {kind}"),
                domain: String::new(),
                opset: 0,
                reason: format!(
                    "{what} '{name}' is {kind}; onnxc compiles tensor inputs and outputs only"
                ),
            }]));
        }
        None => return Err(Error::Model(format!("{what} '{name}' has no type"))),
    };
    let code = tt.elem_type.unwrap_or(0);
    let dtype = DType::from_onnx(code).ok_or_else(|| {
        Error::Unsupported(vec![Unsupported {
            node: name.clone(),
            op_type: format!("{what} of type {}", DType::onnx_code_name(code)),
            domain: String::new(),
            opset: 0,
            reason: format!(
                "element type {} is not supported",
                DType::onnx_code_name(code)
            ),
        }])
    })?;
    let shape = match &tt.shape {
        None => {
            return Err(Error::NeedShape(format!(
                "{what} '{name}' has no shape (not even a rank); give it one with --shape {name}=D0,D1,…"
            )));
        }
        Some(s) => s
            .dim
            .iter()
            .enumerate()
            .map(|(k, d)| match &d.value {
                Some(onnxc_proto::tensor_shape_proto::dimension::Value::DimValue(v)) if *v >= 0 => {
                    Dim::Known(*v)
                }
                Some(onnxc_proto::tensor_shape_proto::dimension::Value::DimParam(p))
                    if is_named_dim(p) =>
                {
                    Dim::sym(p.clone())
                }
                _ => Dim::sym(format!("{name}:{k}")),
            })
            .collect(),
    };
    Ok((dtype, shape))
}

/// The fixed dims of a graph input or output of a 4- or 2-bit type, which the ABI passes
/// packed (its byte count must be known when the model is compiled).
pub(super) fn packed_dims(name: &str, what: &str, shape: &[Dim]) -> Result<Vec<i64>> {
    crate::ir::dim::known_dims(shape).ok_or_else(|| {
        Error::Model(format!(
            "graph {what} '{name}' of a 4- or 2-bit type has symbolic dims {}: its packed \
             bytes need fixed dims (fix the inputs' symbolic dims with --shape or --dim)",
            crate::ir::dim::fmt_shape(shape)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_named_as_sums_of_other_dims_are_those_sums() {
        let standalone: HashSet<String> = ["past", "seq", "past_sequence_length"]
            .map(String::from)
            .into();
        let sum = |p: &str| derived_dim(p, &standalone);
        let (past, seq) = (Dim::sym("past"), Dim::sym("seq"));
        assert_eq!(sum("past + seq"), Some(past.clone().add(seq.clone())));
        assert_eq!(sum("past+1"), Some(past.clone().add(1)));
        assert_eq!(sum("past - 1"), Some(past.clone().sub(1)));
        assert_eq!(
            sum("past_sequence_length + 1"),
            Some(Dim::sym("past_sequence_length").add(1))
        );
        // Not sums of the inputs' own dims: a symbol no input declares alone, one term, a
        // name's hyphen, no symbol at all, other operators.
        for p in [
            "past + total",
            "past",
            "seq-len",
            "1 + 2",
            "past * 2",
            "past + ",
            "",
        ] {
            assert_eq!(sum(p), None, "{p}");
        }
    }
}
