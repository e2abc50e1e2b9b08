//! The generated C header and the `onnxc_model_info` tables embedded in the object.

#![allow(
    clippy::result_large_err,
    reason = "cranelift_module's own error type, returned once per model"
)]

use crate::ir::graph::{IoKind, MapKeys};
use crate::loops::{IoDesc, Program};
use cranelift_module::{DataDescription, DataId, Module, ModuleResult};
use cranelift_object::ObjectModule;
use std::fmt::Write;

fn cstring(module: &mut ObjectModule, s: &str) -> ModuleResult<DataId> {
    let id = module.declare_anonymous_data(false, false)?;
    let mut d = DataDescription::new();
    let mut bytes = s.as_bytes().to_vec();
    bytes.push(0);
    d.define(bytes.into_boxed_slice());
    module.define_data(id, &d)?;
    Ok(id)
}

fn i64s(module: &mut ObjectModule, v: &[i64]) -> ModuleResult<DataId> {
    let id = module.declare_anonymous_data(false, false)?;
    let mut d = DataDescription::new();
    let mut bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    if bytes.is_empty() {
        bytes.resize(8, 0);
    }
    d.define(bytes.into_boxed_slice());
    d.set_align(8);
    module.define_data(id, &d)?;
    Ok(id)
}

/// An array of pointers to NUL-terminated strings.
fn cstrings(module: &mut ObjectModule, v: &[String]) -> ModuleResult<DataId> {
    let id = module.declare_anonymous_data(false, false)?;
    let mut d = DataDescription::new();
    d.define(vec![0u8; 8 * v.len().max(1)].into_boxed_slice());
    d.set_align(8);
    for (k, s) in v.iter().enumerate() {
        let target = cstring(module, s)?;
        let gv = module.declare_data_in_data(target, &mut d);
        d.write_data_addr(8 * k as u32, gv, 0);
    }
    module.define_data(id, &d)?;
    Ok(id)
}

/// Bytes of one `onnxc_tensor_info`.
const TENSOR_INFO: usize = 64;

/// `onnxc_tensor_info[]`: {name, dtype, rank, shape, size_bytes, key_type, num_keys, keys,
/// flags, reserved, run_dims}.
/// `strings`: the program makes strings in the workspace, which its string outputs may
/// point into (`ONNXC_TENSOR_WORKSPACE`).
fn tensor_table(module: &mut ObjectModule, ios: &[IoDesc], strings: bool) -> ModuleResult<DataId> {
    let id = module.declare_anonymous_data(false, false)?;
    let mut d = DataDescription::new();
    let mut bytes = vec![0u8; TENSOR_INFO * ios.len().max(1)];
    let mut relocs = Vec::new();
    for (k, io) in ios.iter().enumerate() {
        let name = cstring(module, &io.name)?;
        let shape = i64s(module, &io.shape)?;
        let base = TENSOR_INFO * k;
        if let Some(keys) = &io.keys {
            bytes[base + 32..base + 36].copy_from_slice(&keys.onnx_code().to_le_bytes());
            bytes[base + 36..base + 40].copy_from_slice(&(keys.len() as i32).to_le_bytes());
            let table = match &**keys {
                MapKeys::Ints(v) => i64s(module, v)?,
                MapKeys::Strings(v) => cstrings(module, v)?,
            };
            relocs.push((base + 40, table));
        }
        if let Some(key) = io.map_key {
            bytes[base + 32..base + 36].copy_from_slice(&key.onnx_code().to_le_bytes());
        }
        bytes[base + 8..base + 12].copy_from_slice(&io.dtype.onnx_code().to_le_bytes());
        bytes[base + 12..base + 16].copy_from_slice(&(io.shape.len() as i32).to_le_bytes());
        let mut flags = 0;
        if io.batched {
            flags |= onnxc_runtime::abi::ONNXC_TENSOR_BATCHED;
        }
        if io.dims_at.is_some() {
            flags |= onnxc_runtime::abi::ONNXC_TENSOR_DYNAMIC;
        }
        if io.map_key.is_some() {
            flags |= onnxc_runtime::abi::ONNXC_TENSOR_MAP;
        }
        if strings && io.dtype == crate::ir::DType::Str {
            flags |= onnxc_runtime::abi::ONNXC_TENSOR_WORKSPACE;
        }
        if !io.run_dims.is_empty() {
            flags |= onnxc_runtime::abi::ONNXC_TENSOR_RUN_DIMS;
            // Per dim: the run-time dim it follows (-1: none), mul, add, pre, div, then the
            // second one (-1: none), its mul, pre and div, and the product's multiplier.
            let table: Vec<i64> = io
                .run_dims
                .iter()
                .flat_map(|r| match r {
                    Some(r) => {
                        let [e, m, p, q, c] = r.other.map_or([-1, 0, 0, 1, 0], |o| {
                            [i64::from(o.dim), o.mul, o.pre, o.div, o.prod]
                        });
                        [i64::from(r.dim), r.mul, r.add, r.pre, r.div, e, m, p, q, c]
                    }
                    None => [-1, 0, 0, 0, 1, -1, 0, 0, 1, 0],
                })
                .collect();
            let t = i64s(module, &table)?;
            relocs.push((base + 56, t));
        }
        bytes[base + 48..base + 52].copy_from_slice(&flags.to_le_bytes());
        let size: i64 = io.bytes();
        bytes[base + 24..base + 32].copy_from_slice(&(size as u64).to_le_bytes());
        relocs.push((base, name));
        relocs.push((base + 16, shape));
    }
    d.define(bytes.into_boxed_slice());
    d.set_align(8);
    for (off, target) in relocs {
        let gv = module.declare_data_in_data(target, &mut d);
        d.write_data_addr(off as u32, gv, 0);
    }
    module.define_data(id, &d)?;
    Ok(id)
}

/// `onnxc_model_info`: {name, num_inputs, num_outputs, inputs, outputs, workspace_size,
/// workspace_per_worker, num_dims, dim_bounds, dim_names, dim_least, dim_multiples,
/// batch_bound}.
pub fn define_info(
    module: &mut ObjectModule,
    prog: &Program,
    prefix: &str,
) -> ModuleResult<DataId> {
    let name = cstring(module, prefix)?;
    let strings = prog.string_bytes > 0;
    let ins = tensor_table(module, &prog.inputs, false)?;
    let outs = tensor_table(module, prog.public_outputs(), strings)?;
    let id = module.declare_anonymous_data(false, false)?;
    let mut d = DataDescription::new();
    let mut bytes = vec![0u8; 96];
    bytes[88..96].copy_from_slice(&prog.batch_bound.to_le_bytes());
    bytes[48..56].copy_from_slice(&(prog.run_dims.len() as u64).to_le_bytes());
    let bounds: Vec<i64> = prog.run_dims.iter().map(|d| d.bound).collect();
    let least: Vec<i64> = prog.run_dims.iter().map(|d| d.least).collect();
    let names: Vec<String> = prog.run_dims.iter().map(|d| d.name.clone()).collect();
    let bounds = i64s(module, &bounds)?;
    let least = i64s(module, &least)?;
    let multiples: Vec<i64> = prog.run_dims.iter().map(|d| d.multiple).collect();
    let multiples = i64s(module, &multiples)?;
    let names = cstrings(module, &names)?;
    bytes[8..12].copy_from_slice(&(prog.inputs.len() as u32).to_le_bytes());
    bytes[12..16].copy_from_slice(&(prog.public_outputs().len() as u32).to_le_bytes());
    bytes[32..40].copy_from_slice(&prog.workspace_bytes().to_le_bytes());
    bytes[40..48].copy_from_slice(&prog.workspace_per_worker().to_le_bytes());
    d.define(bytes.into_boxed_slice());
    d.set_align(8);
    for (off, target) in [
        (0u32, name),
        (16, ins),
        (24, outs),
        (56, bounds),
        (64, names),
        (72, least),
        (80, multiples),
    ] {
        let gv = module.declare_data_in_data(target, &mut d);
        d.write_data_addr(off, gv, 0);
    }
    module.define_data(id, &d)?;
    Ok(id)
}

/// `s`, a string from the model or the command line (a tensor, dim or file name), as text
/// that is safe anywhere inside a C `/* */` comment of the header (and a Rust `//` one),
/// whatever text comes before and after it: it can neither end nor open a comment (`*/` is
/// written `*\/`, `/*` `/\*`; a leading `/` or `*` is `\/` or `\*`, a trailing one `\x2f` or
/// `\x2a`), nor start a line or splice one (newlines, control and bidirectional-format
/// characters are written as escapes, `\n`, `\u{1b}`; a backslash `\\`, or `\x5c` at the
/// end; the `??` of a trigraph `?\?`). Other text is kept as it is.
pub fn comment_text(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    for (k, &c) in chars.iter().enumerate() {
        let prev = k.checked_sub(1).map(|p| chars[p]);
        let next = chars.get(k + 1).copied();
        match c {
            // An escape of a last character must not end in a backslash, `*` or `/`.
            '\\' if next.is_none() => out.push_str("\\x5c"),
            '/' if next.is_none() => out.push_str("\\x2f"),
            '*' if next.is_none() => out.push_str("\\x2a"),
            '\\' => out.push_str("\\\\"),
            '/' if prev.is_none() || prev == Some('*') => out.push_str("\\/"),
            '*' if prev.is_none() || prev == Some('/') => out.push_str("\\*"),
            '?' if prev == Some('?') => out.push_str("\\?"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control()
                || matches!(
                    c,
                    '\u{200e}' | '\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
                ) =>
            {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// The per-model header `NAME.h`.
pub fn header(prog: &Program, prefix: &str, source: &str) -> String {
    let source = comment_text(source);
    let guard = format!("ONNXC_MODEL_{}_H", prefix.to_uppercase());
    let up = prefix.to_uppercase();
    let mut h = String::new();
    let _ = writeln!(
        h,
        "/* Generated by onnxc {} from {source}. Do not edit. */",
        env!("CARGO_PKG_VERSION")
    );
    let _ = writeln!(
        h,
        "#ifndef {guard}\n#define {guard}\n\n#include \"onnxc_runtime.h\"\n"
    );
    let _ = writeln!(h, "#ifdef __cplusplus\nextern \"C\" {{\n#endif\n");
    let _ = writeln!(
        h,
        "/* Workspace bytes {prefix}_run needs (64-byte aligned), and what {prefix}_run_threaded needs\n   \
         with `workers` threads: {up}_WORKSPACE_SIZE_THREADS(workers).{} */",
        if prog.chunks.is_empty() {
            String::new()
        } else {
            format!(
                " Both cover the chunk\n   \
                 programs {prefix}_run_shaped runs too (see below), so they exceed what one item needs."
            )
        }
    );
    let _ = writeln!(h, "#define {up}_WORKSPACE_SIZE {}u", prog.workspace_bytes());
    let _ = writeln!(
        h,
        "#define {up}_WORKSPACE_PER_WORKER {}u",
        prog.workspace_per_worker()
    );
    let _ = writeln!(
        h,
        "#define {up}_WORKSPACE_SIZE_THREADS(workers) \\\n    \
         ((size_t){}u + (size_t)(workers) * {up}_WORKSPACE_PER_WORKER)\n",
        prog.workspace_base()
    );
    let _ = writeln!(h, "#define {up}_NUM_INPUTS {}", prog.inputs.len());
    let _ = writeln!(
        h,
        "#define {up}_NUM_OUTPUTS {}\n",
        prog.public_outputs().len()
    );
    if prog.string_bytes > 0 {
        let _ = writeln!(
            h,
            "/* The model makes strings at run time, in {} bytes of the workspace (onnxc\n   \
             --string-bytes; more is ONNXC_ERR_STRINGS): its string outputs point there, valid\n   \
             until the workspace is used again or freed, and a NULL workspace is\n   \
             ONNXC_ERR_WORKSPACE (ONNXC_TENSOR_WORKSPACE). */\n",
            prog.string_bytes
        );
    }
    if !prog.run_dims.is_empty() {
        let list: Vec<String> = (prog.run_dims.iter())
            .map(|d| comment_text(&d.describe()))
            .collect();
        let _ = writeln!(
            h,
            "/* Dims taken at run time: {}. Only {prefix}_run_shaped runs the model: it finds\n   \
             their values in the inputs' dims (a value outside its range, or inputs that\n   \
             disagree, is ONNXC_ERR_SHAPE) and writes the outputs' dims; {prefix}_run and\n   \
             {prefix}_run_threaded return ONNXC_ERR_DYNAMIC. The workspace sizes cover the\n   \
             bounds; the sizes below are at the bounds.{} */\n",
            list.join(", "),
            if prog.fixed.is_empty() {
                String::new()
            } else {
                let values: Vec<String> = (prog.fixed.iter())
                    .map(|f| comment_text(&f.describe(&prog.run_dims)))
                    .collect();
                let what = if values.len() == 1 {
                    "a program compiled for that value"
                } else {
                    "programs compiled for those values"
                };
                format!(
                    "\n   At {} the model runs {what} (the\n   formulas serve the others).",
                    values.join("; ")
                )
            }
        );
    }
    let io = |h: &mut String, kind: &str, list: &[IoDesc]| {
        for (k, t) in list.iter().enumerate() {
            let name = comment_text(&t.name);
            let n: i64 = t.shape.iter().product();
            let dims: Vec<String> = t
                .shape
                .iter()
                .enumerate()
                .map(|(k, d)| match t.run_dims.get(k).copied().flatten() {
                    Some(r) => comment_text(&r.show(&prog.run_dims)),
                    None => d.to_string(),
                })
                .collect();
            if let Some(key) = t.map_key {
                let _ = writeln!(
                    h,
                    "/* {kind} {k}: \"{}\", a map of {} keys to {} values: pass a pointer to an onnxc_map\n   \
                     (onnxc_runtime.h) of {} and {} arrays (ONNXC_TENSOR_MAP) */",
                    name,
                    key,
                    t.dtype,
                    key.c_type(),
                    t.dtype.c_type()
                );
                continue;
            }
            if t.dims_at.is_some() {
                let _ = writeln!(
                    h,
                    "/* {kind} {k}: \"{}\", {} with dims that depend on the data, at most [{}] = {} elements\n   \
                     of {} ({} bytes); {prefix}_run_shaped writes its dims (ONNXC_TENSOR_DYNAMIC) */",
                    name,
                    t.dtype,
                    dims.join(", "),
                    n,
                    t.dtype.c_type(),
                    t.bytes()
                );
            } else if t.batched {
                let mut all = dims.clone();
                all[0] = "n".into();
                // A model with run-time dims runs through NAME_run_shaped only.
                let one = if prog.run_dims.is_empty() {
                    format!("{prefix}_run takes one item")
                } else {
                    "one item is".to_string()
                };
                let _ = writeln!(
                    h,
                    "/* {kind} {k}: \"{}\", {} [{}], n the run-time batch: {one}\n   \
                     [{}] = {} elements of {} ({} bytes), {prefix}_run_shaped n of them */",
                    name,
                    t.dtype,
                    all.join(", "),
                    dims.join(", "),
                    n,
                    t.dtype.c_type(),
                    t.bytes()
                );
            } else {
                let _ = writeln!(
                    h,
                    "/* {kind} {k}: \"{}\", {} [{}] = {} elements of {} ({} bytes) */",
                    name,
                    t.dtype,
                    dims.join(", "),
                    n,
                    t.dtype.c_type(),
                    t.bytes()
                );
            }
            let _ = writeln!(h, "#define {up}_{}_{k}_SIZE {}u", kind.to_uppercase(), n);
            if let Some(bits) = t.dtype.packed_bits() {
                let _ = writeln!(
                    h,
                    "/*   packed: {} elements per byte, the first in the lowest bits (ONNX's \
                     layout); {} bytes */",
                    8 / bits,
                    t.bytes()
                );
            } else if t.dtype.is_lowp_float() {
                let _ = writeln!(
                    h,
                    "/*   one {} code per byte (ONNX's {}) */",
                    t.dtype,
                    crate::ir::DType::onnx_code_name(t.dtype.onnx_code())
                );
            }
            if t.dtype == crate::ir::DType::Str {
                let _ = writeln!(
                    h,
                    "/*   strings: NUL-terminated UTF-8; {} */",
                    if kind == "input" {
                        "the caller's, read during the call"
                    } else {
                        "pointers into the model's read-only data, valid while the program runs"
                    }
                );
            }
            if let Some(keys) = &t.keys {
                let list: Vec<String> = match &**keys {
                    MapKeys::Ints(v) => v.iter().map(|x| x.to_string()).collect(),
                    MapKeys::Strings(v) => v.iter().map(|s| format!("{s:?}")).collect(),
                };
                let _ = writeln!(
                    h,
                    "/*   a sequence of maps (ZipMap), one per row: row i is the map {{ key[j]: value[i][j] }}\n   \
                     with these {} keys ({}), also in {prefix}_info()->{kind}s[{k}].keys:\n     {} */",
                    keys.len(),
                    if keys.onnx_code() == 7 {
                        "int64"
                    } else {
                        "strings"
                    },
                    comment_text(&list.join(", "))
                );
            }
        }
    };
    io(&mut h, "input", &prog.inputs);
    io(&mut h, "output", prog.public_outputs());
    for (kind, groups) in [
        ("input", &prog.input_groups),
        ("output", &prog.output_groups),
    ] {
        for g in groups
            .iter()
            .filter(|g| g.kind != IoKind::Tensor || g.optional)
        {
            let what = match g.kind {
                IoKind::Sequence(elem) if g.len == 0 => {
                    format!("an empty sequence of {elem} tensors: no {kind} in the ABI")
                }
                IoKind::Sequence(elem) => format!(
                    "a sequence of {} {elem} tensors (its length fixed when the model was \
                     compiled): {kind}s {}..{} in order",
                    g.len,
                    g.first,
                    g.first + g.len - 1
                ),
                IoKind::Tensor => format!("its value: {kind} {}", g.first),
                IoKind::Absent => format!("compiled as empty: no {kind} in the ABI"),
            };
            let _ = writeln!(
                h,
                "/* The model's {kind} \"{}\"{}: {what} */",
                comment_text(&g.name),
                if g.optional { " (an optional)" } else { "" }
            );
        }
    }
    if prog.dynamic() {
        let _ = writeln!(
            h,
            "\n/* Some outputs have as many rows as the data selects (NonZero, NonMaxSuppression,\n   \
             Unique, a TopK, Slice or Loop sized at run time): only {prefix}_run_shaped runs this model; {prefix}_run and\n   \
             {prefix}_run_threaded return ONNXC_ERR_DYNAMIC. */"
        );
    }
    let _ = writeln!(
        h,
        "\n/* Runs the model. inputs[i] and outputs[i] point to row-major buffers as listed above\n   \
         (outputs are caller-allocated). workspace: {up}_WORKSPACE_SIZE bytes, 64-byte aligned, or NULL\n   \
         to have the runtime allocate and free one. Returns ONNXC_OK (0) or an ONNXC_ERR_* code (then\n   \
         the outputs' contents are unspecified).\n   \
         Reentrant: concurrent calls need separate workspaces. */"
    );
    let _ = writeln!(
        h,
        "int {prefix}_run(const void *const *inputs, void *const *outputs, void *workspace);\n"
    );
    let _ = writeln!(
        h,
        "/* Bytes of workspace {prefix}_run needs. */\nsize_t {prefix}_workspace_size(void);\n"
    );
    let _ = writeln!(
        h,
        "/* Runs the model on the caller's threads (see onnxc_threads in onnxc_runtime.h: a pool of\n   \
         the application's, or onnxc_pool_create's). Kernels and loops split their outputs over\n   \
         threads->workers threads; every output element is computed by the same operations in the\n   \
         same order whatever the thread count, so results are bit-identical to {prefix}_run's for any\n   \
         number of threads. threads may be NULL (one thread). workspace: NULL (allocated and freed\n   \
         here), or workspace_bytes >= {prefix}_workspace_size_threads(threads->workers) bytes, 64-byte\n   \
         aligned (ONNXC_ERR_WORKSPACE otherwise). Tensors and scratch live in the workspace: a\n   \
         call given one makes no heap allocation. Reentrant: concurrent calls need separate\n   \
         workspaces and may share one pool. */"
    );
    let _ = writeln!(
        h,
        "int {prefix}_run_threaded(const void *const *inputs, void *const *outputs, void *workspace,\n    \
         size_t workspace_bytes, const onnxc_threads *threads);\n"
    );
    let _ = writeln!(
        h,
        "/* Bytes of workspace {prefix}_run_threaded needs with `workers` threads\n   \
         (= {up}_WORKSPACE_SIZE_THREADS(workers) for 1 <= workers <= ONNXC_MAX_WORKERS). */\n\
         size_t {prefix}_workspace_size_threads(size_t workers);\n"
    );
    let batched = prog.inputs.iter().any(|t| t.batched);
    let _ = writeln!(
        h,
        "/* Runs the model on tensors given with their dims (onnxc_tensor in onnxc_runtime.h), on\n   \
         threads as {prefix}_run_threaded (threads may be NULL) and with its workspace (NULL, or\n   \
         workspace_bytes >= {prefix}_workspace_size_threads(workers)). Each input's rank and dims\n   \
         must be the model's (ONNXC_ERR_SHAPE otherwise, before anything is read){}.\n   \
         Every output's dims are written (where dims is not NULL); if an\n   \
         output's capacity is below its size, nothing runs and the call returns ONNXC_ERR_CAPACITY,\n   \
         so a caller can size its buffers from the dims and call again. Given a workspace, it\n   \
         allocates nothing (but per-item pointer tables for more than 64 inputs and outputs).{} */",
        if batched && !prog.chunks.is_empty() {
            let sizes: Vec<String> = prog.chunks.iter().map(|c| c.items.to_string()).collect();
            format!(
                ", but for dim 0 of the\n   \
                 batched ones, which all give the batch size n (0 allowed when every output is batched).\n   \
                 The items run in chunks of {} while as many are left (programs compiled for that many\n   \
                 items, which share the weights' traffic), the rest one by one: an item's results are\n   \
                 {prefix}_run's on that item alone up to rounding (a chunk's matrix products sum in another\n   \
                 order), the same for every thread count",
                sizes.join(" and ")
            ) + &batch_bound_text(prog)
        } else if batched {
            ", but for dim 0 of the\n   \
             batched ones, which all give the batch size n (0 allowed when every output is batched).\n   \
             The program runs once per item: each item's results are bit-identical to {prefix}_run's\n   \
             on that item alone"
                    .replace("{prefix}", prefix)
                + &batch_bound_text(prog)
        } else {
            String::new()
        },
        if prog.dynamic() {
            "\n   An output whose dims depend on the data is known only after the run: its dims are written\n   \
             then, and ONNXC_ERR_CAPACITY returned if its capacity is below its size (the other\n   \
             outputs' contents are then unspecified); a capacity of its bound always suffices."
        } else {
            ""
        }
    );
    let _ = writeln!(
        h,
        "int {prefix}_run_shaped(const onnxc_tensor *inputs, const onnxc_tensor *outputs,\n    \
         void *workspace, size_t workspace_bytes, const onnxc_threads *threads);\n"
    );
    let _ = writeln!(
        h,
        "/* Names, element types (ONNX codes) and shapes of inputs and outputs. */"
    );
    let _ = writeln!(h, "const onnxc_model_info *{prefix}_info(void);\n");
    let _ = writeln!(h, "#ifdef __cplusplus\n}}\n#endif\n\n#endif /* {guard} */");
    h
}

/// The sentence of `NAME_run_shaped`'s comment on a bounded run-time batch (empty for none).
fn batch_bound_text(prog: &Program) -> String {
    match prog.batch_bound {
        b if b > 0 => format!(
            ".\n   The batch holds at most {b} items (the bound it was compiled with): more is ONNXC_ERR_SHAPE"
        ),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::comment_text;

    #[test]
    fn comment_text_cannot_end_a_comment_or_a_line() {
        for s in [
            "x */\n#error e\n/*",
            "*/",
            "/*",
            "**/",
            "a*",
            "/a",
            "*",
            "/",
            "??/",
            "/*/",
            "*/*",
            "a/*b*/c",
            "a\\",
            "\r\u{0}\u{7f}\u{85}\u{2028}\u{202e}",
        ] {
            let t = comment_text(s);
            // Whatever text comes before and after it in a comment.
            for around in [format!("*{t}/"), format!("/{t}*"), format!(" {t} ")] {
                assert!(
                    !around.contains("*/") && !around.contains("/*"),
                    "{s:?}: {around}"
                );
            }
            assert!(!t.ends_with('\\') && !t.contains("??"), "{s:?}: {t}");
            assert!(!t.starts_with('/') && !t.ends_with('*'), "{s:?}: {t}");
            assert!(
                !t.chars()
                    .any(|c| c.is_control() || ('\u{2028}'..='\u{202e}').contains(&c)),
                "{s:?}: {t:?}"
            );
        }
        assert_eq!(comment_text("input/0:relu*2"), "input/0:relu*2");
    }
}
