//! Building small ONNX models in tests without Python.

use onnxc_proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto, attribute_proto::AttributeType,
    tensor_shape_proto::Dimension, tensor_shape_proto::dimension::Value as DimValue, type_proto,
};
use prost::Message;

/// A dim in a value_info: a number or a symbol.
#[derive(Clone)]
pub enum D {
    N(i64),
    S(&'static str),
}

pub fn value_info(name: &str, elem: i32, dims: &[D]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                D::N(v) => DimValue::DimValue(*v),
                D::S(s) => DimValue::DimParam(s.to_string()),
            }),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(name.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

pub fn with_ints(mut n: NodeProto, name: &str, v: &[i64]) -> NodeProto {
    n.attribute.push(AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Ints as i32),
        ints: v.to_vec(),
        ..Default::default()
    });
    n
}

/// `n` with a graph attribute (an If branch, a Loop or Scan body).
pub fn with_graph(mut n: NodeProto, name: &str, g: GraphProto) -> NodeProto {
    n.attribute.push(AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Graph as i32),
        g: Some(g),
        ..Default::default()
    });
    n
}

/// `n` with an int attribute.
pub fn with_int(mut n: NodeProto, name: &str, v: i64) -> NodeProto {
    n.attribute.push(AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(v),
        ..Default::default()
    });
    n
}

/// `n` with a tensor attribute (ConstantOfShape's value, a Constant).
pub fn with_tensor(mut n: NodeProto, name: &str, t: TensorProto) -> NodeProto {
    n.attribute.push(AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Tensor as i32),
        t: Some(t),
        ..Default::default()
    });
    n
}

/// `n` with a string attribute.
pub fn with_str(mut n: NodeProto, name: &str, v: &str) -> NodeProto {
    n.attribute.push(AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::String as i32),
        s: Some(v.as_bytes().to_vec()),
        ..Default::default()
    });
    n
}

/// A subgraph (If branch, Loop or Scan body).
pub fn graph(
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
) -> GraphProto {
    GraphProto {
        name: Some("body".into()),
        node: nodes,
        input: inputs,
        output: outputs,
        ..Default::default()
    }
}

/// An int64 tensor, or a bool one with `data_type` 9 (one byte per value).
pub fn int_tensor(name: &str, data_type: i32, dims: &[i64], vals: &[i64]) -> TensorProto {
    // Element size by ONNX type code: uint8/int8/bool 1, (u)int16 2, (u)int32 4, else 8.
    let size = match data_type {
        2 | 3 | 9 => 1,
        4 | 5 => 2,
        6 | 12 => 4,
        _ => 8,
    };
    let raw = vals
        .iter()
        .flat_map(|v| v.to_le_bytes()[..size].to_vec())
        .collect();
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(data_type),
        raw_data: Some(raw),
        ..Default::default()
    }
}

pub fn f32_tensor(name: &str, dims: &[i64], vals: &[f32]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(1),
        raw_data: Some(vals.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ..Default::default()
    }
}

pub fn str_tensor(name: &str, dims: &[i64], vals: &[&str]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(8),
        string_data: vals.iter().map(|v| v.as_bytes().to_vec()).collect(),
        ..Default::default()
    }
}

pub fn model(
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
    inits: Vec<TensorProto>,
    opset: i64,
) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }],
        graph: Some(GraphProto {
            name: Some("test".into()),
            node: nodes,
            input: inputs,
            output: outputs,
            initializer: inits,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `m` also importing version `version` of `domain` (a contrib or preview op set).
pub fn importing(mut m: ModelProto, domain: &str, version: i64) -> ModelProto {
    m.opset_import.push(OperatorSetIdProto {
        domain: Some(domain.into()),
        version: Some(version),
    });
    m
}

pub fn save(m: &ModelProto, path: &std::path::Path) {
    std::fs::write(path, m.encode_to_vec()).expect("write model");
}

/// Serializes a tensor file (ONNX test-data format).
pub fn save_tensor(t: &TensorProto, path: &std::path::Path) {
    std::fs::write(path, t.encode_to_vec()).expect("write tensor");
}

/// A value_info of type `sequence(tensor(elem))`, its tensors of shape `dims`.
pub fn sequence_info(name: &str, elem: i32, dims: &[D]) -> ValueInfoProto {
    let t = value_info(name, elem, dims).r#type;
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::SequenceType(Box::new(
                type_proto::Sequence {
                    elem_type: t.map(Box::new),
                },
            ))),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A value_info of type `sequence(map(key, tensor(float)))`: a ZipMap output.
pub fn map_sequence_info(name: &str, key: i32) -> ValueInfoProto {
    let float = value_info(name, 1, &[]).r#type.map(Box::new);
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::SequenceType(Box::new(
                type_proto::Sequence {
                    elem_type: Some(Box::new(TypeProto {
                        value: Some(type_proto::Value::MapType(Box::new(type_proto::Map {
                            key_type: Some(key),
                            value_type: float,
                        }))),
                        ..Default::default()
                    })),
                },
            ))),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `v` declared `optional(T)` instead of `T`.
pub fn optional_info(v: ValueInfoProto) -> ValueInfoProto {
    ValueInfoProto {
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::OptionalType(Box::new(
                type_proto::Optional {
                    elem_type: v.r#type.map(Box::new),
                },
            ))),
            ..Default::default()
        }),
        ..v
    }
}

/// Serializes a sequence of tensors (ONNX test-data format).
pub fn save_sequence(name: &str, items: Vec<TensorProto>, path: &std::path::Path) {
    let s = onnxc_proto::SequenceProto {
        name: Some(name.into()),
        elem_type: Some(1),
        tensor_values: items,
        ..Default::default()
    };
    std::fs::write(path, s.encode_to_vec()).expect("write sequence");
}

/// Serializes an optional tensor, empty when `t` is None (ONNX test-data format).
pub fn save_optional(name: &str, t: Option<TensorProto>, path: &std::path::Path) {
    let o = onnxc_proto::OptionalProto {
        name: Some(name.into()),
        elem_type: Some(if t.is_some() { 1 } else { 0 }),
        tensor_value: t,
        ..Default::default()
    };
    std::fs::write(path, o.encode_to_vec()).expect("write optional");
}
