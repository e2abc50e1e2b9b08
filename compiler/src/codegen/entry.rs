//! The model's exported entry points around its steps: `NAME_run`, `NAME_run_threaded`,
//! `NAME_workspace_size`, `NAME_workspace_size_threads`, `NAME_run_shaped` (a call of the
//! runtime's `onnxc_run_shaped`); the optional driver `main` is in `codegen::compile`.
//!
//! Both run functions share one local `NAME_steps(inputs, outputs, workspace, threads)`
//! that calls the steps in order and stops at the first error; `NAME_run` passes no
//! threads, so a single-threaded run executes what it always did.

use super::func::{PTR, block_args, step_signature};
use super::steps::Build;
use super::{Imports, ModState};
use crate::error::{Error, Result};
use cranelift_codegen::Context;
use cranelift_codegen::ir::{
    self, AbiParam, InstBuilder, UserFuncName, Value, condcodes::IntCC, types,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{FuncId, Linkage, Module};
use onnxc_runtime::abi::{ONNXC_ERR_ALLOC, ONNXC_ERR_DYNAMIC, ONNXC_ERR_WORKSPACE};
use onnxc_runtime::par::MAX_WORKERS;
use std::collections::HashMap;

fn merr(e: cranelift_module::ModuleError) -> Error {
    Error::Internal(format!("cranelift module: {e:?}"))
}

/// The exported entry points' ids, for `main` and the info table.
pub struct Entries {
    pub run: FuncId,
    pub run_threaded: FuncId,
    pub workspace_size_threads: FuncId,
}

pub fn define_entries(
    bd: &Build,
    st: &mut ModState,
    ctx: &mut Context,
    fctx: &mut FunctionBuilderContext,
    steps: &[FuncId],
    profile: bool,
    clif: &mut String,
) -> Result<Entries> {
    let prefix = bd.prefix;
    let cc = st.call_conv;
    let declare = |st: &mut ModState, name: &str, linkage, sig: &ir::Signature| {
        st.module.declare_function(name, linkage, sig).map_err(merr)
    };
    let finish = |st: &mut ModState, ctx: &mut Context, id, name: &str, clif: &mut String| {
        if bd.keep_clif {
            clif.push_str(&format!("; {name}\n{}\n", ctx.func.display()));
        }
        st.module
            .define_function(id, ctx)
            .map_err(|e| Error::Internal(format!("cranelift rejected {name}: {e:?}")))?;
        ctx.clear();
        Ok::<(), Error>(())
    };

    // NAME_steps(inputs, outputs, workspace, threads) -> int: the steps in order, in groups
    // of at most CHAIN_CALLS calls per function (a 200,000-step model in one function
    // made register allocation superlinear: 20,000 steps took 3 s).
    let mut chain: Vec<FuncId> = steps.to_vec();
    let mut level = 0;
    loop {
        // A model without steps still gets its (empty) NAME_steps.
        let groups: Vec<&[FuncId]> = if chain.is_empty() {
            vec![&[]]
        } else {
            chain.chunks(CHAIN_CALLS).collect()
        };
        let top = groups.len() == 1;
        let mut next = Vec::with_capacity(groups.len());
        for (g, calls) in groups.iter().enumerate() {
            let name = if top {
                format!("{prefix}_steps")
            } else {
                format!("{prefix}_steps_{level}_{g}")
            };
            let id = declare(st, &name, Linkage::Local, &step_signature(cc))?;
            let user = if top { 0 } else { 1 + (level << 24 | g) as u32 };
            ctx.func =
                ir::Function::with_name_signature(UserFuncName::user(2, user), step_signature(cc));
            // Profiled runs record each step by its index in `steps`.
            let first = (level == 0 && profile).then_some(g * CHAIN_CALLS);
            call_chain(&mut ctx.func, fctx, st, calls, first, bd);
            finish(st, ctx, id, &name, clif)?;
            next.push(id);
        }
        chain = next;
        if top {
            break;
        }
        level += 1;
    }
    let steps_id = chain[0];

    // A model whose outputs' dims depend on the data runs only through NAME_run_shaped,
    // which calls the program as NAME_run_program (local) with the staged outputs and their
    // dims; its NAME_run and NAME_run_threaded return ONNXC_ERR_DYNAMIC.
    // So does a model taking dims at run time: its steps read them after the input pointers.
    let dynamic = bd.prog.dynamic() || !bd.prog.run_dims.is_empty();
    // Strings made at run time live in the workspace, and outputs may point there.
    let strings = bd.prog.string_bytes > 0;

    // NAME_run(inputs, outputs, workspace) -> int
    let mut run_sig = ir::Signature::new(cc);
    run_sig.params.extend([AbiParam::new(PTR); 3]);
    run_sig.returns.push(AbiParam::new(types::I32));
    let run_name = format!("{prefix}_run");
    let run = declare(st, &run_name, bd.linkage(), &run_sig)?;
    ctx.func = ir::Function::with_name_signature(UserFuncName::user(1, 1), run_sig);
    if dynamic {
        refuse(&mut ctx.func, fctx, bd);
    } else {
        let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let p = b.block_params(entry).to_vec();
        let size = b.ins().iconst(types::I64, bd.prog.workspace_size as i64);
        let null = b.ins().iconst(PTR, 0);
        run_with_workspace(
            st,
            &mut b,
            steps_id,
            [p[0], p[1], p[2], null],
            size,
            strings,
        );
        b.seal_all_blocks();
        b.finalize(bd.frontend);
    }
    finish(st, ctx, run, &run_name, clif)?;

    // NAME_workspace_size_threads(workers) -> size_t
    let mut sig = ir::Signature::new(cc);
    sig.params.push(AbiParam::new(types::I64));
    sig.returns.push(AbiParam::new(types::I64));
    let wst_name = format!("{prefix}_workspace_size_threads");
    let wst = declare(st, &wst_name, bd.linkage(), &sig)?;
    ctx.func = ir::Function::with_name_signature(UserFuncName::user(1, 2), sig);
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
        let e = b.create_block();
        b.append_block_params_for_function_params(e);
        b.switch_to_block(e);
        let w = b.block_params(e)[0];
        // clamp(workers, 1, MAX_WORKERS), unsigned.
        let one = b.ins().iconst(types::I64, 1);
        let max = b.ins().iconst(types::I64, MAX_WORKERS as i64);
        let w = b.ins().umax(w, one);
        let w = b.ins().umin(w, max);
        // What any of the model's programs needs (its chunks' too), staging included.
        let p = bd.prog;
        let per = b.ins().imul_imm_s(w, p.workspace_per_worker() as i64);
        let v = b.ins().iadd_imm_s(per, p.workspace_base() as i64);
        b.ins().return_(&[v]);
        b.seal_all_blocks();
        b.finalize(bd.frontend);
    }
    finish(st, ctx, wst, &wst_name, clif)?;

    // NAME_run_threaded(inputs, outputs, workspace, workspace_bytes, threads) -> int
    let mut sig = ir::Signature::new(cc);
    sig.params.extend([AbiParam::new(PTR); 5]);
    sig.returns.push(AbiParam::new(types::I32));
    let rt_name = format!("{prefix}_run_threaded");
    let exported = declare(st, &rt_name, bd.linkage(), &sig)?;
    let (run_threaded, rt_name) = if dynamic {
        ctx.func = ir::Function::with_name_signature(UserFuncName::user(1, 6), sig.clone());
        refuse(&mut ctx.func, fctx, bd);
        finish(st, ctx, exported, &rt_name, clif)?;
        let name = format!("{prefix}_run_program");
        (declare(st, &name, Linkage::Local, &sig)?, name)
    } else {
        (exported, rt_name)
    };
    ctx.func = ir::Function::with_name_signature(UserFuncName::user(1, 3), sig);
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let p = b.block_params(entry).to_vec();
        let mut imports = Imports {
            st,
            refs: HashMap::new(),
            gvs: HashMap::new(),
        };
        let workers = imports.func(&mut b, "onnxc_threads_workers", &[PTR], &[PTR]);
        let c = b.ins().call(workers, &[p[4]]);
        let w = b.inst_results(c)[0];
        let need = workspace_for(bd, &mut b, w);
        // A caller's workspace must hold what the workers need.
        let small = b.ins().icmp(IntCC::UnsignedLessThan, p[3], need);
        let given = b.ins().icmp_imm_s(IntCC::NotEqual, p[2], 0);
        let bad = b.ins().band(small, given);
        let refuse = b.create_block();
        let go = b.create_block();
        b.ins().brif(bad, refuse, &[], go, &[]);
        b.switch_to_block(refuse);
        let code = b.ins().iconst(types::I32, ONNXC_ERR_WORKSPACE as i64);
        b.ins().return_(&[code]);
        b.switch_to_block(go);
        run_with_workspace(
            st,
            &mut b,
            steps_id,
            [p[0], p[1], p[2], p[4]],
            need,
            strings,
        );
        b.seal_all_blocks();
        b.finalize(bd.frontend);
    }
    finish(st, ctx, run_threaded, &rt_name, clif)?;

    // NAME_workspace_size() -> size_t
    let mut sig = ir::Signature::new(cc);
    sig.returns.push(AbiParam::new(types::I64));
    let ws_name = format!("{prefix}_workspace_size");
    let ws_id = declare(st, &ws_name, bd.linkage(), &sig)?;
    ctx.func = ir::Function::with_name_signature(UserFuncName::user(1, 4), sig);
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
        let e = b.create_block();
        b.switch_to_block(e);
        let v = b.ins().iconst(types::I64, bd.prog.workspace_bytes() as i64);
        b.ins().return_(&[v]);
        b.seal_all_blocks();
        b.finalize(bd.frontend);
    }
    finish(st, ctx, ws_id, &ws_name, clif)?;
    Ok(Entries {
        run,
        run_threaded,
        workspace_size_threads: wst,
    })
}

/// `NAME_run_shaped(inputs, outputs, workspace, workspace_bytes, threads) -> int`:
/// `onnxc_run_shaped(NAME_info(), NAME_run_threaded, NAME_workspace_size_threads, chunks,
/// num_chunks, fixed, num_fixed, …)`, the chunk programs' (items, run_threaded) and the
/// fixed-value programs' (value, run_threaded) tables on the stack.
#[allow(
    clippy::too_many_arguments,
    reason = "the module state and the entry points"
)]
pub fn define_run_shaped(
    st: &mut ModState,
    ctx: &mut Context,
    fctx: &mut FunctionBuilderContext,
    prefix: &str,
    info: cranelift_module::DataId,
    entries: &Entries,
    chunks: &[(Vec<i64>, Entries)],
    fixed: &[(Vec<i64>, Entries)],
    frontend: cranelift_codegen::isa::TargetFrontendConfig,
) -> Result<FuncId> {
    let mut sig = ir::Signature::new(st.call_conv);
    sig.params.extend([AbiParam::new(PTR); 5]);
    sig.returns.push(AbiParam::new(types::I32));
    let id = st
        .module
        .declare_function(&format!("{prefix}_run_shaped"), Linkage::Export, &sig)
        .map_err(merr)?;
    ctx.func = ir::Function::with_name_signature(UserFuncName::user(1, 5), sig);
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
        let e = b.create_block();
        b.append_block_params_for_function_params(e);
        b.switch_to_block(e);
        let p = b.block_params(e).to_vec();
        let mut imports = Imports {
            st,
            refs: HashMap::new(),
            gvs: HashMap::new(),
        };
        let shaped = imports.func(
            &mut b,
            "onnxc_run_shaped",
            &[
                PTR,
                PTR,
                PTR,
                PTR,
                types::I64,
                PTR,
                types::I64,
                PTR,
                PTR,
                PTR,
                PTR,
                PTR,
            ],
            &[types::I32],
        );
        let gv = imports.st.module.declare_data_in_func(info, b.func);
        let info = b.ins().symbol_value(PTR, gv);
        let mut fn_addr = |b: &mut FunctionBuilder, id| {
            let r = imports.st.module.declare_func_in_func(id, b.func);
            b.ins().func_addr(PTR, r)
        };
        let run = fn_addr(&mut b, entries.run_threaded);
        let wst = fn_addr(&mut b, entries.workspace_size_threads);
        // A table of {i64 key[n], pointer} per program (`onnxc_chunk` {items, run} and
        // `onnxc_fixed` {values[2], run}), on the stack; a null pointer when empty.
        let mut table = |b: &mut FunctionBuilder, programs: &[(Vec<i64>, Entries)]| {
            let Some((first, _)) = programs.first() else {
                return b.ins().iconst(PTR, 0);
            };
            let entry = 8 * (first.len() as i32 + 1);
            let slot = b.create_sized_stack_slot(ir::StackSlotData::new(
                ir::StackSlotKind::ExplicitSlot,
                entry as u32 * programs.len() as u32,
                3,
            ));
            for (k, (key, e)) in programs.iter().enumerate() {
                let at = entry * k as i32;
                for (j, &v) in key.iter().enumerate() {
                    let n = b.ins().iconst(types::I64, v);
                    b.ins().stack_store(PTR, n, slot, at + 8 * j as i32);
                }
                let f = fn_addr(b, e.run_threaded);
                b.ins().stack_store(PTR, f, slot, at + entry - 8);
            }
            b.ins().stack_addr(PTR, slot, 0)
        };
        let chunk_table = table(&mut b, chunks);
        let fixed_table = table(&mut b, fixed);
        let num_chunks = b.ins().iconst(types::I64, chunks.len() as i64);
        let num_fixed = b.ins().iconst(types::I64, fixed.len() as i64);
        let c = b.ins().call(
            shaped,
            &[
                info,
                run,
                wst,
                chunk_table,
                num_chunks,
                fixed_table,
                num_fixed,
                p[0],
                p[1],
                p[2],
                p[3],
                p[4],
            ],
        );
        let r = b.inst_results(c)[0];
        b.ins().return_(&[r]);
        b.seal_all_blocks();
        b.finalize(frontend);
    }
    st.module.define_function(id, ctx).map_err(merr)?;
    ctx.clear();
    Ok(id)
}

/// Fills `func` with a body that returns `ONNXC_ERR_DYNAMIC` (the fixed-shape entry points
/// of a model whose outputs' dims depend on the data).
fn refuse(func: &mut ir::Function, fctx: &mut FunctionBuilderContext, bd: &Build) {
    let mut b = FunctionBuilder::new(func, fctx);
    let e = b.create_block();
    b.append_block_params_for_function_params(e);
    b.switch_to_block(e);
    let code = b.ins().iconst(types::I32, ONNXC_ERR_DYNAMIC as i64);
    b.ins().return_(&[code]);
    b.seal_all_blocks();
    b.finalize(bd.frontend);
}

/// Most calls in one function of the `NAME_steps` chain.
const CHAIN_CALLS: usize = 1024;

/// Fills `func` (of the step signature) with calls of `calls` in order, each passed the
/// function's own arguments, returning the first nonzero status (0 if none). With
/// `profile_from`, each call is timed and recorded as step `profile_from + k`.
fn call_chain(
    func: &mut ir::Function,
    fctx: &mut FunctionBuilderContext,
    st: &mut ModState,
    calls: &[FuncId],
    profile_from: Option<usize>,
    bd: &Build,
) {
    let mut b = FunctionBuilder::new(func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let p = b.block_params(entry).to_vec();
    let done = b.create_block();
    let rc_p = b.append_block_param(done, types::I32);
    let mut imports = Imports {
        st,
        refs: HashMap::new(),
        gvs: HashMap::new(),
    };
    let prof = profile_from.map(|_| {
        (
            imports.func(&mut b, "onnxc_prof_now", &[], &[types::I64]),
            imports.func(&mut b, "onnxc_prof_record", &[types::I64, types::I64], &[]),
        )
    });
    for (k, &sid) in calls.iter().enumerate() {
        let f = imports.st.module.declare_func_in_func(sid, b.func);
        let t0 = prof.map(|(now, _)| {
            let c = b.ins().call(now, &[]);
            b.inst_results(c)[0]
        });
        let c = b.ins().call(f, &p);
        let rc = b.inst_results(c)[0];
        if let (Some((_, rec)), Some(t0), Some(from)) = (prof, t0, profile_from) {
            let idx = b.ins().iconst(types::I64, (from + k) as i64);
            b.ins().call(rec, &[idx, t0]);
        }
        let next = b.create_block();
        b.ins().brif(rc, done, &block_args(&[rc]), next, &[]);
        b.switch_to_block(next);
    }
    let ok = b.ins().iconst(types::I32, 0);
    b.ins().jump(done, &block_args(&[ok]));
    b.switch_to_block(done);
    b.ins().return_(&[rc_p]);
    b.seal_all_blocks();
    b.finalize(bd.frontend);
}

/// Workspace bytes for `w` workers: the arena, the shared scratch, a slot per worker.
fn workspace_for(bd: &Build, b: &mut FunctionBuilder, w: Value) -> Value {
    let p = bd.prog;
    let per = b.ins().imul_imm_s(w, p.scratch_per_worker as i64);
    b.ins()
        .iadd_imm_s(per, (p.scratch_base + p.scratch_shared) as i64)
}

/// `rc = NAME_steps(args)` with `args[2]`, the workspace, allocated (`size` bytes) and freed
/// around the call when it is null; returns `rc` (or `ONNXC_ERR_ALLOC`). A program that makes
/// strings (`strings`) returns `ONNXC_ERR_WORKSPACE` for a null workspace instead: its
/// outputs may point into the workspace, which must outlive the call.
fn run_with_workspace(
    st: &mut ModState,
    b: &mut FunctionBuilder,
    steps: FuncId,
    args: [Value; 4],
    size: Value,
    strings: bool,
) {
    let mut imports = Imports {
        st,
        refs: HashMap::new(),
        gvs: HashMap::new(),
    };
    let alloc = imports.func(b, "onnxc_workspace_alloc", &[types::I64], &[PTR]);
    let free = imports.func(b, "onnxc_workspace_free", &[PTR], &[]);
    let steps = imports.st.module.declare_func_in_func(steps, b.func);
    let alloc_b = b.create_block();
    let run_b = b.create_block();
    let ws_p = b.append_block_param(run_b, PTR);
    let owned_p = b.append_block_param(run_b, types::I8);
    let done = b.create_block();
    let rc_p = b.append_block_param(done, types::I32);
    let is_null = b.ins().icmp_imm_s(IntCC::Equal, args[2], 0);
    let zero8 = b.ins().iconst(types::I8, 0);
    b.ins()
        .brif(is_null, alloc_b, &[], run_b, &block_args(&[args[2], zero8]));
    b.switch_to_block(alloc_b);
    if strings {
        let code = b.ins().iconst(types::I32, ONNXC_ERR_WORKSPACE as i64);
        b.ins().jump(done, &block_args(&[code]));
        b.switch_to_block(run_b);
        let c = b.ins().call(steps, &[args[0], args[1], ws_p, args[3]]);
        let rc = b.inst_results(c)[0];
        b.ins().jump(done, &block_args(&[rc]));
        b.switch_to_block(done);
        b.ins().return_(&[rc_p]);
        return;
    }
    let c = b.ins().call(alloc, &[size]);
    let wsa = b.inst_results(c)[0];
    let failed = b.ins().icmp_imm_s(IntCC::Equal, wsa, 0);
    let oom = b.ins().iconst(types::I32, ONNXC_ERR_ALLOC as i64);
    let one8 = b.ins().iconst(types::I8, 1);
    let cont = b.create_block();
    b.ins().brif(failed, done, &block_args(&[oom]), cont, &[]);
    b.switch_to_block(cont);
    b.ins().jump(run_b, &block_args(&[wsa, one8]));
    b.switch_to_block(run_b);
    let c = b.ins().call(steps, &[args[0], args[1], ws_p, args[3]]);
    let rc = b.inst_results(c)[0];
    let free_b = b.create_block();
    b.ins().brif(owned_p, free_b, &[], done, &block_args(&[rc]));
    b.switch_to_block(free_b);
    b.ins().call(free, &[ws_p]);
    b.ins().jump(done, &block_args(&[rc]));
    b.switch_to_block(done);
    b.ins().return_(&[rc_p]);
}
