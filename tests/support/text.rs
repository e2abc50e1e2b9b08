//! A line-based text form of small ONNX models, for tests that keep a model next to its
//! expected dumps (`tests/filetests`). One statement per line; `#` starts a comment.
//!
//! ```text
//! opset 17                              # default domain (17 when absent); `opset com.microsoft 1`
//! input x: float32[1, 8, N, 16]         # element type as onnxc names it; symbolic dims allowed
//! output y: float32[1, 8, N, 16]
//! init w: float32[8, 8, 3, 3] = random(1)       # uniform in [-1, 1), seeded
//! init v: float32[8] = random(2, 0.5, 1.5)      # uniform in [0.5, 1.5)
//! init b: float32[8] = fill(0.25)
//! init z: uint8[] = [120]               # a list of values, as many as the shape holds
//! c = Conv(x, w, b) {pads: [1, 1, 1, 1], group: 1}
//! lo, hi = Split(c) {axis: 1}           # several outputs
//! q = com.microsoft.QLinearSigmoid(…)   # an op of another domain
//! r = Resize(x, , scales)               # an empty name skips an optional input
//! ```
//!
//! A node is named after its first output. Attribute values: integers, floats (written with
//! a `.`, an exponent, `inf` or `nan`), strings in double quotes, and lists of either
//! number kind (a list with one float is a float list). Initializers of float16/bfloat16 are
//! not supported.

use onnxc::ir::DType;
use onnxc_proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto, attribute_proto::AttributeType,
    tensor_shape_proto::Dimension, tensor_shape_proto::dimension::Value as DimValue, type_proto,
};

/// Parses the text form; errors name the line.
pub fn parse_model(text: &str) -> Result<ModelProto, String> {
    let mut opsets: Vec<(String, i64)> = Vec::new();
    let mut g = GraphProto {
        name: Some("text".into()),
        ..Default::default()
    };
    for (k, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = |e: String| format!("line {}: {e}: {raw}", k + 1);
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "opset" => {
                let parts: Vec<&str> = rest.split_whitespace().collect();
                let (domain, v) = match parts[..] {
                    [v] => ("", v),
                    [d, v] => (d, v),
                    _ => return Err(at("expected `opset [DOMAIN] VERSION`".into())),
                };
                let v = v.parse().map_err(|_| at("bad opset version".into()))?;
                opsets.push((domain.to_string(), v));
            }
            "input" => g.input.push(typed_value(rest).map_err(at)?.0),
            "output" => g.output.push(typed_value(rest).map_err(at)?.0),
            "init" => g.initializer.push(initializer(rest).map_err(at)?),
            _ => g.node.push(node(line).map_err(at)?),
        }
    }
    if !opsets.iter().any(|(d, _)| d.is_empty()) {
        opsets.push((String::new(), 17));
    }
    Ok(ModelProto {
        ir_version: Some(8),
        opset_import: opsets
            .into_iter()
            .map(|(d, v)| OperatorSetIdProto {
                domain: Some(d),
                version: Some(v),
            })
            .collect(),
        graph: Some(g),
        ..Default::default()
    })
}

fn dtype(name: &str) -> Result<DType, String> {
    (1..=16)
        .filter_map(DType::from_onnx)
        .find(|d| d.name() == name)
        .ok_or_else(|| format!("unknown element type '{name}'"))
}

/// `NAME: TYPE[D0, D1, …]`: the value info, its type and its dims when all are numbers.
fn typed_value(s: &str) -> Result<(ValueInfoProto, DType, Option<Vec<i64>>), String> {
    let (name, ty) = s.split_once(':').ok_or("expected `NAME: TYPE[DIMS]`")?;
    let (elem, dims) = ty
        .trim()
        .strip_suffix(']')
        .and_then(|t| t.split_once('['))
        .ok_or("expected `TYPE[DIMS]`")?;
    let dt = dtype(elem.trim())?;
    let dims: Vec<&str> = dims
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect();
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d.parse::<i64>() {
                Ok(v) => DimValue::DimValue(v),
                Err(_) => DimValue::DimParam(d.to_string()),
            }),
            ..Default::default()
        })
        .collect();
    let vi = ValueInfoProto {
        name: Some(name.trim().into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(dt.onnx_code()),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    };
    let known = dims.iter().map(|d| d.parse::<i64>().ok()).collect();
    Ok((vi, dt, known))
}

/// `NAME: TYPE[DIMS] = VALUES`.
fn initializer(s: &str) -> Result<TensorProto, String> {
    let (decl, values) = s.split_once('=').ok_or("expected `= VALUES`")?;
    let (vi, dt, dims) = typed_value(decl)?;
    let dims = dims.ok_or("an initializer's dims must be numbers")?;
    if matches!(dt, DType::F16 | DType::BF16) {
        return Err("no float16/bfloat16 initializers in the text form".into());
    }
    let n: i64 = dims.iter().product();
    let values = values.trim();
    let call = |f: &str| {
        values
            .strip_prefix(f)
            .and_then(|r| r.strip_prefix('('))
            .and_then(|r| r.strip_suffix(')'))
            .map(|args| args.split(',').map(str::trim).collect::<Vec<_>>())
    };
    let vals: Vec<f64> = if let Some(args) = call("random") {
        let nums = args
            .iter()
            .map(|a| a.parse::<f64>().map_err(|_| format!("bad number '{a}'")))
            .collect::<Result<Vec<_>, _>>()?;
        let (seed, lo, hi) = match nums[..] {
            [s] => (s as u64, -1.0, 1.0),
            [s, lo, hi] => (s as u64, lo, hi),
            _ => return Err("expected random(SEED) or random(SEED, LO, HI)".into()),
        };
        // xorshift64: deterministic values with no pattern the kernels could align with.
        let mut state = 0x2545_f491_4f6c_dd1d ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let u = (state >> 40) as f64 / (1u64 << 24) as f64;
                let v = lo + (hi - lo) * u;
                if dt.is_float() { v } else { v.floor() }
            })
            .collect()
    } else if let Some(args) = call("fill") {
        let v = number(args.first().copied().unwrap_or(""))?;
        vec![v; n as usize]
    } else {
        let list = list(values)?;
        if list.len() as i64 != n {
            return Err(format!("{} values for {n} elements", list.len()));
        }
        list
    };
    let raw = vals
        .iter()
        .flat_map(|&v| match dt {
            DType::F32 => (v as f32).to_le_bytes().to_vec(),
            DType::F64 => v.to_le_bytes().to_vec(),
            DType::Bool => vec![(v != 0.0) as u8],
            _ => (v as i64).to_le_bytes()[..dt.size()].to_vec(),
        })
        .collect();
    Ok(TensorProto {
        name: vi.name,
        dims,
        data_type: Some(dt.onnx_code()),
        raw_data: Some(raw),
        ..Default::default()
    })
}

fn number(s: &str) -> Result<f64, String> {
    let s = s.trim();
    match s {
        "inf" => Ok(f64::INFINITY),
        "-inf" => Ok(f64::NEG_INFINITY),
        "nan" => Ok(f64::NAN),
        _ => s.parse().map_err(|_| format!("bad number '{s}'")),
    }
}

fn is_float_literal(s: &str) -> bool {
    let s = s.trim();
    s.contains(['.', 'e', 'E']) || s.ends_with("inf") || s == "nan"
}

/// `[a, b, …]` as numbers.
fn list(s: &str) -> Result<Vec<f64>, String> {
    let inner = s
        .trim()
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .ok_or_else(|| format!("expected a list, fill(V) or random(SEED): '{s}'"))?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(number)
        .collect()
}

/// `OUT[, OUT…] = [DOMAIN.]OP(IN, …) [{ATTRS}]`.
fn node(line: &str) -> Result<NodeProto, String> {
    let (outs, call) = line
        .split_once('=')
        .ok_or("expected `OUTPUTS = OP(INPUTS)`")?;
    let outputs: Vec<String> = outs.split(',').map(|o| o.trim().to_string()).collect();
    let (op, rest) = call.trim().split_once('(').ok_or("expected `OP(INPUTS)`")?;
    let (args, attrs) = rest.split_once(')').ok_or("unclosed input list")?;
    let inputs = if args.trim().is_empty() {
        vec![]
    } else {
        args.split(',').map(|a| a.trim().to_string()).collect()
    };
    let (domain, op_type) = op.trim().rsplit_once('.').unwrap_or(("", op.trim()));
    let mut n = NodeProto {
        op_type: Some(op_type.to_string()),
        domain: (!domain.is_empty()).then(|| domain.to_string()),
        name: outputs.first().cloned(),
        input: inputs,
        output: outputs,
        ..Default::default()
    };
    let attrs = attrs.trim();
    if !attrs.is_empty() {
        let body = attrs
            .strip_prefix('{')
            .and_then(|a| a.strip_suffix('}'))
            .ok_or("attributes go in `{name: value, …}`")?;
        for (name, value) in split_attrs(body)? {
            n.attribute.push(attribute(&name, &value)?);
        }
    }
    Ok(n)
}

/// Splits `a: 1, b: [1, 2], c: "x"` at top-level commas.
fn split_attrs(body: &str) -> Result<Vec<(String, String)>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut quoted, mut start) = (0, false, 0);
    for (i, c) in body.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '[' if !quoted => depth += 1,
            ']' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                parts.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&body[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (k, v) = p
                .split_once(':')
                .ok_or_else(|| format!("attribute '{p}': expected `name: value`"))?;
            Ok((k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

fn attribute(name: &str, value: &str) -> Result<AttributeProto, String> {
    let mut a = AttributeProto {
        name: Some(name.to_string()),
        ..Default::default()
    };
    if let Some(s) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        a.r#type = Some(AttributeType::String as i32);
        a.s = Some(s.as_bytes().to_vec());
    } else if value.starts_with('[') {
        let vals = list(value)?;
        let inner = &value[1..value.len() - 1];
        if inner.split(',').any(is_float_literal) {
            a.r#type = Some(AttributeType::Floats as i32);
            a.floats = vals.iter().map(|&v| v as f32).collect();
        } else {
            a.r#type = Some(AttributeType::Ints as i32);
            a.ints = vals.iter().map(|&v| v as i64).collect();
        }
    } else if is_float_literal(value) {
        a.r#type = Some(AttributeType::Float as i32);
        a.f = Some(number(value)? as f32);
    } else {
        a.r#type = Some(AttributeType::Int as i32);
        a.i = Some(
            value
                .parse()
                .map_err(|_| format!("attribute '{name}': bad value '{value}'"))?,
        );
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_statement_kind() {
        let m = parse_model(
            "opset 13\nopset com.microsoft 1\n\
             input x: float32[1, N, 4]   # a symbolic dim\n\
             output y: float32[1, N, 4]\n\
             init b: float32[4] = [0.5, -1, 2, -3]\n\
             init z: uint8[] = fill(120)\n\
             init w: float32[2, 2] = random(3, 0, 1)\n\
             s = Add(x, b)\n\
             lo, hi = Split(s) {axis: 2, split: [2, 2]}\n\
             y = com.microsoft.Foo(lo, , hi) {alpha: 0.5, mode: \"a, b\", f: [1.0, 2]}\n",
        )
        .unwrap();
        let g = m.graph.unwrap();
        assert_eq!(m.opset_import.len(), 2);
        assert_eq!(g.initializer[1].raw_data.as_deref(), Some(&[120u8][..]));
        let w: Vec<f32> = g.initializer[2]
            .raw_data
            .as_ref()
            .unwrap()
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert!(w.iter().all(|v| (0.0..1.0).contains(v)), "{w:?}");
        assert_eq!(g.node[1].output, ["lo", "hi"]);
        assert_eq!(g.node[1].attribute[1].ints, [2, 2]);
        let foo = &g.node[2];
        assert_eq!(foo.domain.as_deref(), Some("com.microsoft"));
        assert_eq!(foo.input, ["lo", "", "hi"]);
        assert_eq!(foo.attribute[0].f, Some(0.5));
        assert_eq!(foo.attribute[1].s.as_deref(), Some(&b"a, b"[..]));
        assert_eq!(foo.attribute[2].floats, [1.0, 2.0]);
        assert!(parse_model("init b: float32[3] = [1, 2]").is_err());
        assert!(parse_model("input x: float99[1]").is_err());
    }
}
