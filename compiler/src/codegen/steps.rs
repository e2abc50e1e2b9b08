//! One Cranelift function per loop-IR function (a step), plus one per parallel loop.
//!
//! A step is `int NAME_stepK(inputs, outputs, workspace, threads)`. Each of its top-level
//! statements that `loops::par` gives a parallel form becomes a function
//! `int NAME_stepK_partJ(ctx, begin, end, threads, worker)` running iterations
//! `[begin, end)` of it, and the step calls `onnxc_parallel_loop` with it instead; `ctx`
//! points to the step's three pointers. The other statements run inline.

use super::func::{FnCx, PTR, part_signature, step_signature};
use super::{Imports, ModState, vmath};
use crate::error::{Error, Result};
use crate::loops::par::{ParLoop, parallel_loop};
use crate::loops::{Func, Program, Stmt};
use cranelift_codegen::ir::{self, InstBuilder, MemFlagsData, UserFuncName, types};
use cranelift_codegen::{Context, isa::TargetFrontendConfig};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{FuncId, Linkage, Module};
use std::collections::HashMap;

/// What every function of the object is built with.
pub struct Build<'p> {
    pub prog: &'p Program,
    pub prefix: &'p str,
    /// Whether the program's entry points are exported (the model's) or local (a chunk
    /// program's, which `NAME_run_shaped` calls).
    pub export: bool,
    pub fma: vmath::Fma,
    pub frontend: TargetFrontendConfig,
    pub keep_clif: bool,
}

impl Build<'_> {
    /// The linkage of the program's entry points.
    pub fn linkage(&self) -> Linkage {
        if self.export {
            Linkage::Export
        } else {
            Linkage::Local
        }
    }

    fn define(
        &self,
        st: &mut ModState,
        ctx: &mut Context,
        name: &str,
        origin: &str,
        id: FuncId,
        clif: &mut String,
    ) -> Result<()> {
        if self.keep_clif {
            clif.push_str(&format!(
                "; {name} computes {origin}\n{}\n",
                ctx.func.display()
            ));
        }
        st.module
            .define_function(id, ctx)
            .map_err(|e| Error::Internal(format!("cranelift rejected {name} ({origin}): {e:?}")))?;
        ctx.clear();
        Ok(())
    }
}

/// Defines every step of the program (and their parallel parts); returns the steps' ids in
/// order.
pub fn define_steps(
    bd: &Build,
    st: &mut ModState,
    ctx: &mut Context,
    fctx: &mut FunctionBuilderContext,
    clif: &mut String,
) -> Result<Vec<FuncId>> {
    let merr =
        |e: cranelift_module::ModuleError| Error::Internal(format!("cranelift module: {e:?}"));
    let mut ids = Vec::new();
    let mut user = 0u32;
    for f in &bd.prog.funcs {
        let name = format!("{}_{}", bd.prefix, f.name);
        // The parallel parts first: the step calls them by address.
        let mut parts: HashMap<usize, (FuncId, ParLoop)> = HashMap::new();
        for (j, s) in f.body.iter().enumerate() {
            let Some(pl) = parallel_loop(f, s) else {
                continue;
            };
            let pname = format!("{name}_part{j}");
            let sig = part_signature(st.call_conv);
            let id = st
                .module
                .declare_function(&pname, Linkage::Local, &sig)
                .map_err(merr)?;
            ctx.func = ir::Function::with_name_signature(UserFuncName::user(0, user), sig);
            user += 1;
            part_body(bd, st, ctx, fctx, s);
            bd.define(st, ctx, &pname, &f.origin, id, clif)?;
            parts.insert(j, (id, pl));
        }
        let sig = step_signature(st.call_conv);
        let id = st
            .module
            .declare_function(&name, Linkage::Local, &sig)
            .map_err(merr)?;
        ctx.func = ir::Function::with_name_signature(UserFuncName::user(0, user), sig);
        user += 1;
        step_body(bd, st, ctx, fctx, f, &parts);
        bd.define(st, ctx, &name, &f.origin, id, clif)?;
        ids.push(id);
    }
    Ok(ids)
}

/// `NAME_stepK(inputs, outputs, workspace, threads)`: the statements in order, parallel
/// ones through `onnxc_parallel_loop`.
fn step_body(
    bd: &Build,
    st: &mut ModState,
    ctx: &mut Context,
    fctx: &mut FunctionBuilderContext,
    f: &Func,
    parts: &HashMap<usize, (FuncId, ParLoop)>,
) {
    let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let p = b.block_params(entry).to_vec();
    let err = b.declare_var(types::I32);
    let zero = b.ins().iconst(types::I32, 0);
    b.def_var(err, zero);
    // The pointers a part reads, when there are parts.
    let ctx_slot = (!parts.is_empty()).then(|| {
        let slot = b.create_sized_stack_slot(ir::StackSlotData::new(
            ir::StackSlotKind::ExplicitSlot,
            24,
            3,
        ));
        for (k, &v) in p[..3].iter().enumerate() {
            b.ins().stack_store(PTR, v, slot, 8 * k as i32);
        }
        slot
    });
    let imports = Imports {
        st,
        refs: HashMap::new(),
        gvs: HashMap::new(),
    };
    let mut cx = FnCx::new(b, bd.prog, imports, err, p[2], p[3]);
    cx.fma = bd.fma;
    let inline: Vec<Stmt> = f
        .body
        .iter()
        .enumerate()
        .filter(|(j, _)| !parts.contains_key(j))
        .map(|(_, s)| s.clone())
        .collect();
    cx.setup_bases(&inline, p[0], p[1]);
    for (j, s) in f.body.iter().enumerate() {
        match (parts.get(&j), ctx_slot) {
            (Some((pid, pl)), Some(slot)) => {
                let pid = *pid;
                let run = cx.imports.func(
                    &mut cx.b,
                    "onnxc_parallel_loop",
                    &[
                        PTR,
                        types::I64,
                        types::I64,
                        types::I64,
                        types::I64,
                        PTR,
                        PTR,
                    ],
                    &[types::I32],
                );
                let pref = cx.imports.st.module.declare_func_in_func(pid, cx.b.func);
                let fa = cx.b.ins().func_addr(PTR, pref);
                let ca = cx.b.ins().stack_addr(PTR, slot, 0);
                let extent = match pl.extent.fixed() {
                    Some(n) => cx.b.ins().iconst(types::I64, n),
                    None => cx.eval_int(&pl.extent.expr()),
                };
                let args = [
                    cx.threads,
                    extent,
                    cx.b.ins().iconst(types::I64, pl.grain),
                    cx.b.ins().iconst(types::I64, pl.align),
                    cx.b.ins().iconst(types::I64, pl.calls as i64),
                    fa,
                    ca,
                ];
                let c = cx.b.ins().call(run, &args);
                let rc = cx.b.inst_results(c)[0];
                cx.merge_status(rc);
            }
            _ => cx.stmts(std::slice::from_ref(s)),
        }
    }
    let code = cx.b.use_var(cx.err);
    cx.b.ins().return_(&[code]);
    cx.b.seal_all_blocks();
    cx.b.finalize(bd.frontend);
}

/// `NAME_stepK_partJ(ctx, begin, end, threads, worker)`: iterations `[begin, end)` of
/// statement `s`, with worker `worker`'s scratch slot.
fn part_body(
    bd: &Build,
    st: &mut ModState,
    ctx: &mut Context,
    fctx: &mut FunctionBuilderContext,
    s: &Stmt,
) {
    let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let p = b.block_params(entry).to_vec();
    let (cp, begin, end, threads, worker) = (p[0], p[1], p[2], p[3], p[4]);
    let fl = MemFlagsData::trusted().with_readonly();
    let inputs = b.ins().load(PTR, fl, cp, 0);
    let outputs = b.ins().load(PTR, fl, cp, 8);
    let ws = b.ins().load(PTR, fl, cp, 16);
    let err = b.declare_var(types::I32);
    let zero = b.ins().iconst(types::I32, 0);
    b.def_var(err, zero);
    let imports = Imports {
        st,
        refs: HashMap::new(),
        gvs: HashMap::new(),
    };
    let mut cx = FnCx::new(b, bd.prog, imports, err, ws, threads);
    cx.fma = bd.fma;
    cx.worker = Some(worker);
    cx.setup_bases(std::slice::from_ref(s), inputs, outputs);
    cx.stmt_range(s, begin, end);
    let code = cx.b.use_var(cx.err);
    cx.b.ins().return_(&[code]);
    cx.b.seal_all_blocks();
    cx.b.finalize(bd.frontend);
}
