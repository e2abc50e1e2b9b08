//! Shapes the graph declares for values (graph outputs, value_info), carried backwards
//! through ops whose input has their output's shape, and guessed for the operands of
//! broadcasting ops (`Importer::declared`, `Importer::guessed`).

use crate::ir::DType;
use onnxc_proto::GraphProto;
use std::collections::HashMap;

/// Default-domain ops whose first input has the shape of their output (elementwise unary
/// ops, casts, activations).
const SHAPE_PRESERVING: &[&str] = &[
    "Abs",
    "Acos",
    "Acosh",
    "Asin",
    "Asinh",
    "Atan",
    "Atanh",
    "Cast",
    "CastLike",
    "Ceil",
    "Celu",
    "Cos",
    "Cosh",
    "Elu",
    "Erf",
    "Exp",
    "Floor",
    "Gelu",
    "HardSigmoid",
    "HardSwish",
    "Identity",
    "IsInf",
    "IsNaN",
    "LeakyRelu",
    "Log",
    "Mish",
    "Neg",
    "Not",
    "Reciprocal",
    "Relu",
    "Round",
    "Selu",
    "Sigmoid",
    "Sign",
    "Sin",
    "Sinh",
    "Softplus",
    "Softsign",
    "Sqrt",
    "Tan",
    "Tanh",
    "ThresholdedRelu",
];

/// Default-domain elementwise ops whose output has the broadcast shape of their inputs.
const BROADCASTING: &[&str] = &[
    "Add",
    "And",
    "BitShift",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "Div",
    "Equal",
    "Greater",
    "GreaterOrEqual",
    "Less",
    "LessOrEqual",
    "Max",
    "Mean",
    "Min",
    "Mod",
    "Mul",
    "Or",
    "Pow",
    "PRelu",
    "Sub",
    "Sum",
    "Where",
    "Xor",
];

/// Extends the shapes a graph declares (`Importer::declared`) backwards. The operand of a
/// shape-preserving op has its result's shape (`declared`). Each operand of a broadcasting
/// op is guessed to have its result's shape (`guessed`: a broadcast operand is smaller).
/// Functions expanded into nodes (ReduceL2 as ReduceSum then Sqrt, the windows as Range then
/// Mul, Cos and Add) declare only their final output, which the op computing a run-time
/// shape needs. Builders whose output shape depends on run-time values read these shapes,
/// and check them when the model runs (`ONNXC_ERR_SHAPE`); a guess is read only where
/// the builder would otherwise refuse the node (`Ctx::declared_shape`), so it never
/// changes how a model that compiles without it is built. The element type is unused. A
/// shape the graph declares itself wins.
pub(super) fn declare_backwards(
    gp: &GraphProto,
    declared: &mut HashMap<String, (DType, Vec<i64>)>,
    guessed: &mut HashMap<String, Vec<i64>>,
) {
    for n in gp.node.iter().rev() {
        let default_domain = n
            .domain
            .as_deref()
            .is_none_or(|d| d.is_empty() || d == "ai.onnx");
        let op = n.op_type.as_deref().unwrap_or_default();
        let (operands, exact) = if !default_domain {
            continue;
        } else if SHAPE_PRESERVING.contains(&op) {
            (1, true)
        } else if BROADCASTING.contains(&op) {
            (n.input.len(), false)
        } else {
            continue;
        };
        let Some(out) = n.output.first() else {
            continue;
        };
        let (known, shape) = match (declared.get(out), guessed.get(out)) {
            (Some(d), _) => (Some(d.clone()), d.1.clone()),
            (None, Some(g)) => (None, g.clone()),
            (None, None) => continue,
        };
        for x in n.input.iter().take(operands).filter(|x| !x.is_empty()) {
            match &known {
                Some(d) if exact => {
                    declared.entry(x.clone()).or_insert_with(|| d.clone());
                }
                _ if !declared.contains_key(x) => {
                    guessed.entry(x.clone()).or_insert_with(|| shape.clone());
                }
                _ => {}
            }
        }
    }
}
