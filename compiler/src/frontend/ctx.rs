//! The builder context handed to each ONNX op builder: typed access to the node's operands
//! and attributes, and constructors for core nodes that infer nothing themselves but fold
//! constants as they go (so shape-computing subgraphs become constants that later builders
//! can read).

use super::tensor::{DataDir, tensor_from_proto};
use crate::error::{Error, Result};
use crate::ir::dim::{Dim, Shape, known_dims};
use crate::ir::expr::E;
use crate::ir::graph::{ConvOp, MapOp, MatMulOp, ReduceKind, ReduceOp};
use crate::ir::{DType, Graph, NodeId, Op, Origin, Tensor, TypeInfo, ValueId};
use onnxc_proto::{AttributeProto, GraphProto, NodeProto};

pub struct Ctx<'a> {
    pub g: &'a mut Graph,
    pub node: &'a NodeProto,
    pub origin: Origin,
    pub opset: i64,
    pub inputs: Vec<Option<ValueId>>,
    pub dir: &'a DataDir,
    pub fold_limit: usize,
    /// Static types the model declares for this node's outputs, when it does.
    pub declared: Vec<Option<(DType, Vec<i64>)>>,
    /// Shapes guessed for this node's outputs from the declared result of a broadcasting
    /// op they feed (`frontend::declared`); read only by `declared_shape`.
    pub guessed: Vec<Option<Vec<i64>>>,
    /// The import's notes on quantized values (QDQ groups, `ops::qdq`); none in helper
    /// contexts and subgraphs, which then build every node on its own.
    pub qdq: Option<&'a mut crate::frontend::ops::qdq::Notes>,
    /// String space per string made at run time (`ImportOptions::string_bytes`).
    pub string_bytes: u64,
    counter: usize,
}

/// Most nodes the imported graph may hold: a model past it (a 4096-iteration loop over a
/// large body) would take minutes to compile; 200,000 nodes take seconds.
pub const MAX_GRAPH_NODES: usize = 1 << 20;

impl<'a> Ctx<'a> {
    pub fn new(
        g: &'a mut Graph,
        node: &'a NodeProto,
        origin: Origin,
        opset: i64,
        inputs: Vec<Option<ValueId>>,
        dir: &'a DataDir,
        fold_limit: usize,
    ) -> Ctx<'a> {
        Ctx {
            g,
            node,
            origin,
            opset,
            inputs,
            dir,
            fold_limit,
            declared: Vec::new(),
            guessed: Vec::new(),
            qdq: None,
            string_bytes: crate::frontend::DEFAULT_STRING_BYTES,
            counter: 0,
        }
    }

    // ---- errors -------------------------------------------------------------------------

    /// A model error naming this node.
    pub fn err(&self, msg: impl std::fmt::Display) -> Error {
        Error::Model(format!("{}: {msg}", self.origin))
    }

    /// This node uses a feature onnxc does not implement.
    pub fn unsupported(&self, reason: impl Into<String>) -> Error {
        Error::Unsupported(vec![crate::error::Unsupported {
            node: self.origin.node_id(),
            op_type: self.origin.op_type.clone(),
            domain: self.node.domain.clone().unwrap_or_default(),
            opset: self.opset,
            reason: reason.into(),
        }])
    }

    // ---- operands -----------------------------------------------------------------------

    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }

    pub fn input(&self, i: usize) -> Result<ValueId> {
        self.opt_input(i)
            .ok_or_else(|| self.err(format!("input {i} is required but missing")))
    }

    /// Input `i`, a map input's descriptor (`ir::graph::MapInput`), with its types.
    pub fn map_input(&self, i: usize) -> Result<(ValueId, crate::ir::graph::MapInput)> {
        let v = self.input(i)?;
        match self.g.map_inputs.get(&v) {
            Some(m) => Ok((v, *m)),
            None => Err(self.err(format!(
                "input {i} is a tensor; this op takes a map (a graph input of type map)"
            ))),
        }
    }

    pub fn opt_input(&self, i: usize) -> Option<ValueId> {
        self.inputs.get(i).copied().flatten()
    }

    pub fn ty(&self, v: ValueId) -> TypeInfo {
        self.g.value_type(v).clone()
    }

    pub fn rank(&self, v: ValueId) -> usize {
        self.g.value_type(v).shape.len()
    }

    pub fn dtype(&self, v: ValueId) -> DType {
        self.g.value_type(v).dtype
    }

    pub fn shape(&self, v: ValueId) -> Shape {
        self.g.value_type(v).shape.clone()
    }

    /// The operand's dims as integers, or an error saying which input needs `--shape`.
    pub fn known_shape(&self, v: ValueId) -> Result<Vec<i64>> {
        let s = self.shape(v);
        known_dims(&s).ok_or_else(|| {
            Error::NeedShape(format!(
                "{}: needs the concrete shape of its operand, which is {}; fix the symbolic dims with --dim SYMBOL=N or --shape INPUT=D0,D1,…",
                self.origin,
                crate::ir::dim::fmt_shape(&s)
            ))
        })
    }

    pub fn konst(&self, v: ValueId) -> Option<Tensor> {
        self.g.const_value(v).cloned()
    }

    /// A constant operand as integers; `what` names it in the error.
    pub fn const_ints(&self, v: ValueId, what: &str) -> Result<Vec<i64>> {
        match self.g.const_value(v) {
            Some(t) if t.dtype.is_int() || t.dtype == DType::Bool => Ok(t.to_i64s()),
            Some(t) => Err(self.err(format!("{what} must be an integer tensor, got {}", t.dtype))),
            None => Err(self.unsupported(format!(
                "{what} is computed at run time; onnxc needs it to be a constant (an initializer, or computable from shapes)"
            ))),
        }
    }

    pub fn const_floats(&self, v: ValueId, what: &str) -> Result<Vec<f64>> {
        match self.g.const_value(v) {
            Some(t) => Ok(t.to_f64s()),
            None => Err(self.unsupported(format!(
                "{what} is computed at run time; onnxc needs it to be a constant"
            ))),
        }
    }

    // ---- attributes ---------------------------------------------------------------------

    pub fn attr(&self, name: &str) -> Option<&'a AttributeProto> {
        self.node
            .attribute
            .iter()
            .find(|a| a.name.as_deref() == Some(name))
    }

    pub fn attr_i(&self, name: &str) -> Result<Option<i64>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) => {
                a.i.map(Some)
                    .ok_or_else(|| self.err(format!("attribute '{name}' must be an int")))
            }
        }
    }

    pub fn attr_i_or(&self, name: &str, default: i64) -> Result<i64> {
        Ok(self.attr_i(name)?.unwrap_or(default))
    }

    /// An attribute naming a data type by its `TensorProto.DataType` code (Cast's `to`,
    /// EyeLike's `dtype`, …). A code that is no data type (0, UNDEFINED, or past the last
    /// one) is a model error naming the value; a data type onnxc has no element type for
    /// (the complex ones) is unsupported.
    pub fn attr_dtype(&self, name: &str) -> Result<Option<DType>> {
        let Some(code) = self.attr_i(name)? else {
            return Ok(None);
        };
        let last = crate::ir::dtype::LAST_ONNX_CODE;
        match i32::try_from(code) {
            Ok(c) if (1..=last).contains(&c) => DType::from_onnx(c).map(Some).ok_or_else(|| {
                self.unsupported(format!(
                    "attribute '{name}' is {code} ({}): onnxc has no {} tensors",
                    DType::onnx_code_name(c),
                    DType::onnx_code_name(c)
                ))
            }),
            _ => Err(self.err(format!(
                "attribute '{name}' is {code}, which is not an ONNX TensorProto data type \
                 (1 = FLOAT to {last} = {}); the model is invalid: set '{name}' to a data \
                 type's code",
                DType::onnx_code_name(last)
            ))),
        }
    }

    pub fn attr_f(&self, name: &str) -> Result<Option<f64>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) => {
                a.f.map(|v| Some(v as f64))
                    .ok_or_else(|| self.err(format!("attribute '{name}' must be a float")))
            }
        }
    }

    pub fn attr_f_or(&self, name: &str, default: f64) -> Result<f64> {
        Ok(self.attr_f(name)?.unwrap_or(default))
    }

    pub fn attr_ints(&self, name: &str) -> Option<Vec<i64>> {
        self.attr(name).map(|a| a.ints.clone())
    }

    pub fn attr_floats(&self, name: &str) -> Option<Vec<f32>> {
        self.attr(name).map(|a| a.floats.clone())
    }

    pub fn attr_s(&self, name: &str) -> Result<Option<String>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) => match &a.s {
                Some(s) => String::from_utf8(s.clone())
                    .map(Some)
                    .map_err(|_| self.err(format!("attribute '{name}' is not valid UTF-8"))),
                None => Err(self.err(format!("attribute '{name}' must be a string"))),
            },
        }
    }

    pub fn attr_s_or(&self, name: &str, default: &str) -> Result<String> {
        Ok(self.attr_s(name)?.unwrap_or_else(|| default.to_string()))
    }

    pub fn attr_strings(&self, name: &str) -> Option<Vec<String>> {
        self.attr(name).map(|a| {
            a.strings
                .iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
    }

    /// A tensor attribute of numbers or booleans (string tensors: `attr_string_tensor`).
    pub fn attr_t(&self, name: &str) -> Result<Option<Tensor>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) => match &a.t {
                Some(t) => {
                    let t = tensor_from_proto(
                        t,
                        self.dir,
                        &format!("{}, attribute '{name}'", self.origin),
                    )?;
                    if t.dtype == DType::Str {
                        return Err(self.unsupported(format!(
                            "attribute '{name}' is a string tensor; onnxc has no string \
                             constants (strings are run-time inputs and outputs, and the class \
                             labels and keys of ai.onnx.ml operators)"
                        )));
                    }
                    Ok(Some(t))
                }
                None => Err(self.err(format!("attribute '{name}' must be a tensor"))),
            },
        }
    }

    /// A tensor attribute that may hold strings: its type and, for strings, the elements
    /// (None for a numeric tensor, which `attr_t` reads).
    pub fn attr_string_tensor(&self, name: &str) -> Result<Option<Vec<String>>> {
        match self.attr(name).and_then(|a| a.t.as_ref()) {
            Some(t) if t.data_type == Some(8) => t
                .string_data
                .iter()
                .map(|s| {
                    String::from_utf8(s.clone()).map_err(|_| {
                        self.err(format!(
                            "attribute '{name}' holds a string that is not UTF-8"
                        ))
                    })
                })
                .collect::<Result<Vec<_>>>()
                .map(Some),
            _ => Ok(None),
        }
    }

    pub fn attr_g(&self, name: &str) -> Option<&'a GraphProto> {
        self.attr(name).and_then(|a| a.g.as_ref())
    }

    /// The statically declared shape of output `k`, or failing that a guessed one, needed
    /// when the output shape depends on run-time values (checked at run time by an
    /// assertion).
    pub fn declared_shape(&self, k: usize, why: &str) -> Result<Vec<i64>> {
        let declared = self.declared.get(k).cloned().flatten().map(|(_, s)| s);
        match declared.or_else(|| self.guessed.get(k).cloned().flatten()) {
            Some(s) => Ok(s),
            None => Err(self.unsupported(format!(
                "{why} is computed at run time and the model declares no static shape for output {k}; \
                 make it a constant (or declare the output shape in value_info)"
            ))),
        }
    }

    /// Is the operand a run-time value (not a constant)?
    pub fn is_runtime(&self, v: ValueId) -> bool {
        self.g.const_value(v).is_none()
    }

    // ---- building -----------------------------------------------------------------------

    /// Fails the run with `code` unless every element of the bool value `cond` is true.
    pub fn assert(&mut self, cond: ValueId, code: i32) -> Result<()> {
        let name = self.next_name();
        let id = self.g.add_node(
            name,
            Op::Assert { code },
            vec![cond],
            vec![TypeInfo::new(DType::Bool, vec![])],
            self.origin.clone(),
        );
        self.fold(id)?;
        if !matches!(self.g.node(id).op, Op::Const(_)) {
            self.g.asserts.push(id);
        }
        Ok(())
    }

    /// Builds `cond` (an expression over operands `inputs`, vars over `shape`) and asserts it.
    pub fn assert_expr(
        &mut self,
        shape: Vec<i64>,
        inputs: Vec<ValueId>,
        cond: E,
        code: i32,
    ) -> Result<()> {
        let shape: Shape = shape.iter().map(|&d| Dim::Known(d)).collect();
        let c = self.map(DType::Bool, shape, inputs, cond)?;
        self.assert(c, code)
    }

    /// Expressions must agree on types (codegen relies on it). A builder that reads one of
    /// the node's operands as the type of the others without checking gets here: the
    /// operand's type is reported as a model error; any other disagreement is a bug.
    fn check_types(&self, op: &Op, inputs: &[ValueId], out: &TypeInfo) -> Result<()> {
        use crate::ir::expr::{TypeError, check_types};
        // (expressions, the type the op's value must have, when it is an expression's)
        let (exprs, value): (Vec<&E>, Option<&E>) = match op {
            Op::Map(m) => (vec![&m.body], Some(&m.body)),
            Op::Reduce(r) => (
                vec![&r.body],
                (!matches!(
                    r.kind,
                    ReduceKind::ArgMax { .. } | ReduceKind::ArgMin { .. }
                ))
                .then_some(&r.body),
            ),
            Op::Scatter(s) => {
                let mut e: Vec<&E> = s.index.iter().collect();
                e.push(&s.value);
                (e, Some(&s.value))
            }
            _ => return Ok(()),
        };
        let types: Vec<DType> = inputs.iter().map(|&v| self.dtype(v)).collect();
        let mut err = exprs.iter().find_map(|e| check_types(e, &types).err());
        if err.is_none()
            && let Some(v) = value
            && v.dtype != out.dtype
        {
            err = Some(TypeError::Other(format!(
                "the expression is {}, the value {}",
                v.dtype, out.dtype
            )));
        }
        match err {
            None => Ok(()),
            Some(TypeError::Load {
                input,
                found,
                wanted,
            }) => {
                let v = inputs[input as usize];
                match self.inputs.iter().position(|&i| i == Some(v)) {
                    Some(k) => Err(self.err(format!(
                        "input {k} ('{}') is {found}, where the operator needs {wanted} (the type \
                         of its other operands); fix the model's types",
                        self.node
                            .input
                            .get(k)
                            .map(String::as_str)
                            .unwrap_or_default()
                    ))),
                    None => Err(Error::Internal(format!(
                        "{}: an intermediate value of type {found} is read as {wanted}",
                        self.origin
                    ))),
                }
            }
            Some(TypeError::Mixed(a, b)) => {
                // Operands of the node with differing types are the likely cause.
                let types: Vec<String> = self
                    .inputs
                    .iter()
                    .flatten()
                    .map(|&v| self.dtype(v).to_string())
                    .collect();
                let mut distinct = types.clone();
                distinct.sort();
                distinct.dedup();
                if distinct.len() > 1 {
                    Err(self.err(format!(
                        "its operands are {}: {a} and {b} meet in one operation, where the \
                         operator needs one type; fix the model's types",
                        types.join(", ")
                    )))
                } else {
                    Err(Error::Internal(format!(
                        "{}: {a} and {b} meet in one operation",
                        self.origin
                    )))
                }
            }
            Some(TypeError::Str) => Err(self.unsupported(
                "it computes on strings (orders, converts or combines them); onnxc moves \
                 string elements (Identity, Reshape, Gather, Concat, …), compares them for \
                 equality and maps them through the ai.onnx.ml operators' and \
                 TfIdfVectorizer's tables, nothing else",
            )),
            Some(TypeError::Other(m)) => Err(Error::Internal(format!(
                "{}: mistyped expression ({m})",
                self.origin
            ))),
        }
    }

    fn next_name(&mut self) -> String {
        self.counter += 1;
        if self.counter == 1 {
            self.origin.name.clone()
        } else {
            format!("{}#{}", self.origin.name, self.counter)
        }
    }

    /// Adds a node with one output and folds it if its operands are constant. Its shape is
    /// held to the limits (`ir::dim::check_shape`) first: every shape a builder infers
    /// comes through here.
    pub fn add(&mut self, op: Op, inputs: Vec<ValueId>, out: TypeInfo) -> Result<ValueId> {
        crate::ir::dim::check_shape(&out.shape).map_err(|m| self.err(m))?;
        if self.g.node_count() >= MAX_GRAPH_NODES {
            return Err(self.err(format!(
                "the model builds more than {MAX_GRAPH_NODES} (2^20) graph nodes (unrolled \
                 loops and recurrent layers count once per iteration), more than onnxc \
                 compiles in one model"
            )));
        }
        self.check_types(&op, &inputs, &out)?;
        let name = self.next_name();
        let id = self
            .g
            .add_node(name, op, inputs, vec![out], self.origin.clone());
        self.fold(id)?;
        Ok(id.out(0))
    }

    fn fold(&mut self, id: NodeId) -> Result<()> {
        match crate::passes::fold::fold_node(self.g, id, self.fold_limit) {
            Ok(_) => Ok(()),
            Err(e) => Err(self.err(e)),
        }
    }

    pub fn constant(&mut self, t: Tensor) -> ValueId {
        let ty = TypeInfo::new(t.dtype, t.shape.iter().map(|&d| Dim::Known(d)).collect());
        let name = self.next_name();
        self.g
            .add_node(name, Op::Const(t), vec![], vec![ty], self.origin.clone())
            .out(0)
    }

    pub fn map(
        &mut self,
        dtype: DType,
        shape: Shape,
        inputs: Vec<ValueId>,
        body: E,
    ) -> Result<ValueId> {
        debug_assert_eq!(body.dtype, dtype, "map body type");
        self.add(Op::Map(MapOp { body }), inputs, TypeInfo::new(dtype, shape))
    }

    pub fn reduce(
        &mut self,
        kind: ReduceKind,
        extents: Vec<i64>,
        dtype: DType,
        shape: Shape,
        inputs: Vec<ValueId>,
        body: E,
    ) -> Result<ValueId> {
        self.add(
            Op::Reduce(ReduceOp {
                kind,
                extents,
                body,
            }),
            inputs,
            TypeInfo::new(dtype, shape),
        )
    }

    /// A view with a new shape; elements keep their row-major order.
    pub fn reshape(&mut self, v: ValueId, shape: Shape) -> Result<ValueId> {
        if self.shape(v) == shape {
            return Ok(v);
        }
        let dtype = self.dtype(v);
        self.add(Op::Reshape, vec![v], TypeInfo::new(dtype, shape))
    }

    pub fn matmul(
        &mut self,
        m: MatMulOp,
        a: ValueId,
        b: ValueId,
        out: TypeInfo,
    ) -> Result<ValueId> {
        let (ta, tb) = (self.dtype(a), self.dtype(b));
        if ta != tb {
            return Err(self.err(format!(
                "the matrix product's operands are {ta} and {tb}; they must have the same type"
            )));
        }
        self.add(Op::MatMul(m), vec![a, b], out)
    }

    pub fn conv(&mut self, c: ConvOp, inputs: Vec<ValueId>, out: TypeInfo) -> Result<ValueId> {
        // Float convolutions run in the runtime's kernels, whose geometry holds at most
        // MAX_SPATIAL spatial dims inline.
        let max = onnxc_runtime::conv::MAX_SPATIAL;
        if out.dtype == DType::F32 && c.strides.len() > max {
            return Err(self.err(format!(
                "a convolution over {} spatial dims; onnxc supports 1 to {max}",
                c.strides.len()
            )));
        }
        for (k, &v) in inputs.iter().enumerate().skip(1) {
            if self.dtype(v) != out.dtype {
                return Err(self.err(format!(
                    "the convolution's operand {k} is {}, its input {}; they must have the same type",
                    self.dtype(v),
                    out.dtype
                )));
            }
        }
        self.add(Op::Conv(c), inputs, out)
    }
}
