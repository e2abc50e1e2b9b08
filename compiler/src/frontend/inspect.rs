//! What a model holds, read from its protobuf without compiling it (`onnxc inspect`): its
//! inputs and outputs as declared (symbolic dims included), opsets, the operator histogram
//! (subgraphs included), parameter count, and the op types onnxc has no builder for.

use super::registry;
use crate::ir::DType;
use onnxc_proto::{GraphProto, ModelProto, type_proto};
use std::collections::BTreeMap;

/// A graph input or output as the model declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct Declared {
    pub name: String,
    /// The element type's name (`float32`, `string`, …), or the kind of a non-tensor type.
    pub ty: String,
    /// Dims as written: a number, a `dim_param` name, or `?` for an unnamed one; `None`
    /// when the model gives no shape.
    pub dims: Option<Vec<String>>,
    /// Declared `optional(T)`: `ty` and `dims` describe `T`.
    pub optional: bool,
}

/// The model's summary.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub ir_version: Option<i64>,
    pub producer: String,
    /// (domain, version), the default domain as "ai.onnx".
    pub opsets: Vec<(String, i64)>,
    pub inputs: Vec<Declared>,
    pub outputs: Vec<Declared>,
    /// Symbolic dim names of the inputs, in order of appearance.
    pub symbols: Vec<String>,
    /// Nodes by (domain, op type), subgraphs included; the default domain as "".
    pub ops: BTreeMap<(String, String), usize>,
    pub nodes: usize,
    pub initializers: usize,
    /// Elements in all initializers (subgraphs' included).
    pub parameters: u64,
    pub parameter_bytes: u64,
    /// Op types (domain, op type) with no builder in onnxc.
    pub unknown_ops: Vec<(String, String)>,
}

/// Summarizes `m` (never fails: what is missing or malformed shows as such).
pub fn summarize(m: &ModelProto) -> Summary {
    let mut s = Summary {
        ir_version: m.ir_version,
        producer: [m.producer_name.as_deref(), m.producer_version.as_deref()]
            .into_iter()
            .flatten()
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join(" "),
        ..Summary::default()
    };
    let mut opsets: Vec<(String, i64)> = super::opsets(m)
        .into_iter()
        .map(|(d, v)| (if d.is_empty() { "ai.onnx".into() } else { d }, v))
        .collect();
    opsets.sort();
    s.opsets = opsets;
    let Some(g) = &m.graph else {
        return s;
    };
    let inits: std::collections::HashSet<&str> = g
        .initializer
        .iter()
        .filter_map(|t| t.name.as_deref())
        .collect();
    for vi in &g.input {
        let name = vi.name.clone().unwrap_or_default();
        if !inits.contains(name.as_str()) {
            s.inputs.push(declared(vi, &mut s.symbols));
        }
    }
    let mut unused = Vec::new();
    s.outputs = g
        .output
        .iter()
        .map(|vi| declared(vi, &mut unused))
        .collect();
    count(g, &mut s);
    for (domain, op) in s.ops.keys() {
        let structural = domain.is_empty()
            && (matches!(op.as_str(), "If" | "Loop" | "Scan")
                || super::sequence::SEQUENCE_OPS.contains(&op.as_str()));
        if !structural && registry::lookup(domain, op).is_none() {
            s.unknown_ops.push((domain.clone(), op.clone()));
        }
    }
    s
}

/// Nodes, op types and initializers of `g` and its subgraphs, into `s`.
fn count(g: &GraphProto, s: &mut Summary) {
    for t in &g.initializer {
        s.initializers += 1;
        let n = t
            .dims
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(u64::try_from(d).ok()?))
            .unwrap_or(0);
        s.parameters = s.parameters.saturating_add(n);
        let size = t
            .data_type
            .and_then(DType::from_onnx)
            .map_or(0, |d| d.size() as u64);
        s.parameter_bytes = s.parameter_bytes.saturating_add(n.saturating_mul(size));
    }
    for n in &g.node {
        s.nodes += 1;
        let domain = match n.domain.as_deref().unwrap_or("") {
            "ai.onnx" => String::new(),
            d => d.to_string(),
        };
        *s.ops
            .entry((domain, n.op_type.clone().unwrap_or_default()))
            .or_insert(0) += 1;
        for a in &n.attribute {
            if let Some(sub) = &a.g {
                count(sub, s);
            }
            for sub in &a.graphs {
                count(sub, s);
            }
        }
    }
}

fn declared(vi: &onnxc_proto::ValueInfoProto, symbols: &mut Vec<String>) -> Declared {
    use onnxc_proto::tensor_shape_proto::dimension::Value;
    let name = vi.name.clone().unwrap_or_default();
    let (optional, ty) = super::io_types::unwrap_optional(vi);
    let (ty, shape) = match ty.and_then(|t| t.value.as_ref()) {
        Some(type_proto::Value::TensorType(t)) => {
            let code = t.elem_type.unwrap_or(0);
            let ty = DType::from_onnx(code).map_or(DType::onnx_code_name(code), |d| d.name());
            (ty.to_string(), t.shape.as_ref())
        }
        Some(type_proto::Value::SequenceType(_)) => ("sequence".into(), None),
        Some(type_proto::Value::MapType(_)) => ("map".into(), None),
        Some(type_proto::Value::OptionalType(_)) => ("optional".into(), None),
        Some(_) => ("non-tensor".into(), None),
        None => ("(no type)".into(), None),
    };
    let dims = shape.map(|sh| {
        sh.dim
            .iter()
            .map(|d| match &d.value {
                Some(Value::DimValue(v)) if *v >= 0 => v.to_string(),
                Some(Value::DimParam(p)) if super::is_named_dim(p) => {
                    if !symbols.contains(p) {
                        symbols.push(p.clone());
                    }
                    p.clone()
                }
                _ => "?".into(),
            })
            .collect()
    });
    Declared {
        name,
        ty,
        dims,
        optional,
    }
}
