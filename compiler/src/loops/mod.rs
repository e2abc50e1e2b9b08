//! The loop-level IR: per step, a function of loop nests over flat buffers, stores of scalar
//! expressions, reductions into registers, block copies and calls to runtime kernels.
//!
//! Expressions are the graph IR's `Expr`, except that `Load { input, index }` names a
//! *buffer* and carries one flat element offset. **Invariant:** every offset is in bounds
//! for all loop variable values (see `ir::expr`).

pub mod lower;

use crate::ir::DType;
use crate::ir::expr::{self, E};
use crate::ir::graph::ReduceKind;
use std::fmt::Write;
use std::sync::Arc;

pub type BufId = u32;

#[derive(Clone, Debug)]
pub enum Loc {
    Input(usize),
    Output(usize),
    Const(Arc<Vec<u8>>),
    Arena(u64),
}

#[derive(Clone, Debug)]
pub struct Buffer {
    pub dtype: DType,
    pub len: i64,
    pub loc: Loc,
    /// Byte offset from the start of `loc` (slices of concat outputs).
    pub offset: u64,
}

#[derive(Clone, Debug)]
pub struct IoDesc {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<i64>,
    /// A ZipMap output's keys: the tensor `[n, keys]` holds the maps' values.
    pub keys: Option<Arc<crate::ir::graph::MapKeys>>,
}

/// Runtime-support kernels callable from generated code (all arguments pointer-sized).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// `onnxc_sgemm(m, n, k, a, lda, ta, b, ldb, tb, c, ldc, bias_row, bias_col, residual,
    /// clamp, scratch)`: C = op(A)·op(B) + epilogue (f32).
    Sgemm,
    /// `onnxc_sgemm_pb(m, n, k, a, lda, ta, b_packed, c, ldc, bias_row, bias_col, residual,
    /// clamp, scratch)`: B packed at compile time.
    SgemmPb,
    /// `onnxc_conv_f32(params, x, w, w_packed, bias, residual, clamp, y, scratch)`.
    ConvF32,
    /// `onnxc_pool2d_f32(params, x, y, scratch)`.
    Pool2dF32,
    /// `onnxc_conv_nchwc_f32(params, x, w_packed, bias, residual, clamp, y, scratch)`:
    /// convolution over channel-blocked tensors.
    ConvNchwcF32,
    /// `onnxc_pool_nchwc_f32(params, x, y)`: pooling over channel-blocked planes.
    PoolNchwcF32,
    /// `onnxc_nchw_to_nchwc(x, n, c, hw, y, planes)` (`planes`: null or the input plane of
    /// every channel).
    NchwToNchwc,
    /// `onnxc_nchwc_to_nchw(x, n, c, hw, y)`.
    NchwcToNchw,
    /// `onnxc_softmax_f32(x, y, rows, n, scale)`: softmax of `scale`·x (null: 1) over each
    /// row of `n` floats.
    SoftmaxF32,
    /// `onnxc_gelu_f32(x, y, n)`: exact GELU of `n` floats.
    GeluF32,
    /// `onnxc_activation_f32(kind, &alpha, x, y, n)`: sigmoid(αx), x·sigmoid(αx) or
    /// tanh(x) of `n` floats (`onnxc_runtime::activation`).
    ActivationF32,
    /// `onnxc_resize_f32(params, floats, x, y, scratch)`: separable resize of the last two
    /// axes with compile-time taps.
    ResizeF32,
    /// `onnxc_topk(params, x, idx, scratch)`: positions of the k best elements per line.
    TopK,
    /// `onnxc_gather_sum_f32(params, x, off, w, y)`: weighted gathers from float32 planes.
    GatherSumF32,
    /// `onnxc_conv_transpose_f32(params, x, w, w_packed, bias, clamp, y, scratch)`: 2-D
    /// transposed convolution (GEMM and col2im); `w_packed` 0 for raw weights.
    ConvTransposeF32,
    /// `onnxc_tree_ensemble(forest, x, y, rows, scratch)`: aggregated leaf values of a tree
    /// ensemble (`scratch`: `onnxc_runtime::tree::scratch_bytes`, null when 0).
    TreeEnsemble,
    /// `onnxc_str_lookup(table, x, y, n)`: positions of strings in a table.
    StrLookup,
    /// `onnxc_str_gather(table, idx, y, n)`: a table's strings at positions.
    StrGather,
    /// `onnxc_svm_probability(params, ab, scores, p, scratch)`: SVM class probabilities.
    SvmProbability,
}

impl Kernel {
    pub fn symbol(self) -> &'static str {
        match self {
            Kernel::Sgemm => "onnxc_sgemm",
            Kernel::SgemmPb => "onnxc_sgemm_pb",
            Kernel::ConvF32 => "onnxc_conv_f32",
            Kernel::Pool2dF32 => "onnxc_pool2d_f32",
            Kernel::ConvNchwcF32 => "onnxc_conv_nchwc_f32",
            Kernel::PoolNchwcF32 => "onnxc_pool_nchwc_f32",
            Kernel::NchwToNchwc => "onnxc_nchw_to_nchwc",
            Kernel::NchwcToNchw => "onnxc_nchwc_to_nchw",
            Kernel::SoftmaxF32 => "onnxc_softmax_f32",
            Kernel::GeluF32 => "onnxc_gelu_f32",
            Kernel::ActivationF32 => "onnxc_activation_f32",
            Kernel::ResizeF32 => "onnxc_resize_f32",
            Kernel::TopK => "onnxc_topk",
            Kernel::GatherSumF32 => "onnxc_gather_sum_f32",
            Kernel::ConvTransposeF32 => "onnxc_conv_transpose_f32",
            Kernel::TreeEnsemble => "onnxc_tree_ensemble",
            Kernel::StrLookup => "onnxc_str_lookup",
            Kernel::StrGather => "onnxc_str_gather",
            Kernel::SvmProbability => "onnxc_svm_probability",
        }
    }
}

#[derive(Clone, Debug)]
pub enum Arg {
    /// Address of element `offset` of a buffer.
    Ptr { buf: BufId, offset: E },
    /// A null pointer.
    Null,
    /// An i64 value.
    Int(E),
    /// Address of a read-only i64 array.
    Params(Vec<i64>),
    /// Address of a read-only f32 array.
    Floats(Vec<f32>),
    /// Address of a large read-only i64 array (an encoded table, dumped by its size).
    Blob(Arc<Vec<i64>>),
    /// Address of a step-local scratch area in the workspace.
    Scratch { offset: u64 },
}

impl Arg {
    /// Address of a buffer's first element.
    pub fn start(buf: BufId) -> Arg {
        Arg::Ptr {
            buf,
            offset: crate::ir::expr::i(0),
        }
    }
}

#[derive(Clone, Debug)]
pub enum Stmt {
    For {
        var: u32,
        extent: i64,
        vector: bool,
        body: Vec<Stmt>,
    },
    Store {
        buf: BufId,
        offset: E,
        value: E,
    },
    /// `buf[offset] = epilogue(fold(kind, body over loops))`.
    Reduce {
        buf: BufId,
        offset: E,
        kind: ReduceKind,
        loops: Vec<(u32, i64)>,
        body: E,
        epilogue: Option<E>,
    },
    /// Copies `elems` elements (non-overlapping).
    Copy {
        dst: BufId,
        dst_offset: E,
        src: BufId,
        src_offset: E,
        elems: i64,
    },
    Call {
        kernel: Kernel,
        args: Vec<Arg>,
    },
    /// Sets the run's error code to `code` (first error wins) when `cond` is false.
    Check {
        cond: E,
        code: i32,
    },
}

#[derive(Clone, Debug)]
pub struct Func {
    pub name: String,
    /// The ONNX nodes computed here, for comments.
    pub origin: String,
    pub body: Vec<Stmt>,
}

#[derive(Clone, Debug)]
pub struct Program {
    pub name: String,
    pub buffers: Vec<Buffer>,
    pub funcs: Vec<Func>,
    pub workspace_size: u64,
    pub inputs: Vec<IoDesc>,
    pub outputs: Vec<IoDesc>,
}

impl Program {
    pub fn dump(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "program \"{}\" (workspace {} bytes) {{",
            self.name, self.workspace_size
        );
        for (i, b) in self.buffers.iter().enumerate() {
            let loc = match &b.loc {
                Loc::Input(k) => format!("input {k}"),
                Loc::Output(k) => format!("output {k}"),
                Loc::Const(d) => format!("const ({} bytes)", d.len()),
                Loc::Arena(o) => format!("arena +{o}"),
            };
            let at = if b.offset > 0 {
                format!(" +{} bytes", b.offset)
            } else {
                String::new()
            };
            let _ = writeln!(s, "  buf{i}: {}[{}] {loc}{at}", b.dtype, b.len);
        }
        for f in &self.funcs {
            let _ = writeln!(s, "  func {}  ; {}", f.name, f.origin);
            dump_stmts(&mut s, &f.body, 2);
        }
        s.push_str("}\n");
        s
    }
}

fn dump_stmts(s: &mut String, body: &[Stmt], depth: usize) {
    let pad = "  ".repeat(depth);
    for st in body {
        match st {
            Stmt::For {
                var,
                extent,
                vector,
                body,
            } => {
                let _ = writeln!(
                    s,
                    "{pad}for v{var} in 0..{extent}{} {{",
                    if *vector { " vectorize" } else { "" }
                );
                dump_stmts(s, body, depth + 1);
                let _ = writeln!(s, "{pad}}}");
            }
            Stmt::Store { buf, offset, value } => {
                let _ = writeln!(
                    s,
                    "{pad}buf{buf}[{}] = {}",
                    expr::display(offset),
                    expr::display(value)
                );
            }
            Stmt::Reduce {
                buf,
                offset,
                kind,
                loops,
                body,
                epilogue,
            } => {
                let ls: Vec<String> = loops
                    .iter()
                    .map(|(v, e)| format!("v{v} in 0..{e}"))
                    .collect();
                let _ = writeln!(
                    s,
                    "{pad}buf{buf}[{}] = {}{kind:?}({}: {})",
                    expr::display(offset),
                    epilogue
                        .as_ref()
                        .map(|e| format!("[{}] <- ", expr::display(e)))
                        .unwrap_or_default(),
                    ls.join(", "),
                    expr::display(body)
                );
            }
            Stmt::Copy {
                dst,
                dst_offset,
                src,
                src_offset,
                elems,
            } => {
                let _ = writeln!(
                    s,
                    "{pad}copy buf{dst}[{}..] <- buf{src}[{}..] x{elems}",
                    expr::display(dst_offset),
                    expr::display(src_offset)
                );
            }
            Stmt::Check { cond, code } => {
                let _ = writeln!(s, "{pad}check {} else error {code}", expr::display(cond));
            }
            Stmt::Call { kernel, args } => {
                let a: Vec<String> = args
                    .iter()
                    .map(|a| match a {
                        Arg::Ptr { buf, offset } => format!("&buf{buf}[{}]", expr::display(offset)),
                        Arg::Null => "null".into(),
                        Arg::Int(e) => expr::display(e),
                        Arg::Params(p) => format!("{p:?}"),
                        Arg::Floats(p) => format!("{p:?}f"),
                        Arg::Blob(b) => format!("blob[{} words]", b.len()),
                        Arg::Scratch { offset } => format!("scratch+{offset}"),
                    })
                    .collect();
                let _ = writeln!(s, "{pad}call {}({})", kernel.symbol(), a.join(", "));
            }
        }
    }
}
