//! Sequences at compile time. With static shapes and constant positions, an ONNX sequence is
//! a list of tensor values the importer keeps next to its tensor scope (`Importer::seqs`):
//! SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceErase and SplitToSequence build
//! lists, SequenceAt and ConcatFromSequence read them back as ordinary values, SequenceLength
//! is a constant and SequenceMap unrolls its body per element. Nothing of a sequence exists
//! in the generated code: a sequence graph input or output is one ABI tensor per element
//! (`--sequence` fixes an input's; `ir::graph::IoGroup` records the grouping). Subgraphs
//! take and give them as `subgraph::Val`: Loop-carried (while the trip is known at compile
//! time), through model functions and If. A position computed at run time, or a sequence
//! through Scan, is reported as unsupported.

use super::Importer;
use super::ctx::Ctx;
use crate::error::{Error, Result};
use crate::ir::dim::shape_from;
use crate::ir::expr::{self, E};
use crate::ir::{DType, Op, Origin, Tensor, TypeInfo, ValueId};
use onnxc_proto::NodeProto;

/// A sequence value: its element type and its tensors, in order.
#[derive(Clone, Debug)]
pub(super) struct Seq {
    pub elem: DType,
    pub items: Vec<ValueId>,
}

/// The sequence ops the importer builds itself.
pub(super) const SEQUENCE_OPS: &[&str] = &[
    "SequenceEmpty",
    "SequenceConstruct",
    "SequenceInsert",
    "SequenceAt",
    "SequenceErase",
    "SequenceLength",
    "SplitToSequence",
    "ConcatFromSequence",
    "SequenceMap",
];

/// Most tensors a sequence graph input may have (each is an ABI input of its own), as many
/// as a Loop unrolls iterations: 20,000 took 9 s to compile.
const MAX_SEQUENCE_INPUTS: usize = super::subgraph::MAX_ITERATIONS;

impl Importer<'_> {
    /// The element shapes `--sequence` gives a sequence graph input, checked against the
    /// element type the model declares (`declared`: its dims, when it gives a shape).
    pub(super) fn sequence_shapes(
        &self,
        name: &str,
        declared: &Option<Vec<crate::ir::Dim>>,
    ) -> Result<Vec<Vec<i64>>> {
        let Some((_, shapes)) = self.opts.sequences.iter().find(|(n, _)| n == name) else {
            return Err(Error::NeedShape(format!(
                "graph input '{name}' is a sequence; onnxc fixes its length and its tensors' \
                 shapes at compile time: give them with --sequence {name}=[D0,D1,…][D0,D1,…]… \
                 (one bracket per tensor; --sequence {name}= for an empty sequence)"
            )));
        };
        if shapes.len() > MAX_SEQUENCE_INPUTS {
            return Err(Error::Usage(format!(
                "sequence input '{name}' has {} tensors; onnxc takes at most \
                 {MAX_SEQUENCE_INPUTS} (each is an input of its own)",
                shapes.len()
            )));
        }
        for (k, dims) in shapes.iter().enumerate() {
            if let Some(d) = declared {
                if d.len() != dims.len() {
                    return Err(Error::Usage(format!(
                        "--sequence {name}: tensor {k} has rank {}, the model declares its \
                         tensors {}",
                        dims.len(),
                        crate::ir::dim::fmt_shape(d)
                    )));
                }
                if let Some((a, (x, _))) = d
                    .iter()
                    .zip(dims)
                    .enumerate()
                    .find(|(_, (x, v))| x.known().is_some_and(|x| x != **v))
                {
                    return Err(Error::Usage(format!(
                        "--sequence {name}: tensor {k} has {} in dim {a}, fixed to {} by the model",
                        dims[a],
                        x.known().unwrap_or_default()
                    )));
                }
            }
            crate::ir::dim::check_size(dims)
                .map_err(|m| Error::Usage(format!("--sequence {name}: tensor {k}: {m}")))?;
        }
        Ok(shapes.clone())
    }

    fn seq_err(&self, origin: &Origin, msg: impl std::fmt::Display) -> Error {
        Error::Model(format!("{origin}: {msg}"))
    }

    /// Input `k` of `n` as a sequence.
    fn seq_input(&self, n: &NodeProto, origin: &Origin, k: usize) -> Result<Seq> {
        let name = n.input.get(k).map(String::as_str).unwrap_or_default();
        if let Some(s) = self.seqs.get(name) {
            return Ok(s.clone());
        }
        Err(self.seq_err(
            origin,
            format!("input {k} ('{name}') must be a sequence; it is a tensor or undefined"),
        ))
    }

    /// Input `k` of `n` as a tensor (None when omitted).
    fn tensor_input(&self, n: &NodeProto, origin: &Origin, k: usize) -> Result<Option<ValueId>> {
        match n.input.get(k).filter(|s| !s.is_empty()) {
            None => Ok(None),
            Some(name) => match self.env.get(name) {
                Some(&v) => Ok(Some(v)),
                None if self.seqs.contains_key(name) => Err(self.seq_err(
                    origin,
                    format!("input {k} ('{name}') is a sequence; a tensor is expected here"),
                )),
                None => Err(self.seq_err(origin, format!("input {k} ('{name}') is not defined"))),
            },
        }
    }

    /// A constant position operand (one integer), or `None` when omitted.
    fn position(&self, n: &NodeProto, origin: &Origin, k: usize) -> Result<Option<i64>> {
        let Some(v) = self.tensor_input(n, origin, k)? else {
            return Ok(None);
        };
        match self.g.const_value(v) {
            Some(t) if t.len() == 1 && (t.dtype.is_int()) => Ok(Some(t.get(0).as_i64())),
            Some(t) => Err(self.seq_err(
                origin,
                format!(
                    "the position must be one integer, it is {} of {} values",
                    t.dtype,
                    t.len()
                ),
            )),
            None => Err(self.unsupported_node(
                n,
                origin,
                "the position is computed at run time; onnxc keeps sequences at compile time and \
                 needs constant positions",
            )),
        }
    }

    /// Binds output `k` of `n` to a sequence.
    pub(super) fn define_seq(
        &mut self,
        n: &NodeProto,
        origin: &Origin,
        k: usize,
        s: Seq,
    ) -> Result<()> {
        let Some(name) = n.output.get(k).filter(|s| !s.is_empty()) else {
            return Ok(());
        };
        if !self.bind_local(name) {
            return Err(self.seq_err(
                origin,
                format!("writes '{name}', which this graph already defines; every ONNX value is assigned once"),
            ));
        }
        self.seqs.insert(name.clone(), s);
        Ok(())
    }

    /// Identity, Optional and OptionalGetElement of a sequence: the sequence itself (an
    /// optional is what it holds); OptionalHasElement of one: true.
    pub(super) fn sequence_passthrough(
        &mut self,
        n: &NodeProto,
        origin: &Origin,
        seq: Seq,
    ) -> Result<()> {
        if origin.op_type == "OptionalHasElement" {
            let t = Tensor::scalar(DType::Bool, crate::ir::Scalar::B(true));
            let v = self.helper_ctx(n, origin).constant(t);
            return self.bind_outputs(n, origin, &[v]);
        }
        self.define_seq(n, origin, 0, seq)
    }

    /// SequenceMap: `body` imported once per element (as Loop bodies are unrolled, within
    /// the same limits), each sequence operand giving its element and each tensor operand
    /// itself; output `j` is the sequence of the copies' outputs `j`.
    fn sequence_map(&mut self, n: &NodeProto, origin: &Origin) -> Result<()> {
        let body = Self::graph_attr(n, origin, "body")?;
        let first = self.seq_input(n, origin, 0)?;
        let len = first.items.len();
        let mut operands: Vec<std::result::Result<Seq, Option<ValueId>>> = vec![Ok(first)];
        for k in 1..n.input.len() {
            let name = n.input[k].as_str();
            if self.seqs.contains_key(name) {
                let s = self.seq_input(n, origin, k)?;
                if s.items.len() != len {
                    return Err(self.seq_err(
                        origin,
                        format!(
                            "input {k} ('{name}') has {} tensors, input 0 has {len}; the \
                             sequences SequenceMap reads must have one length",
                            s.items.len()
                        ),
                    ));
                }
                operands.push(Ok(s));
            } else {
                operands.push(Err(self.tensor_input(n, origin, k)?));
            }
        }
        let mut outs: Vec<Vec<ValueId>> = vec![Vec::new(); n.output.len()];
        for i in 0..len {
            self.count_iteration(n, origin, body, i + 1)?;
            let args = operands
                .iter()
                .map(|o| match o {
                    Ok(s) => Ok(s.items[i]),
                    Err(Some(v)) => Ok(*v),
                    Err(None) => Err(self.seq_err(origin, "an omitted input has no value")),
                })
                .collect::<Result<Vec<ValueId>>>()?;
            let res = self.inline_body(body, &args, origin, "body")?;
            if res.len() != outs.len() {
                return Err(self.seq_err(
                    origin,
                    format!(
                        "the body has {} outputs, the node {}",
                        res.len(),
                        outs.len()
                    ),
                ));
            }
            for (o, v) in outs.iter_mut().zip(res) {
                o.push(v);
            }
        }
        for (j, items) in outs.into_iter().enumerate() {
            // An empty sequence takes the element type its body output declares.
            let elem = match items.first() {
                Some(&v) => self.g.value_type(v).dtype,
                None => body
                    .output
                    .get(j)
                    .and_then(|o| super::io_types::tensor_type(o, "body output").ok())
                    .map_or(DType::F32, |(d, _)| d),
            };
            self.define_seq(n, origin, j, Seq { elem, items })?;
        }
        Ok(())
    }

    pub(super) fn sequence_op(&mut self, n: &NodeProto, origin: &Origin) -> Result<()> {
        let attr_i = |name: &str| {
            n.attribute
                .iter()
                .find(|a| a.name.as_deref() == Some(name))
                .and_then(|a| a.i)
        };
        // A position in [-len, len] (insert) or [-len, len) (at, erase), normalized.
        let place = |p: i64, len: usize, inclusive: bool| -> Option<usize> {
            let len = len as i64;
            let q = if p < 0 { p + len } else { p };
            let hi = if inclusive { len } else { len - 1 };
            (0..=hi).contains(&q).then_some(q as usize)
        };
        match origin.op_type.as_str() {
            "SequenceEmpty" => {
                let code = attr_i("dtype").unwrap_or(1) as i32;
                let elem = DType::from_onnx(code).ok_or_else(|| {
                    self.unsupported_node(
                        n,
                        origin,
                        format!(
                            "element type {} is not supported",
                            DType::onnx_code_name(code)
                        ),
                    )
                })?;
                self.define_seq(
                    n,
                    origin,
                    0,
                    Seq {
                        elem,
                        items: vec![],
                    },
                )
            }
            "SequenceConstruct" => {
                let mut items = Vec::new();
                for k in 0..n.input.len() {
                    let v = self
                        .tensor_input(n, origin, k)?
                        .ok_or_else(|| self.seq_err(origin, format!("input {k} is empty")))?;
                    items.push(v);
                }
                let Some(&first) = items.first() else {
                    return Err(self.seq_err(origin, "needs at least one input"));
                };
                let elem = self.g.value_type(first).dtype;
                if let Some(&v) = items.iter().find(|&&v| self.g.value_type(v).dtype != elem) {
                    return Err(self.seq_err(
                        origin,
                        format!(
                            "its inputs have different types ({elem} and {})",
                            self.g.value_type(v).dtype
                        ),
                    ));
                }
                self.define_seq(n, origin, 0, Seq { elem, items })
            }
            "SequenceInsert" => {
                let mut s = self.seq_input(n, origin, 0)?;
                let v = self
                    .tensor_input(n, origin, 1)?
                    .ok_or_else(|| self.seq_err(origin, "input 1 (the tensor) is required"))?;
                let dt = self.g.value_type(v).dtype;
                if dt != s.elem {
                    return Err(self.seq_err(
                        origin,
                        format!("inserts a {dt} tensor into a sequence of {}", s.elem),
                    ));
                }
                let at = match self.position(n, origin, 2)? {
                    None => s.items.len(),
                    Some(p) => place(p, s.items.len(), true).ok_or_else(|| {
                        self.seq_err(
                            origin,
                            format!(
                                "position {p} is outside a sequence of {} tensors",
                                s.items.len()
                            ),
                        )
                    })?,
                };
                s.items.insert(at, v);
                self.define_seq(n, origin, 0, s)
            }
            "SequenceErase" => {
                let mut s = self.seq_input(n, origin, 0)?;
                let at = match self.position(n, origin, 1)? {
                    None if s.items.is_empty() => None,
                    None => Some(s.items.len() - 1),
                    Some(p) => place(p, s.items.len(), false),
                }
                .ok_or_else(|| {
                    self.seq_err(
                        origin,
                        format!("no tensor to erase in a sequence of {}", s.items.len()),
                    )
                })?;
                s.items.remove(at);
                self.define_seq(n, origin, 0, s)
            }
            "SequenceAt" => {
                let s = self.seq_input(n, origin, 0)?;
                let p = self
                    .position(n, origin, 1)?
                    .ok_or_else(|| self.seq_err(origin, "input 1 (the position) is required"))?;
                let at = place(p, s.items.len(), false).ok_or_else(|| {
                    self.seq_err(
                        origin,
                        format!(
                            "position {p} is outside a sequence of {} tensors",
                            s.items.len()
                        ),
                    )
                })?;
                self.bind_outputs(n, origin, &[s.items[at]])
            }
            "SequenceLength" => {
                let s = self.seq_input(n, origin, 0)?;
                let t = Tensor::from_i64s(vec![], &[s.items.len() as i64]);
                let v = self.helper_ctx(n, origin).constant(t);
                self.bind_outputs(n, origin, &[v])
            }
            "ConcatFromSequence" => {
                let s = self.seq_input(n, origin, 0)?;
                let new_axis = attr_i("new_axis").unwrap_or(0) != 0;
                let axis = attr_i("axis")
                    .ok_or_else(|| self.seq_err(origin, "attribute 'axis' (an int) is required"))?;
                if s.items.is_empty() {
                    return Err(self.seq_err(
                        origin,
                        "the sequence is empty; there is nothing to concatenate",
                    ));
                }
                let v = {
                    let items = s.items.clone();
                    let mut ctx = self.helper_ctx(n, origin);
                    concat_items(&mut ctx, &items, axis, new_axis)?
                };
                self.bind_outputs(n, origin, &[v])
            }
            "SplitToSequence" => {
                let x = self
                    .tensor_input(n, origin, 0)?
                    .ok_or_else(|| self.seq_err(origin, "input 0 is required"))?;
                let split = match self.tensor_input(n, origin, 1)? {
                    None => None,
                    Some(v) => match self.g.const_value(v) {
                        Some(t) if t.dtype.is_int() => Some((t.shape.len(), t.to_i64s())),
                        Some(t) => {
                            return Err(self.seq_err(
                                origin,
                                format!("split must be integers, it is {}", t.dtype),
                            ));
                        }
                        None => {
                            return Err(self.unsupported_node(
                                n,
                                origin,
                                "split is computed at run time; onnxc needs the pieces' sizes at compile time",
                            ));
                        }
                    },
                };
                let axis = attr_i("axis").unwrap_or(0);
                let keepdims = attr_i("keepdims").unwrap_or(1) != 0;
                let elem = self.g.value_type(x).dtype;
                let items = {
                    let mut ctx = self.helper_ctx(n, origin);
                    split_items(&mut ctx, x, split, axis, keepdims)?
                };
                self.define_seq(n, origin, 0, Seq { elem, items })
            }
            "SequenceMap" => self.sequence_map(n, origin),
            other => Err(Error::Internal(format!(
                "{origin}: {other} is not a sequence op"
            ))),
        }
    }
}

/// The tensors concatenated along `axis`, or stacked along a new one.
fn concat_items(ctx: &mut Ctx, items: &[ValueId], axis: i64, new_axis: bool) -> Result<ValueId> {
    let shape = ctx.known_shape(items[0])?;
    let dt = ctx.dtype(items[0]);
    let rank = shape.len() as i64 + i64::from(new_axis);
    let a = if axis < 0 { axis + rank } else { axis };
    if a < 0 || a >= rank {
        return Err(ctx.err(format!("axis {axis} is out of range for rank {rank}")));
    }
    let a = a as usize;
    let mut parts = Vec::with_capacity(items.len());
    let mut total = 0;
    for &v in items {
        let mut s = ctx.known_shape(v)?;
        if ctx.dtype(v) != dt {
            return Err(ctx.err("the sequence's tensors have different types"));
        }
        if new_axis {
            s.insert(a, 1);
        }
        let mut expect = shape.clone();
        if new_axis {
            expect.insert(a, 1);
        }
        if s.len() != expect.len()
            || s.iter()
                .zip(&expect)
                .enumerate()
                .any(|(k, (x, y))| k != a && x != y)
        {
            return Err(ctx.err(format!(
                "the sequence's tensors have shapes {shape:?} and {:?}; they must agree except along axis {a}",
                ctx.known_shape(v)?
            )));
        }
        total += s[a];
        parts.push(ctx.reshape(v, shape_from(&s))?);
    }
    if parts.len() == 1 {
        return Ok(parts[0]);
    }
    let mut out = shape.clone();
    if new_axis {
        out.insert(a, total);
    } else {
        out[a] = total;
    }
    ctx.add(
        Op::Concat { axis: a },
        parts,
        TypeInfo::new(dt, shape_from(&out)),
    )
}

/// Most items SplitToSequence makes (a sequence is a compile-time list of values).
const MAX_SPLIT_PIECES: usize = 4096;

/// `x` cut along `axis` into pieces: of one element each (without `split`; the axis dropped
/// unless `keepdims`), of a scalar `split`'s size (the last one shorter), or of the listed
/// sizes.
fn split_items(
    ctx: &mut Ctx,
    x: ValueId,
    split: Option<(usize, Vec<i64>)>,
    axis: i64,
    keepdims: bool,
) -> Result<Vec<ValueId>> {
    let xs = ctx.known_shape(x)?;
    let r = xs.len() as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r {
        return Err(ctx.err(format!("axis {axis} is out of range for rank {r}")));
    }
    let a = a as usize;
    let len = xs[a];
    // The number of pieces, checked before any list of them is built (an axis declared
    // 2^40 long would otherwise allocate terabytes).
    let pieces = match &split {
        None => len,
        Some((0, v)) if v[0] >= 1 => len / v[0] + (len % v[0] != 0) as i64,
        Some((0, _)) => 0,
        Some((_, v)) => v.len() as i64,
    };
    if pieces > MAX_SPLIT_PIECES as i64 {
        return Err(ctx.unsupported(format!(
            "{pieces} pieces; onnxc splits into at most {MAX_SPLIT_PIECES}"
        )));
    }
    let (sizes, squeeze): (Vec<i64>, bool) = match split {
        None => (vec![1; len as usize], !keepdims),
        Some((0, v)) => {
            let c = v[0];
            if c < 1 {
                return Err(ctx.err(format!("split is {c}; it must be at least 1")));
            }
            let mut s = vec![c; (len / c) as usize];
            if len % c != 0 {
                s.push(len % c);
            }
            (s, false)
        }
        Some((_, v)) => {
            if v.iter().any(|&s| s < 0) || v.iter().sum::<i64>() != len {
                return Err(ctx.err(format!(
                    "split {v:?} must be non-negative sizes adding up to the axis length {len}"
                )));
            }
            (v, false)
        }
    };
    if sizes.len() > MAX_SPLIT_PIECES {
        return Err(ctx.unsupported(format!(
            "{} pieces; onnxc splits into at most {MAX_SPLIT_PIECES}",
            sizes.len()
        )));
    }
    let dt = ctx.dtype(x);
    let mut start = 0;
    let mut items = Vec::with_capacity(sizes.len());
    for size in sizes {
        let mut shape = xs.clone();
        shape[a] = size;
        let index: Vec<E> = (0..xs.len() as u32)
            .map(|d| {
                if d as usize == a {
                    expr::add(expr::var(d), expr::i(start))
                } else {
                    expr::var(d)
                }
            })
            .collect();
        let mut piece = ctx.map(dt, shape_from(&shape), vec![x], expr::load(dt, 0, index))?;
        if squeeze {
            shape.remove(a);
            piece = ctx.reshape(piece, shape_from(&shape))?;
        }
        items.push(piece);
        start += size;
    }
    Ok(items)
}
