//! The program driver behind `onnxc run` and `onnxc bench`: a compiled model linked with a
//! generated `main` that calls `onnxc_driver_main`.
//!
//! `PROG run IN0.bin … --out DIR` reads raw input bytes (exactly `size_bytes` each), runs
//! the model once and writes `DIR/output_K.bin`. `PROG bench ITERS WARMUP [IN0.bin …]` times
//! the model (deterministic pseudo-random inputs when none are given) and prints one JSON
//! line. Exit codes: 0 ok, 1 usage or I/O error, 2 the model returned an error code.
//!
//! String tensors (ONNX type 8) cross the files as every element's bytes followed by a NUL;
//! the driver hands the model an array of pointers into them, and writes an output's
//! strings back the same way. A map input (`ONNXC_TENSOR_MAP`) crosses as its entry count
//! (u64), then its keys, then its values, numbers little-endian and strings NUL-terminated
//! (`map_file`); the driver hands the model an `onnxc_map` of arrays it builds from them.

use crate::abi::{ModelInfo, TensorInfo, onnxc_workspace_alloc, onnxc_workspace_free, strerror};
use std::ffi::{CStr, c_char};
use std::time::Instant;

pub type RunFn = unsafe extern "C" fn(*const *const u8, *const *mut u8, *mut u8) -> i32;
/// `NAME_run_threaded`.
pub type RunThreadedFn = unsafe extern "C" fn(
    *const *const u8,
    *const *mut u8,
    *mut u8,
    usize,
    *const crate::par::Threads,
) -> i32;
pub type InfoFn = unsafe extern "C" fn() -> *const ModelInfo;
/// `NAME_run_shaped`.
pub type RunShapedFn = unsafe extern "C" fn(
    *const crate::shaped::Tensor,
    *const crate::shaped::Tensor,
    *mut u8,
    usize,
    *const crate::par::Threads,
) -> i32;

fn batched(t: &TensorInfo) -> bool {
    t.flags & crate::abi::ONNXC_TENSOR_BATCHED != 0
}

fn dynamic(t: &TensorInfo) -> bool {
    t.flags & crate::abi::ONNXC_TENSOR_DYNAMIC != 0
}

fn tensors(p: *const TensorInfo, n: u32) -> &'static [TensorInfo] {
    if n == 0 {
        return &[];
    }
    // SAFETY: the generated info table holds n entries with static lifetime.
    unsafe { std::slice::from_raw_parts(p, n as usize) }
}

fn name(t: &TensorInfo) -> String {
    // SAFETY: names are NUL-terminated static strings.
    unsafe { CStr::from_ptr(t.name) }
        .to_string_lossy()
        .into_owned()
}

/// `n` zero bytes, allocated fallibly (as calloc: pages the model never touches cost nothing),
/// or a message naming `what` when they cannot be had: `vec![0; n]` would abort the process.
fn zeroed(n: u64, what: &str) -> Result<Vec<u8>, String> {
    let cannot = || format!("cannot allocate {n} bytes for {what}");
    let n = usize::try_from(n).map_err(|_| cannot())?;
    if n == 0 {
        return Ok(Vec::new());
    }
    let layout = std::alloc::Layout::array::<u8>(n).map_err(|_| cannot())?;
    // SAFETY: the layout's size is not zero.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        return Err(cannot());
    }
    // SAFETY: `p` comes from the global allocator with the layout of `n` bytes (the Vec's
    // capacity and alignment), all of them initialized to zero.
    Ok(unsafe { Vec::from_raw_parts(p, n, n) })
}

/// Deterministic pseudo-random bytes for one input: floats in [-1, 1), integers 0/1, or a
/// message when they cannot be allocated.
fn synthetic(t: &TensorInfo, seed: u64) -> Result<Vec<u8>, String> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let n = t.size_bytes as usize;
    let mut out = Vec::new();
    // An element's bytes past `n` at most: no reallocation.
    out.try_reserve_exact(n.saturating_add(8)).map_err(|_| {
        format!(
            "cannot allocate {} bytes for input '{}'",
            t.size_bytes,
            name(t)
        )
    })?;
    match t.dtype {
        1 => {
            while out.len() < n {
                let v = (next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        11 => {
            while out.len() < n {
                let v = (next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        10 | 16 => {
            while out.len() < n {
                out.extend_from_slice(&0u16.to_le_bytes());
            }
        }
        _ => {
            let es = match t.dtype {
                // The low-precision types: a byte (a code, or packed elements).
                2 | 3 | 9 | 17..=26 => 1,
                4 | 5 => 2,
                6 | 12 => 4,
                _ => 8,
            };
            while out.len() < n {
                let mut e = vec![0u8; es];
                e[0] = (next() & 1) as u8;
                out.extend_from_slice(&e);
            }
        }
    }
    out.truncate(n);
    Ok(out)
}

/// ONNX's code for string elements.
const STRING: i32 = 8;

fn is_map(t: &TensorInfo) -> bool {
    t.flags & crate::abi::ONNXC_TENSOR_MAP != 0
}

/// The `onnxc_map` (its bytes) of a map input's file: `u64` count, keys, values (module
/// doc). The arrays it points to, and the strings they point to, are pushed on `store`,
/// whose buffers outlive the run.
fn map_file(t: &TensorInfo, d: &[u8], store: &mut Vec<Vec<u8>>) -> Result<Vec<u8>, String> {
    let count = d
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
        .ok_or("shorter than its entry count")?;
    let n = usize::try_from(count)
        .ok()
        .filter(|&n| n <= d.len())
        .ok_or("its entry count exceeds its bytes")?;
    let mut at = 8usize;
    // One array of `n` elements of type `ty`: numbers copied, strings as pointers.
    let mut array = |ty: i32, store: &mut Vec<Vec<u8>>| -> Result<*const u8, String> {
        if n == 0 {
            return Ok(std::ptr::null());
        }
        let bytes = if ty == STRING {
            let mut starts = Vec::with_capacity(n);
            let mut end = at;
            for _ in 0..n {
                let len = d[end..]
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or("a string has no NUL")?;
                starts.push(end - at);
                end += len + 1;
            }
            store.push(d[at..end].to_vec());
            let base = store.last().map_or(std::ptr::null(), |v| v.as_ptr());
            at = end;
            // SAFETY: every start lies inside the bytes just stored.
            starts
                .iter()
                .flat_map(|&s| (unsafe { base.add(s) } as u64).to_ne_bytes())
                .collect()
        } else {
            let width = if ty == 1 { 4 } else { 8 };
            let end = at + n * width;
            let v = d.get(at..end).ok_or("shorter than its entries")?.to_vec();
            at = end;
            v
        };
        store.push(bytes);
        Ok(store.last().map_or(std::ptr::null(), |v| v.as_ptr()))
    };
    let keys = array(t.key_type, store)?;
    let values = array(t.dtype, store)?;
    if at != d.len() {
        return Err("longer than its entries".into());
    }
    let mut m = Vec::with_capacity(24);
    m.extend_from_slice(&(n as i64).to_ne_bytes());
    m.extend_from_slice(&(keys as u64).to_ne_bytes());
    m.extend_from_slice(&(values as u64).to_ne_bytes());
    Ok(m)
}

/// An output array of string pointers as NUL-terminated runs (a null pointer: empty).
fn string_pack(ptrs: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in ptrs.chunks_exact(8) {
        let p = u64::from_ne_bytes(c.try_into().expect("8 bytes")) as *const c_char;
        if !p.is_null() {
            // SAFETY: the model writes pointers to NUL-terminated strings of its tables or
            // of the inputs, alive until the driver returns.
            out.extend_from_slice(unsafe { CStr::from_ptr(p) }.to_bytes());
        }
        out.push(0);
    }
    out
}

fn fail(msg: String) -> i32 {
    eprintln!("onnxc driver: {msg}");
    1
}

/// `PROG run IN.bin… --out DIR` or `PROG bench ITERATIONS WARMUP [IN.bin…]`, either with
/// `--threads N` (N > 1: `run_threaded` on the runtime's pool of N threads). A model with a
/// run-time batch (`ONNXC_TENSOR_BATCHED` inputs) takes files of any number of items (one
/// when synthetic; `--items N` says how many, needed when an item has no bytes), all the
/// same, and runs through `run_shaped`.
///
/// # Safety
/// `argv` holds `argc` C strings; `run`/`info`/`run_threaded` are a compiled model's entry
/// points.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_driver_main(
    argc: i32,
    argv: *const *const c_char,
    run: RunFn,
    info: InfoFn,
    run_threaded: RunThreadedFn,
    run_shaped: RunShapedFn,
) -> i32 {
    let mut args: Vec<String> = (0..argc as usize)
        // SAFETY: argv has argc valid C strings.
        .map(|i| {
            // SAFETY: i < argc, and argv holds argc valid NUL-terminated C strings (the contract).
            unsafe { CStr::from_ptr(*argv.add(i)) }
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let mut threads = 1usize;
    if let Some(i) = args.iter().position(|a| a == "--threads") {
        match args.get(i + 1).and_then(|s| s.parse::<usize>().ok()) {
            Some(n) if n >= 1 => threads = n,
            _ => return fail("--threads takes a thread count of at least 1".into()),
        }
        args.drain(i..i + 2);
    }
    // `--items N`: the run-time batch (else what the first batched input's file holds).
    let mut given_items = None;
    if let Some(i) = args.iter().position(|a| a == "--items") {
        match args.get(i + 1).and_then(|s| s.parse::<usize>().ok()) {
            Some(n) => given_items = Some(n),
            None => return fail("--items takes a count of batch items".into()),
        }
        args.drain(i..i + 2);
    }
    // `--dims V0,V1,…`: the values of the dims the model takes at run time (else what the
    // input files hold, or, with synthetic inputs, their bounds).
    let mut given_dims: Option<Vec<i64>> = None;
    if let Some(i) = args.iter().position(|a| a == "--dims") {
        let v: Option<Vec<i64>> = args
            .get(i + 1)
            .and_then(|s| s.split(',').map(|d| d.trim().parse::<i64>().ok()).collect());
        match v {
            Some(v) => given_dims = Some(v),
            None => return fail("--dims takes the run-time dims' values, D0,D1,…".into()),
        }
        args.drain(i..i + 2);
    }
    // SAFETY: info() returns the model's static table.
    let info = unsafe { &*info() };
    let ins = tensors(info.inputs, info.num_inputs);
    let outs = tensors(info.outputs, info.num_outputs);
    let n_dims = info.num_dims as usize;
    let (bounds, least): (Vec<i64>, Vec<i64>) = if n_dims == 0 {
        (vec![], vec![])
    } else {
        // SAFETY: the info table's bounds and least values hold num_dims values each.
        unsafe {
            (
                std::slice::from_raw_parts(info.dim_bounds, n_dims).to_vec(),
                std::slice::from_raw_parts(info.dim_least, n_dims).to_vec(),
            )
        }
    };
    let shape_of = |t: &'static TensorInfo| {
        // SAFETY: `t` is an entry of the model's info table.
        unsafe { crate::shaped::Dims::of(t) }
    };
    let mode = args.get(1).map(String::as_str).unwrap_or("");
    let (files, out_dir, iters, warmup) = match mode {
        "run" => {
            let mut files = Vec::new();
            let mut out_dir = None;
            let mut it = args[2..].iter();
            while let Some(a) = it.next() {
                if a == "--out" {
                    out_dir = it.next().cloned();
                } else {
                    files.push(a.clone());
                }
            }
            match out_dir {
                Some(d) => (files, Some(d), 1usize, 0usize),
                None => return fail("usage: PROG run IN.bin… --out DIR".into()),
            }
        }
        "bench" => {
            let p = |i: usize| args.get(i).and_then(|s| s.parse::<usize>().ok());
            match (p(2), p(3)) {
                (Some(n), Some(w)) => (args[4..].to_vec(), None, n.max(1), w),
                _ => return fail("usage: PROG bench ITERATIONS WARMUP [IN.bin…]".into()),
            }
        }
        _ => {
            return fail(
                "usage: PROG run IN.bin… --out DIR | PROG bench ITERATIONS WARMUP [IN.bin…]".into(),
            );
        }
    };
    // The bytes an input file gives the ABI: a string input's file holds NUL-terminated
    // strings, and the ABI passes a pointer for each.
    let file_len = |t: &TensorInfo, f: &str| {
        let len = if t.dtype == STRING {
            std::fs::read(f).map(|d| d.iter().filter(|&&b| b == 0).count() as u64 * 8)
        } else {
            std::fs::metadata(f).map(|m| m.len())
        };
        len.map_err(|e| format!("{f}: {e}"))
    };
    // The run-time dims: given, found from the first input file that follows them (a batched
    // one when `--items` says how many items it holds), or the bounds.
    let dim_values: Vec<i64> = match given_dims {
        Some(d) if d.len() == n_dims => d,
        Some(d) => {
            return fail(format!(
                "--dims: the model takes {n_dims} dims at run time, got {}",
                d.len()
            ));
        }
        None => {
            let mut d = bounds.clone();
            let from_file = ins.iter().zip(&files).find(|(t, _)| {
                !shape_of(t).run.is_empty()
                    && (!batched(t) || given_items.is_some())
                    && t.dtype != STRING
            });
            if n_dims == 1
                && let Some((t, f)) = from_file
            {
                let len = match file_len(t, f) {
                    Ok(l) => l,
                    Err(e) => return fail(e),
                };
                let items = if batched(t) {
                    given_items.unwrap_or(1) as u64
                } else {
                    1
                };
                match (least[0]..=bounds[0]).find(|&v| shape_of(t).bytes(t, &[v]) * items == len) {
                    Some(v) => d[0] = v,
                    None => {
                        return fail(format!(
                            "{f}: {len} bytes, input '{}' at no value of its run-time dim from \
                             {} to {}",
                            name(t),
                            least[0],
                            bounds[0]
                        ));
                    }
                }
            } else if n_dims > 0 && !files.is_empty() {
                return fail(format!(
                    "the model takes {n_dims} dim(s) at run time that its input files do not \
                     say alone: give --dims D0,… (and --items N for a run-time batch)"
                ));
            }
            d
        }
    };
    if let Some(k) = (0..n_dims).find(|&k| !(least[k]..=bounds[k]).contains(&dim_values[k])) {
        return fail(format!(
            "--dims: run-time dim {k} is {}; the model takes it from {} to {}",
            dim_values[k], least[k], bounds[k]
        ));
    }
    // Items of the run-time batch: given, or what the first batched input's file holds.
    let mut items = given_items.unwrap_or(1);
    if given_items.is_none()
        && let Some((t, f)) = ins.iter().zip(&files).find(|(t, _)| batched(t))
    {
        let len = match file_len(t, f) {
            Ok(l) => l,
            Err(e) => return fail(e),
        };
        let item = shape_of(t).bytes(t, &dim_values);
        if item == 0 || len % item != 0 {
            return fail(format!(
                "{f}: {len} bytes, not a whole number of items of input '{}' ({item} bytes each)",
                name(t),
            ));
        }
        items = (len / item) as usize;
    }
    let size = |t: &'static TensorInfo| {
        // Saturating: an `--items` too large for memory fails to allocate, not wraps.
        (shape_of(t).bytes(t, &dim_values)).saturating_mul(if batched(t) {
            items as u64
        } else {
            1
        })
    };
    let mut inputs: Vec<Vec<u8>> = Vec::new();
    // The bytes string inputs point into (one NUL-terminated run per element).
    let mut string_data: Vec<Vec<u8>> = Vec::new();
    if files.is_empty() && mode == "bench" {
        for (k, t) in ins.iter().enumerate() {
            if is_map(t) {
                // An empty map.
                inputs.push(vec![0u8; 24]);
                continue;
            }
            if t.dtype == STRING {
                // Empty strings.
                string_data.push(vec![0u8]);
                let p = string_data.last().map_or(std::ptr::null(), |d| d.as_ptr()) as u64;
                let mut ptrs = match zeroed(t.size_bytes, &format!("input '{}'", name(t))) {
                    Ok(v) => v,
                    Err(e) => return fail(e),
                };
                for c in ptrs.chunks_exact_mut(8) {
                    c.copy_from_slice(&p.to_ne_bytes());
                }
                inputs.push(ptrs);
                continue;
            }
            match synthetic(t, k as u64 + 1) {
                Ok(v) => inputs.push(v),
                Err(e) => return fail(e),
            }
        }
    } else {
        if files.len() != ins.len() {
            return fail(format!(
                "the model has {} inputs, got {} files",
                ins.len(),
                files.len()
            ));
        }
        for (t, f) in ins.iter().zip(&files) {
            if is_map(t) {
                let m = std::fs::read(f)
                    .map_err(|e| e.to_string())
                    .and_then(|d| map_file(t, &d, &mut string_data));
                match m {
                    Ok(m) => inputs.push(m),
                    Err(e) => return fail(format!("{f}: map input '{}': {e}", name(t))),
                }
                continue;
            }
            if t.dtype == STRING {
                let d = match std::fs::read(f) {
                    Ok(d) => d,
                    Err(e) => return fail(format!("{f}: {e}")),
                };
                let n = (size(t) / 8) as usize;
                // At most one string per byte of the file, whatever the model needs.
                let mut starts = Vec::with_capacity(n.min(d.len()));
                let mut at = 0usize;
                for (k, &b) in d.iter().enumerate() {
                    if b == 0 {
                        starts.push(at);
                        at = k + 1;
                    }
                }
                if starts.len() != n || at != d.len() {
                    return fail(format!(
                        "{f}: {} NUL-terminated strings, input '{}' needs {n}",
                        starts.len(),
                        name(t)
                    ));
                }
                string_data.push(d);
                let base = string_data.last().map_or(std::ptr::null(), |d| d.as_ptr());
                // SAFETY: every start lies inside the bytes just stored, which live until
                // the end of this function (the Vec's heap buffer does not move).
                let ptrs: Vec<u8> = starts
                    .iter()
                    .flat_map(|&s| (unsafe { base.add(s) } as u64).to_ne_bytes())
                    .collect();
                inputs.push(ptrs);
                continue;
            }
            match std::fs::read(f) {
                Ok(d) if d.len() as u64 == size(t) => inputs.push(d),
                Ok(d) => {
                    return fail(format!(
                        "{f}: {} bytes, input '{}' needs {}",
                        d.len(),
                        name(t),
                        size(t)
                    ));
                }
                Err(e) => return fail(format!("{f}: {e}")),
            }
        }
    }
    let mut outputs: Vec<Vec<u8>> = Vec::with_capacity(outs.len());
    for t in outs {
        match zeroed(size(t), &format!("output '{}'", name(t))) {
            Ok(v) => outputs.push(v),
            Err(e) => return fail(e),
        }
    }
    let in_ptrs: Vec<*const u8> = inputs.iter().map(|v| v.as_ptr()).collect();
    let out_ptrs: Vec<*mut u8> = outputs.iter_mut().map(|v| v.as_mut_ptr()).collect();
    let pool = if threads > 1 {
        match crate::par::Pool::new(threads) {
            Ok(p) => Some(p),
            Err(e) => return fail(format!("cannot start {threads} threads: {e}")),
        }
    } else {
        None
    };
    let table = pool.as_ref().map(|p| p.threads());
    let ws_size = info.workspace_size + (threads as u64 - 1) * info.workspace_per_worker;
    // SAFETY: allocation of the model's declared workspace size.
    let ws = unsafe { onnxc_workspace_alloc(ws_size) };
    if ws.is_null() {
        return fail(format!("cannot allocate a workspace of {ws_size} bytes"));
    }
    // Freed when the driver returns: string outputs made at run time point into it.
    let _ws = OwnedWorkspace(ws);
    // NAME_run_shaped's tensors, for a model with a run-time batch or outputs whose dims
    // depend on the data.
    let shaped = n_dims > 0 || ins.iter().chain(outs).any(|t| batched(t) || dynamic(t));
    let mut dims: Vec<Vec<i64>> = ins
        .iter()
        .chain(outs)
        .map(|t| {
            let s = shape_of(t);
            let mut d: Vec<i64> = (0..t.rank as usize).map(|k| s.at(k, &dim_values)).collect();
            if batched(t) {
                d[0] = items as i64;
            }
            d
        })
        .collect();
    let tensors: Vec<crate::shaped::Tensor> = in_ptrs
        .iter()
        .map(|&p| p as *mut u8)
        .chain(out_ptrs.iter().copied())
        .zip(&mut dims)
        .enumerate()
        .map(|(k, (p, d))| crate::shaped::Tensor {
            data: p.cast(),
            rank: d.len(),
            dims: d.as_mut_ptr(),
            // Inputs have no capacity; outputs their buffer's length.
            capacity: k
                .checked_sub(ins.len())
                .and_then(|o| outputs.get(o))
                .map_or(0, Vec::len),
        })
        .collect();
    let mut times = Vec::with_capacity(iters);
    let mut rc = 0;
    for i in 0..warmup + iters {
        if i == warmup {
            reset_profile();
        }
        let t0 = Instant::now();
        // SAFETY: buffers match the model's info table; the workspace holds what the
        // threads need.
        rc = unsafe {
            match &table {
                _ if shaped => run_shaped(
                    tensors.as_ptr(),
                    tensors[ins.len()..].as_ptr(),
                    ws,
                    ws_size as usize,
                    table.as_ref().map_or(std::ptr::null(), |t| t as *const _),
                ),
                Some(t) => {
                    run_threaded(in_ptrs.as_ptr(), out_ptrs.as_ptr(), ws, ws_size as usize, t)
                }
                None => run(in_ptrs.as_ptr(), out_ptrs.as_ptr(), ws),
            }
        };
        let dt = t0.elapsed().as_secs_f64() * 1e3;
        if rc != 0 {
            break;
        }
        if i >= warmup {
            times.push(dt);
        }
    }
    if rc != 0 {
        eprintln!(
            "onnxc driver: the model returned error {rc}: {}",
            strerror(rc)
        );
        return 2;
    }
    if let Some(dir) = out_dir {
        for (k, o) in outputs.iter().enumerate() {
            let path = format!("{dir}/output_{k}.bin");
            // The dims of an output sized by the data or by the run-time dims, beside it
            // (little-endian int64s).
            if dynamic(&outs[k]) || !shape_of(&outs[k]).run.is_empty() {
                let d = &dims[ins.len() + k];
                let dims_path = format!("{dir}/output_{k}.dims");
                let bytes: Vec<u8> = d.iter().flat_map(|x| x.to_le_bytes()).collect();
                if let Err(e) = std::fs::write(&dims_path, bytes) {
                    return fail(format!("{dims_path}: {e}"));
                }
            }
            let o = if dynamic(&outs[k]) {
                // As many bytes as the dims the run wrote hold.
                let d = &dims[ins.len() + k];
                // SAFETY: the info table's shape holds `rank` dims.
                let bound: u64 = unsafe { std::slice::from_raw_parts(outs[k].shape, d.len()) }
                    .iter()
                    .map(|&b| b as u64)
                    .product();
                let elem = outs[k].size_bytes.checked_div(bound).unwrap_or(0);
                let len = d.iter().map(|&x| x as u64).product::<u64>() * elem;
                &o[..(len as usize).min(o.len())]
            } else {
                &o[..]
            };
            let strings;
            let o = if outs[k].dtype == STRING {
                strings = string_pack(o);
                &strings
            } else {
                o
            };
            if let Err(e) = std::fs::write(&path, o) {
                return fail(format!("{path}: {e}"));
            }
        }
        return 0;
    }
    // A profiling build names its steps in a symbol the driver can look up.
    let names = std::env::var("ONNXC_PROFILE_NAMES")
        .ok()
        .and_then(|p| std::fs::read_to_string(p).ok());
    print_profile(names.as_deref());
    times.sort_by(|a, b| a.total_cmp(b));
    let q = |f: f64| times[((times.len() - 1) as f64 * f).round() as usize];
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    println!(
        "{{\"iterations\": {}, \"median_ms\": {:.6}, \"min_ms\": {:.6}, \"p90_ms\": {:.6}, \"mean_ms\": {:.6}, \"peak_rss_kb\": {}}}",
        times.len(),
        q(0.5),
        times[0],
        q(0.9),
        mean,
        peak_rss_kb()
    );
    0
}

/// A workspace from `onnxc_workspace_alloc`, freed on drop.
struct OwnedWorkspace(*mut u8);

impl Drop for OwnedWorkspace {
    fn drop(&mut self) {
        // SAFETY: the pointer came from onnxc_workspace_alloc and is freed once.
        unsafe { onnxc_workspace_free(self.0) };
    }
}

/// Peak resident set size of this process (Linux `VmHWM`), 0 where unknown.
pub fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

// ---- profiling builds (`onnxc bench --profile`) ------------------------------------------

thread_local! {
    /// Per-step (total ns, calls, fastest call's ns); used only by profiling builds of a
    /// model.
    static PROFILE: std::cell::RefCell<Vec<(u64, u64, u64)>> = const { std::cell::RefCell::new(Vec::new()) };
    static EPOCH: Instant = Instant::now();
}

/// Monotonic nanoseconds (profiling builds call this around each step).
#[unsafe(no_mangle)]
pub extern "C" fn onnxc_prof_now() -> u64 {
    EPOCH.with(|e| e.elapsed().as_nanos() as u64)
}

/// Records that step `step` ran since `start` (from `onnxc_prof_now`).
#[unsafe(no_mangle)]
pub extern "C" fn onnxc_prof_record(step: u64, start: u64) {
    let now = onnxc_prof_now();
    PROFILE.with(|p| {
        let mut p = p.borrow_mut();
        let i = step as usize;
        if p.len() <= i {
            p.resize(i + 1, (0, 0, u64::MAX));
        }
        let ns = now.saturating_sub(start);
        p[i].0 += ns;
        p[i].1 += 1;
        p[i].2 = p[i].2.min(ns);
    });
}

fn reset_profile() {
    PROFILE.with(|p| p.borrow_mut().clear());
}

/// Prints the per-step profile (most expensive first); `names` has one line per step.
fn print_profile(names: Option<&str>) {
    let names: Vec<&str> = names.map(|n| n.lines().collect()).unwrap_or_default();
    PROFILE.with(|p| {
        let p = p.borrow();
        let total: u64 = p.iter().map(|x| x.0).sum();
        if total == 0 {
            return;
        }
        let mut order: Vec<usize> = (0..p.len()).collect();
        order.sort_by(|&a, &b| p[b].0.cmp(&p[a].0));
        // The fastest call of each step beside the mean: on a shared machine whose speed
        // drifts between calls, the minima compare steps (and engines) more steadily.
        println!(
            "profile: {:.3} ms per run in {} steps ({:.3} ms summing each step's fastest call)",
            total as f64 / 1e6 / p.first().map_or(1, |x| x.1.max(1)) as f64,
            p.len(),
            // (A step never called has no fastest call: min with its total, 0.)
            p.iter().map(|x| x.2.min(x.0)).sum::<u64>() as f64 / 1e6
        );
        // ONNXC_PROFILE_STEPS=N lists N steps instead of the 40 most expensive.
        let limit = std::env::var("ONNXC_PROFILE_STEPS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(40);
        for &i in order.iter().take(limit) {
            let (ns, n, min) = p[i];
            println!(
                "  step {i:>4} {:>9.3} ms {:>5.1}% (fastest {:.3} ms)  {}",
                ns as f64 / 1e6 / n.max(1) as f64,
                100.0 * ns as f64 / total as f64,
                min.min(ns) as f64 / 1e6,
                names.get(i).copied().unwrap_or("")
            );
        }
    });
}
