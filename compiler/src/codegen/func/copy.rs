//! Innermost loops that copy a contiguous run (Transpose keeping the last axis, Slice, Pad
//! interiors, Gather rows): one `memmove` per run instead of a loop.
//!
//! Contract: only a single store of a same-type load whose offsets are affine in the loop
//! variables and advance by one element per step qualifies, so the run stays inside the
//! bounds the loop nest was built with.

use super::{FnCx, PTR};
use crate::ir::expr::{BinOp, E, ExprKind, linear_coeff};
use crate::loops::{BufId, Stmt};
use crate::schedule::EPILOGUE_ACC;
use cranelift_codegen::ir::{InstBuilder, types};
use cranelift_frontend::Variable;
use std::collections::HashMap;

/// Shortest contiguous copy (elements) lowered to a `memmove` call rather than a vector loop.
pub(super) const MEMMOVE_MIN: i64 = 16;

/// A loop body copying a contiguous run (`FnCx::contiguous_copy`): destination and source
/// buffers with their element offsets, affine in the loop variables.
#[derive(Copy, Clone)]
pub(super) struct CopyRun<'s> {
    dst: BufId,
    dst_off: &'s E,
    src: BufId,
    src_off: &'s E,
}

impl FnCx<'_, '_> {
    /// Whether `body` copies a contiguous run along `var`: a single store of a same-type load,
    /// both offsets advancing by one element per step of `var` (Transpose keeping the last
    /// axis, Slice, Pad interiors, Gather rows). Such loops become one `memmove` per run
    /// instead of a vector loop recomputing both addresses every four elements (measured:
    /// ShuffleNet's channel-shuffle Transposes 2× faster).
    pub(super) fn contiguous_copy<'s>(&self, var: u32, body: &'s [Stmt]) -> Option<CopyRun<'s>> {
        let [Stmt::Store { buf, offset, value }] = body else {
            return None;
        };
        let ExprKind::Load { input, index } = &value.kind else {
            return None;
        };
        let (dt_out, dt_in) = (
            self.prog.buffers[*buf as usize].dtype,
            self.prog.buffers[*input as usize].dtype,
        );
        let ok = *input != EPILOGUE_ACC
            && index.len() == 1
            && dt_out == dt_in
            && value.dtype == dt_in
            && dt_in.size() > 0
            && affine(offset)
            && affine(&index[0])
            && linear_coeff(offset, var) == Some(1)
            && linear_coeff(&index[0], var) == Some(1);
        ok.then_some(CopyRun {
            dst: *buf,
            dst_off: offset,
            src: *input,
            src_off: &index[0],
        })
    }

    /// `memmove(dst + dst_off(var = 0), src + src_off(var = 0), extent · size)`.
    pub(super) fn copy_run(&mut self, v: Variable, extent: i64, run: CopyRun<'_>) {
        let z = self.b.ins().iconst(types::I64, 0);
        let n = self.b.ins().iconst(types::I64, extent);
        self.copy_run_from(v, z, n, run);
    }

    /// `memmove(dst + dst_off(var = start), src + src_off(var = start), count · size)`,
    /// `start` and `count` run-time values.
    pub(super) fn copy_run_from(
        &mut self,
        v: Variable,
        start: cranelift_codegen::ir::Value,
        count: cranelift_codegen::ir::Value,
        run: CopyRun<'_>,
    ) {
        self.b.def_var(v, start);
        let mut memo = HashMap::new();
        let doff = self.eval(run.dst_off, &mut memo);
        let soff = self.eval(run.src_off, &mut memo);
        let dst = self.addr(run.dst, doff);
        let src = self.addr(run.src, soff);
        let size = self.prog.buffers[run.dst as usize].dtype.size() as i64;
        let n = self.b.ins().imul_imm_s(count, size);
        let f = self
            .imports
            .func(&mut self.b, "memmove", &[PTR, PTR, PTR], &[PTR]);
        self.b.ins().call(f, &[dst, src, n]);
    }
}

/// Whether `e` is built from loop variables and constants by `+`, `-` and `*` only (no loads,
/// no index checks): its value over a run is known from its first element, so a copy of the
/// run stays inside the bounds the loop nest was built with.
fn affine(e: &E) -> bool {
    match &e.kind {
        ExprKind::Var(_) | ExprKind::Const(_) => true,
        ExprKind::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul, a, b) => affine(a) && affine(b),
        _ => false,
    }
}
