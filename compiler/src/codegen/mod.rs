//! Loop IR → Cranelift → relocatable object, plus the C header.
//!
//! Emitted symbols (prefixed by the model name): `NAME_run`, `NAME_run_threaded`,
//! `NAME_workspace_size`, `NAME_workspace_size_threads`, `NAME_info`, `NAME_run_shaped`,
//! and with `emit_main` a `main` that runs the driver (`entry`). Per-step functions
//! (`steps`), constant data and a run-time batch's chunk programs (`Program::chunks`, their
//! entry points as `NAME_chunkN_*`, sharing constants with the model's) are local to the
//! object.

mod entry;
pub mod func;
pub mod header;
mod steps;
pub mod vmath;

use crate::error::{Error, Result};
use crate::loops::{self, Loc, Program};
use cranelift_codegen::Context;
use cranelift_codegen::ir::{self, AbiParam, InstBuilder, UserFuncName, types};
use cranelift_codegen::isa::{CallConv, OwnedTargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{DataDescription, DataId, FuncId, Linkage, Module};
use cranelift_object::{ObjectBuilder, ObjectModule};
use func::PTR;
use onnxc_runtime::shaped;
use std::collections::HashMap;
use target_lexicon::Triple;

#[derive(Clone, Debug)]
pub struct CodegenOptions {
    /// Target triple; `None` means the host (with its CPU features).
    pub target: Option<String>,
    /// Cranelift `opt_level`: "none" or "speed".
    pub opt_level: &'static str,
    /// Also emit a `main` running the `onnxc run/bench` driver.
    pub emit_main: bool,
    /// Keep the CLIF text of every function (for `--emit clif`).
    pub keep_clif: bool,
    /// Run the Cranelift verifier.
    pub verify: bool,
    /// Time every step (calls the runtime's profiling hooks); for `onnxc bench --profile`.
    pub profile: bool,
}

impl Default for CodegenOptions {
    fn default() -> Self {
        CodegenOptions {
            target: None,
            opt_level: "speed",
            emit_main: false,
            keep_clif: false,
            verify: cfg!(debug_assertions),
            profile: false,
        }
    }
}

pub struct Artifact {
    pub object: Vec<u8>,
    pub clif: String,
}

pub fn make_isa(opts: &CodegenOptions) -> Result<OwnedTargetIsa> {
    let mut flags = settings::builder();
    let set = |f: &mut settings::Builder, k: &str, v: &str| {
        f.set(k, v)
            .map_err(|e| Error::Internal(format!("cranelift flag {k}={v}: {e}")))
    };
    set(&mut flags, "opt_level", opts.opt_level)?;
    set(&mut flags, "is_pic", "true")?;
    set(&mut flags, "enable_alias_analysis", "true")?;
    set(
        &mut flags,
        "enable_verifier",
        if opts.verify { "true" } else { "false" },
    )?;
    let flags = settings::Flags::new(flags);
    let builder = match &opts.target {
        None => cranelift_native::builder()
            .map_err(|e| Error::Usage(format!("host target not supported: {e}")))?,
        Some(t) => {
            let triple: Triple = t
                .parse()
                .map_err(|e| Error::Usage(format!("--target {t}: {e}")))?;
            let mut b = cranelift_codegen::isa::lookup(triple)
                .map_err(|e| Error::Usage(format!("--target {t}: {e}")))?;
            if t.starts_with("x86_64") {
                // x86-64-v2 baseline: every x86-64 CPU of the last decade.
                for f in [
                    "has_sse3",
                    "has_ssse3",
                    "has_sse41",
                    "has_sse42",
                    "has_popcnt",
                ] {
                    let _ = b.enable(f);
                }
            }
            b
        }
    };
    builder
        .finish(flags)
        .map_err(|e| Error::Internal(format!("cranelift ISA: {e}")))
}

/// Constants' data objects by a hash of their bytes (with the bytes, for collisions).
type SharedConsts = HashMap<u64, Vec<(std::sync::Arc<Vec<u8>>, DataId)>>;

/// Module-level symbol state shared by all functions.
pub struct ModState {
    module: ObjectModule,
    funcs: HashMap<String, FuncId>,
    /// The constant buffers of the program being emitted.
    consts: HashMap<u32, DataId>,
    /// With several programs (`Program::chunks`): every constant emitted so far, so that
    /// programs share their weights.
    shared_consts: Option<SharedConsts>,
    rodata: HashMap<Vec<u8>, DataId>,
    call_conv: CallConv,
}

/// Per-function view of the module's symbols.
pub struct Imports<'m> {
    st: &'m mut ModState,
    refs: HashMap<String, ir::FuncRef>,
    gvs: HashMap<DataId, ir::GlobalValue>,
}

impl<'m> Imports<'m> {
    pub fn func(
        &mut self,
        b: &mut FunctionBuilder,
        name: &str,
        params: &[ir::Type],
        returns: &[ir::Type],
    ) -> ir::FuncRef {
        if let Some(r) = self.refs.get(name) {
            return *r;
        }
        let id = match self.st.funcs.get(name) {
            Some(id) => *id,
            None => {
                let mut sig = ir::Signature::new(self.st.call_conv);
                sig.params.extend(params.iter().map(|&t| AbiParam::new(t)));
                sig.returns
                    .extend(returns.iter().map(|&t| AbiParam::new(t)));
                let id = self
                    .st
                    .module
                    .declare_function(name, Linkage::Import, &sig)
                    .expect("import declaration");
                self.st.funcs.insert(name.to_string(), id);
                id
            }
        };
        let r = self.st.module.declare_func_in_func(id, b.func);
        self.refs.insert(name.to_string(), r);
        r
    }

    fn data_gv(&mut self, id: DataId, b: &mut FunctionBuilder) -> ir::GlobalValue {
        if let Some(g) = self.gvs.get(&id) {
            return *g;
        }
        let g = self.st.module.declare_data_in_func(id, b.func);
        self.gvs.insert(id, g);
        g
    }

    pub fn const_gv(&mut self, buf: u32, b: &mut FunctionBuilder) -> ir::GlobalValue {
        let id = self.st.consts[&buf];
        self.data_gv(id, b)
    }

    /// A read-only blob (kernel parameters), deduplicated by content.
    pub fn rodata_gv(&mut self, bytes: Vec<u8>, b: &mut FunctionBuilder) -> ir::GlobalValue {
        let id = match self.st.rodata.get(&bytes) {
            Some(id) => *id,
            None => {
                let id = self
                    .st
                    .module
                    .declare_anonymous_data(false, false)
                    .expect("data declaration");
                let mut d = DataDescription::new();
                d.define(bytes.clone().into_boxed_slice());
                d.set_align(8);
                self.st.module.define_data(id, &d).expect("rodata");
                self.st.rodata.insert(bytes, id);
                id
            }
        };
        self.data_gv(id, b)
    }
}

/// Defines one program's constants, steps and entry points.
fn emit_program(
    bd: &steps::Build,
    st: &mut ModState,
    ctx: &mut Context,
    fctx: &mut FunctionBuilderContext,
    profile: bool,
    clif: &mut String,
) -> Result<entry::Entries> {
    define_consts(st, bd.prog)?;
    let step_ids = steps::define_steps(bd, st, ctx, fctx, clif)?;
    entry::define_entries(bd, st, ctx, fctx, &step_ids, profile, clif)
}

/// Defines the constants some function of `prog` reads (unpacked originals of packed
/// weights are dropped) as the program's `ModState::consts`.
fn define_consts(st: &mut ModState, prog: &Program) -> Result<()> {
    let merr =
        |e: cranelift_module::ModuleError| Error::Internal(format!("cranelift module: {e:?}"));
    st.consts.clear();
    let used = prog.referenced_buffers();
    for (i, b) in prog.buffers.iter().enumerate() {
        if !used[i] {
            continue;
        }
        let Loc::Const(data) = &b.loc else {
            continue;
        };
        let key = st.shared_consts.as_ref().map(|_| {
            use std::hash::{Hash, Hasher};
            let mut h = std::hash::DefaultHasher::new();
            data.hash(&mut h);
            h.finish()
        });
        let known = key.and_then(|k| {
            let same = st.shared_consts.as_ref()?.get(&k)?;
            same.iter().find(|(d, _)| **d == **data).map(|(_, id)| *id)
        });
        let id = match known {
            Some(id) => id,
            None => {
                let id = st
                    .module
                    .declare_anonymous_data(false, false)
                    .map_err(merr)?;
                let mut d = DataDescription::new();
                let mut bytes = data.as_ref().clone();
                if bytes.is_empty() {
                    bytes.push(0);
                }
                d.define(bytes.into_boxed_slice());
                d.set_align(64);
                st.module.define_data(id, &d).map_err(merr)?;
                if let (Some(k), Some(shared)) = (key, st.shared_consts.as_mut()) {
                    shared.entry(k).or_default().push((data.clone(), id));
                }
                id
            }
        };
        st.consts.insert(i as u32, id);
    }
    Ok(())
}

/// A C identifier from a model name.
pub fn c_ident(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if s.is_empty() || s.as_bytes()[0].is_ascii_digit() {
        s.insert(0, '_');
    }
    s
}

pub fn compile(prog: &Program, prefix: &str, opts: &CodegenOptions) -> Result<Artifact> {
    let isa = make_isa(opts)?;
    let call_conv = isa.default_call_conv();
    let frontend_config = isa.frontend_config();
    let fma = vmath::Fma(match isa.triple().architecture {
        target_lexicon::Architecture::X86_64 => isa
            .isa_flags()
            .iter()
            .any(|f| f.name == "has_fma" && f.as_bool() == Some(true)),
        target_lexicon::Architecture::Aarch64(_) => true,
        _ => false,
    });
    let builder = ObjectBuilder::new(
        isa.clone(),
        format!("{prefix}.o"),
        cranelift_module::default_libcall_names(),
    )
    .map_err(|e| Error::Internal(format!("object builder: {e}")))?;
    let mut st = ModState {
        module: ObjectModule::new(builder),
        funcs: HashMap::new(),
        consts: HashMap::new(),
        shared_consts: prog.has_others().then(HashMap::new),
        rodata: HashMap::new(),
        call_conv,
    };
    let merr =
        |e: cranelift_module::ModuleError| Error::Internal(format!("cranelift module: {e:?}"));
    let mut ctx = Context::new();
    let mut fctx = FunctionBuilderContext::new();
    let mut clif = String::new();
    let build = |prog, prefix, export| steps::Build {
        prog,
        prefix,
        export,
        fma,
        frontend: frontend_config,
        keep_clif: opts.keep_clif,
    };
    // The chunk programs, local to the object; NAME_run_shaped calls them.
    let names: Vec<String> = (prog.chunks.iter())
        .map(|c| format!("{prefix}_chunk{}", c.items))
        .collect();
    let mut chunks = Vec::new();
    for (c, name) in prog.chunks.iter().zip(&names) {
        let bd = build(&c.program, name, false);
        let entries = emit_program(&bd, &mut st, &mut ctx, &mut fctx, opts.profile, &mut clif)?;
        chunks.push((vec![c.items], entries));
    }
    // The programs for single values of the run-time dim, local too.
    // Each table key holds the values of the first two run-time dims, `ANY` for one the
    // program takes at run time (`onnxc_runtime::shaped::Fixed`).
    let key = |f: &loops::Fixed| -> Vec<i64> {
        (0..2)
            .map(|k| f.at.get(k).copied().flatten().unwrap_or(shaped::ANY))
            .collect()
    };
    let fixed_names: Vec<String> = (prog.fixed.iter())
        .map(|f| {
            let at: Vec<String> = (f.at.iter())
                .map(|v| v.map_or("n".into(), |v| v.to_string()))
                .collect();
            format!("{prefix}_at{}", at.join("_"))
        })
        .collect();
    let mut fixed = Vec::new();
    for (f, name) in prog.fixed.iter().zip(&fixed_names) {
        let bd = build(&f.program, name, false);
        let entries = emit_program(&bd, &mut st, &mut ctx, &mut fctx, opts.profile, &mut clif)?;
        fixed.push((key(f), entries));
    }
    let bd = build(prog, prefix, true);
    let entries = emit_program(&bd, &mut st, &mut ctx, &mut fctx, opts.profile, &mut clif)?;
    // NAME_info()
    let info_data = header::define_info(&mut st.module, prog, prefix).map_err(merr)?;
    let mut sig = ir::Signature::new(call_conv);
    sig.returns.push(AbiParam::new(PTR));
    let info_id = st
        .module
        .declare_function(&format!("{prefix}_info"), Linkage::Export, &sig)
        .map_err(merr)?;
    ctx.func = ir::Function::with_name_signature(UserFuncName::user(1, 2), sig);
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let e = b.create_block();
        b.switch_to_block(e);
        let gv = st.module.declare_data_in_func(info_data, b.func);
        let v = b.ins().symbol_value(PTR, gv);
        b.ins().return_(&[v]);
        b.seal_all_blocks();
        b.finalize(frontend_config);
    }
    st.module.define_function(info_id, &mut ctx).map_err(merr)?;
    ctx.clear();
    let shaped_id = entry::define_run_shaped(
        &mut st,
        &mut ctx,
        &mut fctx,
        prefix,
        info_data,
        &entries,
        &chunks,
        &fixed,
        frontend_config,
    )?;
    if opts.emit_main {
        // int main(int argc, char **argv) {
        //     return onnxc_driver_main(argc, argv, NAME_run, NAME_info, NAME_run_threaded,
        //                              NAME_run_shaped); }
        let mut sig = ir::Signature::new(call_conv);
        sig.params
            .extend([AbiParam::new(types::I32), AbiParam::new(PTR)]);
        sig.returns.push(AbiParam::new(types::I32));
        let main_id = st
            .module
            .declare_function("main", Linkage::Export, &sig)
            .map_err(merr)?;
        ctx.func = ir::Function::with_name_signature(UserFuncName::user(1, 3), sig);
        {
            let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
            let e = b.create_block();
            b.append_block_params_for_function_params(e);
            b.switch_to_block(e);
            let p = b.block_params(e).to_vec();
            let mut imports = Imports {
                st: &mut st,
                refs: HashMap::new(),
                gvs: HashMap::new(),
            };
            let drv = imports.func(
                &mut b,
                "onnxc_driver_main",
                &[types::I32, PTR, PTR, PTR, PTR, PTR],
                &[types::I32],
            );
            let run_ref = imports.st.module.declare_func_in_func(entries.run, b.func);
            let info_ref = imports.st.module.declare_func_in_func(info_id, b.func);
            let rt_ref = imports
                .st
                .module
                .declare_func_in_func(entries.run_threaded, b.func);
            let ra = b.ins().func_addr(PTR, run_ref);
            let ia = b.ins().func_addr(PTR, info_ref);
            let rta = b.ins().func_addr(PTR, rt_ref);
            let sh_ref = imports.st.module.declare_func_in_func(shaped_id, b.func);
            let sha = b.ins().func_addr(PTR, sh_ref);
            let c = b.ins().call(drv, &[p[0], p[1], ra, ia, rta, sha]);
            let r = b.inst_results(c)[0];
            b.ins().return_(&[r]);
            b.seal_all_blocks();
            b.finalize(frontend_config);
        }
        st.module.define_function(main_id, &mut ctx).map_err(merr)?;
        ctx.clear();
    }
    let product = st.module.finish();
    let object = product
        .emit()
        .map_err(|e| Error::Internal(format!("object emission: {e}")))?;
    Ok(Artifact { object, clif })
}
