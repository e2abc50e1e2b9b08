//! ONNX-ML model errors: map inputs read by other operators than DictVectorizer and
//! CastMap, and tree ensembles whose structure no walk can finish.

use super::{compile_error, onnxc, stderr};
use onnxc_tests::model::{D, importing, model, node, save, value_info};
use onnxc_tests::scratch;

/// Maps: only DictVectorizer and CastMap may read a map input, CastMap's DENSE form and
/// unsupported key or value types are refused by name, and a map input compiles to an
/// `onnxc_map` parameter the header documents.
#[test]
fn map_inputs_are_read_only_by_the_map_operators() {
    use onnxc_proto::{OperatorSetIdProto, TypeProto, ValueInfoProto, type_proto};
    let d = scratch("map_inputs");
    let map_input = |key: i32, value: i32| ValueInfoProto {
        name: Some("m".into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::MapType(Box::new(type_proto::Map {
                key_type: Some(key),
                value_type: Some(Box::new(TypeProto {
                    value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                        elem_type: Some(value),
                        shape: None,
                    })),
                    ..Default::default()
                })),
            }))),
            ..Default::default()
        }),
        ..Default::default()
    };
    let ml = |mut n: onnxc_proto::NodeProto| {
        n.domain = Some("ai.onnx.ml".into());
        n
    };
    let build = |nodes, key, value| {
        let mut m = model(
            nodes,
            vec![map_input(key, value)],
            vec![value_info("y", 1, &[])],
            vec![],
            17,
        );
        m.opset_import.push(OperatorSetIdProto {
            domain: Some("ai.onnx.ml".into()),
            version: Some(1),
        });
        m
    };
    // A DictVectorizer over string keys compiles; the header says how to pass the map.
    let mut dv = ml(node("DictVectorizer", "dv", &["m"], &["y"]));
    dv.attribute.push(onnxc_proto::AttributeProto {
        name: Some("string_vocabulary".into()),
        r#type: Some(onnxc_proto::attribute_proto::AttributeType::Strings as i32),
        strings: vec![b"a".to_vec(), b"b".to_vec()],
        ..Default::default()
    });
    let ok = build(vec![dv.clone()], 8, 1);
    let p = d.join("dv.onnx");
    save(&ok, &p);
    let o = onnxc()
        .arg(&p)
        .arg("-o")
        .arg(d.join("dv.o"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let h = std::fs::read_to_string(d.join("dv.h")).unwrap();
    assert!(
        h.contains("a map of string keys to float32 values: pass a pointer to an onnxc_map"),
        "{h}"
    );
    // The same node over int64 keys: the vocabulary's kind must match the map's keys.
    compile_error(
        &d,
        "dv_keys",
        &build(vec![dv], 7, 1),
        &["'dv' (DictVectorizer, opset 1)", "map(int64, float32)"],
    );
    // Any other reader of the map is refused by name.
    compile_error(
        &d,
        "identity",
        &build(vec![node("Identity", "id", &["m"], &["y"])], 8, 1),
        &["node 'id'", "is a map", "DictVectorizer and CastMap"],
    );
    // CastMap's DENSE form (the default) has a width only the call knows.
    compile_error(
        &d,
        "dense",
        &build(vec![ml(node("CastMap", "cm", &["m"], &["y"]))], 7, 1),
        &["node 'cm': CastMap (domain ai.onnx.ml, opset 1)", "DENSE"],
    );
    // Keys of another integer type are not an onnxc_map.
    compile_error(
        &d,
        "int32_keys",
        &build(vec![ml(node("CastMap", "cm", &["m"], &["y"]))], 6, 1),
        &["graph input 'm' is a map of key type INT32"],
    );
}

/// A tree ensemble whose branches loop, or whose weights sit on a branch, is an error
/// naming the node and the attributes to check (the walk would never end, or would never
/// reach the weight).
#[test]
fn malformed_tree_ensembles_are_errors() {
    use onnxc_proto::{AttributeProto, NodeProto, attribute_proto::AttributeType};
    let d = scratch("trees");
    let ints = |name: &str, v: &[i64]| AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Ints as i32),
        ints: v.to_vec(),
        ..Default::default()
    };
    let floats = |name: &str, v: &[f32]| AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Floats as i32),
        floats: v.to_vec(),
        ..Default::default()
    };
    let modes = AttributeProto {
        name: Some("nodes_modes".into()),
        r#type: Some(AttributeType::Strings as i32),
        strings: ["BRANCH_LEQ", "LEAF", "LEAF"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect(),
        ..Default::default()
    };
    // One stump: node 0 splits feature 0 at 0.5 into leaves 1 and 2.
    let build = |trues: &[i64], target_nodes: &[i64]| {
        let n = NodeProto {
            domain: Some("ai.onnx.ml".into()),
            attribute: vec![
                AttributeProto {
                    name: Some("n_targets".into()),
                    r#type: Some(AttributeType::Int as i32),
                    i: Some(1),
                    ..Default::default()
                },
                ints("nodes_treeids", &[0, 0, 0]),
                ints("nodes_nodeids", &[0, 1, 2]),
                ints("nodes_featureids", &[0, 0, 0]),
                floats("nodes_values", &[0.5, 0.0, 0.0]),
                modes.clone(),
                ints("nodes_truenodeids", trues),
                ints("nodes_falsenodeids", &[2, 0, 0]),
                ints("target_treeids", &[0, 0]),
                ints("target_nodeids", target_nodes),
                ints("target_ids", &[0, 0]),
                floats("target_weights", &[1.0, 2.0]),
            ],
            ..node("TreeEnsembleRegressor", "forest", &["x"], &["y"])
        };
        importing(
            model(
                vec![n],
                vec![value_info("x", 1, &[D::N(3), D::N(2)])],
                vec![value_info("y", 1, &[D::N(3), D::N(1)])],
                vec![],
                17,
            ),
            "ai.onnx.ml",
            3,
        )
    };
    // The stump as given compiles.
    let ok = d.join("ok.onnx");
    save(&build(&[1, 0, 0], &[1, 2]), &ok);
    let o = onnxc()
        .arg(&ok)
        .arg("-o")
        .arg(d.join("ok.o"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    compile_error(
        &d,
        "cycle",
        &build(&[0, 0, 0], &[1, 2]),
        &[
            "'forest' (TreeEnsembleRegressor, opset 3)",
            "node 0 is its own descendant",
            "nodes_truenodeids",
        ],
    );
    compile_error(
        &d,
        "branch_weight",
        &build(&[1, 0, 0], &[0, 2]),
        &[
            "'forest'",
            "(tree 0, node 0), a branch (BRANCH_LEQ), not a leaf",
        ],
    );
    compile_error(
        &d,
        "missing_child",
        &build(&[7, 0, 0], &[1, 2]),
        &["'forest'", "true node 7, which tree 0 does not have"],
    );
}
