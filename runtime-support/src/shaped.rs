//! `NAME_run_shaped`: a model's entry point that takes every tensor with its dims.
//!
//! Each generated `NAME_run_shaped` calls `onnxc_run_shaped` with the model's info table
//! and its `NAME_run_threaded`. The inputs' dims are checked against the model's (a
//! mismatch is `ONNXC_ERR_SHAPE`, before anything is read); every output's dims are written,
//! and an output whose buffer is too small makes the call return `ONNXC_ERR_CAPACITY`
//! before anything runs (snprintf's convention: the caller learns the size and retries).
//! Tensors whose dim 0 is a run-time batch (`ONNXC_TENSOR_BATCHED`) hold `n` items; the
//! compiled program computes one, so it runs once per item, on the same workspace. A model
//! may also carry programs compiled for chunks of several items (`Chunk`, largest first):
//! the run then takes the largest chunk that fits the items left, and single items last.
//! A model taking a dim at run time gets the dims' values after the input pointers, except
//! at values that have a program of their own (`Fixed`: below the values the model's
//! formulas serve), which then runs instead.
//!
//! Outputs whose dims depend on the data (`ONNXC_TENSOR_DYNAMIC`: the rows NonZero selects)
//! are written by the program into staging space at the end of the workspace, at their
//! upper-bound dims, each followed by another program output holding its actual dims
//! (`staging_bytes` lays that space out). The run then checks those dims against the
//! bounds, writes them, and copies each output's elements into the caller's buffer when it
//! has room (else `ONNXC_ERR_CAPACITY`, the dims written).

use crate::abi::{
    self, ModelInfo, ONNXC_ERR_ALLOC, ONNXC_ERR_CAPACITY, ONNXC_ERR_SHAPE, ONNXC_ERR_VALUE,
    ONNXC_ERR_WORKSPACE, ONNXC_OK, ONNXC_TENSOR_BATCHED, ONNXC_TENSOR_DYNAMIC,
    ONNXC_TENSOR_RUN_DIMS, ONNXC_TENSOR_WORKSPACE, TensorInfo, WORKSPACE_ALIGN,
};
use crate::par::{MAX_WORKERS, Par, Threads};
use std::ffi::c_void;

/// `onnxc_tensor`: a tensor and its dims.
#[repr(C)]
pub struct Tensor {
    /// Row-major elements (inputs: read; outputs: written).
    pub data: *mut c_void,
    /// `rank` dims: read for inputs, written for outputs (may be null for an output).
    pub dims: *mut i64,
    pub rank: usize,
    /// Outputs: bytes available at `data`. Ignored for inputs.
    pub capacity: usize,
}

/// `NAME_run_threaded`.
pub type RunThreaded = unsafe extern "C" fn(
    *const *const c_void,
    *const *mut c_void,
    *mut c_void,
    usize,
    *const Threads,
) -> i32;

/// `NAME_workspace_size_threads`.
pub type WorkspaceSize = unsafe extern "C" fn(usize) -> usize;

/// `onnxc_chunk`: a model's program for `items` batch items at once, called as the one-item
/// program is (with the pointers of the chunk's first item), on the same workspace: the
/// model's workspace sizes cover every one of its programs.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Chunk {
    pub items: usize,
    pub run: RunThreaded,
}

/// `onnxc_fixed`: a model's program for single values of its run-time dims, below those
/// its formulas serve (a model that drops loops of extent 1 at 1), called on the same
/// workspace. `values[k]` is the value of run-time dim `k` (of the first two) it is for, or
/// `ANY` for the one dim it takes at run time: it then gets a pointer to that dim's value
/// after the inputs' pointers (as its dim 0); a program with no `ANY` among the model's
/// dims gets no dims.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Fixed {
    pub values: [i64; 2],
    pub run: RunThreaded,
}

/// `Fixed::values` of a dim the program takes at run time.
pub const ANY: i64 = -1;

/// The first of `fixed` for the run-time dims' values `dims` (the compiler puts programs for
/// both dims' values before those for one), with the dim it takes at run time, if any.
fn fixed_for(fixed: &[Fixed], dims: &[i64]) -> Option<(RunThreaded, Option<usize>)> {
    let n = dims.len().min(2);
    let f = fixed_entry(fixed, dims)?;
    Some((f.run, (0..n).find(|&k| f.values[k] == ANY)))
}

/// The first of `fixed` for the run-time dims' values `dims` (`fixed_for`).
fn fixed_entry<'a>(fixed: &'a [Fixed], dims: &[i64]) -> Option<&'a Fixed> {
    let n = dims.len().min(2);
    let for_dims = |f: &&Fixed| {
        (0..n).all(|k| f.values[k] == ANY || f.values[k] == dims[k])
            && (0..n).any(|k| f.values[k] != ANY)
    };
    fixed.iter().find(for_dims)
}

/// The program to run at the run-time dims' values `dims` (`run`, or one of `fixed`), with
/// the dims it reads after the inputs' pointers (None: it reads none).
fn program_for<'a>(
    fixed: &[Fixed],
    run: RunThreaded,
    dims: &'a [i64],
) -> (RunThreaded, Option<&'a [i64]>) {
    match fixed_for(fixed, dims) {
        Some((f, Some(k))) => (f, Some(&dims[k..])),
        Some((f, None)) => (f, None),
        None => (run, (!dims.is_empty()).then_some(dims)),
    }
}

/// Most inputs plus outputs whose per-item pointers live on the stack; a model with more
/// allocates them per call.
const STACK_IO: usize = 64;

/// Staging bytes for outputs whose dims depend on the data, given each one's upper-bound
/// bytes and rank in order: per output, its elements and then its `rank` int64 dims, each
/// rounded up to 64 bytes. A model's workspace sizes include them, after the program's own.
pub fn staging_bytes(outputs: impl IntoIterator<Item = (u64, usize)>) -> u64 {
    let up = |b: u64| b.div_ceil(WORKSPACE_ALIGN as u64) * WORKSPACE_ALIGN as u64;
    outputs
        .into_iter()
        .map(|(bytes, rank)| up(bytes) + up(rank as u64 * 8))
        .sum()
}

fn dynamic(t: &TensorInfo) -> bool {
    t.flags & ONNXC_TENSOR_DYNAMIC != 0
}

/// Most dims a model takes at run time.
const MAX_RUN_DIMS: usize = 8;

/// Values per dim in `TensorInfo::run_dims`: `dim, mul, add, pre, div, dim2, mul2, pre2,
/// div2, prod`.
const RUN_DIM_VALUES: usize = 10;

/// A tensor's dims at the model's run-time dims `dims` (`TensorInfo::run_dims`).
pub(crate) struct Dims<'a> {
    shape: &'a [i64],
    /// `RUN_DIM_VALUES` values per dim, or empty.
    pub(crate) run: &'a [i64],
}

impl<'a> Dims<'a> {
    /// # Safety
    /// `t` is an entry of a model's info table.
    pub(crate) unsafe fn of(t: &'a TensorInfo) -> Self {
        let rank = t.rank.max(0) as usize;
        // SAFETY: the info table's shape holds `rank` dims, its run_dims 10 · rank values.
        unsafe {
            Dims {
                shape: table(t.shape, rank),
                run: if t.flags & ONNXC_TENSOR_RUN_DIMS != 0 {
                    table(t.run_dims, RUN_DIM_VALUES * rank)
                } else {
                    &[]
                },
            }
        }
    }

    /// Dim `k`'s entry: `dim, mul, add, pre, div, dim2, mul2, pre2, div2, prod`.
    fn entry(&self, k: usize) -> Option<[i64; RUN_DIM_VALUES]> {
        self.run
            .get(RUN_DIM_VALUES * k..RUN_DIM_VALUES * (k + 1))?
            .try_into()
            .ok()
    }

    /// Dim `k` at `dims`: with `s = (dims[dim] + pre) / div` and, where `dim2` is a dim,
    /// `t = (dims[dim2] + pre2) / div2` (rounding down), `mul·s + mul2·t + prod·s·t + add`
    /// (the values lie in the dims' ranges, where the compiler checked every dim).
    pub(crate) fn at(&self, k: usize, dims: &[i64]) -> i64 {
        let Some([d, mul, add, pre, div, d2, mul2, pre2, div2, prod]) = self.entry(k) else {
            return self.shape[k];
        };
        let step = |d: i64, pre: i64, div: i64| {
            let v = dims.get(usize::try_from(d).ok()?)?;
            (div > 0).then(|| (v + pre).div_euclid(div))
        };
        let Some(s) = step(d, pre, div) else {
            return self.shape[k];
        };
        if d2 < 0 {
            return mul * s + add;
        }
        match step(d2, pre2, div2) {
            Some(t) => mul * s + mul2 * t + prod * s * t + add,
            None => self.shape[k],
        }
    }

    /// The tensor's bytes at `dims`, from its bytes at the bounds.
    pub(crate) fn bytes(&self, t: &TensorInfo, dims: &[i64]) -> u64 {
        if self.run.is_empty() {
            return t.size_bytes;
        }
        let bound: i64 = self.shape.iter().product();
        if bound <= 0 {
            return 0;
        }
        let now: i64 = (0..self.shape.len()).map(|k| self.at(k, dims)).product();
        t.size_bytes / bound as u64 * now as u64
    }
}

/// The model's run-time dims, found in the inputs' dims: each input dim that follows one
/// gives its value, which must be whole, within `least..=bound` and the same everywhere —
/// or below `least` where one of `fixed` is for that value (the corner of two dims' least
/// values, say) and is the program the values run (`fixed_for`).
fn run_dims(
    ins: &[Tensor],
    in_info: &[TensorInfo],
    least: &[i64],
    bounds: &[i64],
    fixed: &[Fixed],
) -> Result<[i64; MAX_RUN_DIMS], i32> {
    let mut dims = [0i64; MAX_RUN_DIMS];
    let mut known = [false; MAX_RUN_DIMS];
    for (t, ti) in ins.iter().zip(in_info) {
        // SAFETY: an entry of the model's info table.
        let d = unsafe { Dims::of(ti) };
        if d.run.is_empty() {
            continue;
        }
        if t.rank != d.shape.len() || (t.rank > 0 && t.dims.is_null()) {
            return Err(ONNXC_ERR_SHAPE);
        }
        // SAFETY: caller contract: `rank` dims.
        let given = unsafe { table(t.dims, t.rank) };
        for (k, &g) in given.iter().enumerate() {
            let Some([which, mul, add, pre, div, dim2, ..]) = d.entry(k) else {
                return Err(ONNXC_ERR_VALUE);
            };
            // A dim of two dims gives neither: it is checked against the others' values.
            if which < 0 || mul <= 0 || dim2 >= 0 {
                continue;
            }
            // An input dim is `mul · dim + add` (the compiler writes no other).
            if pre != 0 || div != 1 {
                return Err(ONNXC_ERR_VALUE);
            }
            let j = which as usize;
            let (Some(&bound), Some(_)) = (bounds.get(j), least.get(j)) else {
                return Err(ONNXC_ERR_VALUE);
            };
            let v = g.checked_sub(add).ok_or(ONNXC_ERR_SHAPE)?;
            // A value below its least is checked once all are known (only a program for
            // that value serves it).
            if v % mul != 0 || !(0..=bound).contains(&(v / mul)) {
                return Err(ONNXC_ERR_SHAPE);
            }
            if known[j] && dims[j] != v / mul {
                return Err(ONNXC_ERR_SHAPE);
            }
            dims[j] = v / mul;
            known[j] = true;
        }
    }
    if known[..bounds.len()].contains(&false) {
        return Err(ONNXC_ERR_SHAPE);
    }
    // A value below its dim's least runs only the program for that value.
    let n = bounds.len();
    let below = |j: usize| dims[j] < least[j].max(0);
    if (0..n).any(below) {
        let f = fixed_entry(fixed, &dims[..n]).ok_or(ONNXC_ERR_SHAPE)?;
        if (0..n).any(|j| below(j) && (j >= 2 || f.values[j] != dims[j])) {
            return Err(ONNXC_ERR_SHAPE);
        }
    }
    Ok(dims)
}

/// Runs a model on shaped tensors (the body of every `NAME_run_shaped`).
///
/// # Safety
/// `info` is a model's info table and `run`/`workspace_size` its entry points; `chunks`
/// holds `num_chunks` of its chunk programs (null when none), largest first, and `fixed`
/// `num_fixed` programs for single values of its run-time dims (null when none); `inputs`
/// and `outputs` point to `num_inputs`/`num_outputs` tensors whose `dims` hold `rank`
/// values (outputs' may be null) and whose `data` holds the elements their dims give
/// (outputs: `capacity` bytes); `workspace` is null or `workspace_bytes` bytes, 64-byte
/// aligned; `threads` as `NAME_run_threaded`'s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_run_shaped(
    info: *const ModelInfo,
    run: RunThreaded,
    workspace_size: WorkspaceSize,
    chunks: *const Chunk,
    num_chunks: usize,
    fixed: *const Fixed,
    num_fixed: usize,
    inputs: *const Tensor,
    outputs: *const Tensor,
    workspace: *mut c_void,
    workspace_bytes: usize,
    threads: *const Threads,
) -> i32 {
    if info.is_null() || (chunks.is_null() && num_chunks > 0) || (fixed.is_null() && num_fixed > 0)
    {
        return ONNXC_ERR_VALUE;
    }
    // SAFETY: caller contract: `num_chunks` chunk programs, `num_fixed` fixed ones.
    let (chunks, fixed) = unsafe { (table(chunks, num_chunks), table(fixed, num_fixed)) };
    // SAFETY: caller contract: a model's info table.
    let info = unsafe { &*info };
    let (n_in, n_out) = (info.num_inputs as usize, info.num_outputs as usize);
    let view = |p: *const Tensor, n: usize| -> Option<&[Tensor]> {
        if n == 0 {
            Some(&[])
        } else if p.is_null() {
            None
        } else {
            // SAFETY: caller contract: `n` tensors.
            Some(unsafe { std::slice::from_raw_parts(p, n) })
        }
    };
    let (Some(ins), Some(outs)) = (view(inputs, n_in), view(outputs, n_out)) else {
        return ONNXC_ERR_VALUE;
    };
    // SAFETY: the info table's arrays hold num_inputs/num_outputs entries.
    let (in_info, out_info) = unsafe { (table(info.inputs, n_in), table(info.outputs, n_out)) };
    // The dims the model takes at run time, from the inputs.
    let n_dims = info.num_dims as usize;
    if n_dims > MAX_RUN_DIMS
        || (n_dims > 0 && (info.dim_bounds.is_null() || info.dim_least.is_null()))
    {
        return ONNXC_ERR_VALUE;
    }
    // SAFETY: the info table's bounds and least values hold num_dims values each.
    let (bounds, least) = unsafe {
        (
            table(info.dim_bounds, n_dims),
            table(info.dim_least, n_dims),
        )
    };
    let dim_values = match run_dims(ins, in_info, least, bounds, fixed) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let dim_values = &dim_values[..n_dims];
    // The batch size, from the inputs that carry it.
    let mut batch: Option<usize> = None;
    for (t, ti) in ins.iter().zip(in_info) {
        // SAFETY: an entry of the model's info table.
        let shape = unsafe { Dims::of(ti) };
        let model = shape.shape;
        if t.rank != model.len() || (t.rank > 0 && t.dims.is_null()) {
            return ONNXC_ERR_SHAPE;
        }
        // SAFETY: caller contract: `rank` dims.
        let dims = unsafe { table(t.dims, t.rank) };
        let batched = ti.flags & ONNXC_TENSOR_BATCHED != 0;
        for (k, &d) in dims.iter().enumerate() {
            let m = shape.at(k, dim_values);
            if batched && k == 0 {
                let Ok(n) = usize::try_from(d) else {
                    return ONNXC_ERR_SHAPE;
                };
                if batch.is_some_and(|b| b != n) {
                    return ONNXC_ERR_SHAPE;
                }
                batch = Some(n);
            } else if d != m {
                return ONNXC_ERR_SHAPE;
            }
        }
        if t.data.is_null() && shape.bytes(ti, dim_values) > 0 && !(batched && dims[0] == 0) {
            return ONNXC_ERR_VALUE;
        }
    }
    let n = batch.unwrap_or(1);
    if info.batch_bound > 0 && n as u64 > info.batch_bound as u64 {
        return ONNXC_ERR_SHAPE;
    }
    // Strings the run makes live in the workspace, which must outlive the call.
    if workspace.is_null()
        && out_info
            .iter()
            .any(|t| t.flags & ONNXC_TENSOR_WORKSPACE != 0)
    {
        return ONNXC_ERR_WORKSPACE;
    }
    // Outputs: their dims, and room for them (dynamic ones: their bounds until the run).
    let mut short = false;
    for (t, ti) in outs.iter().zip(out_info) {
        // SAFETY: an entry of the model's info table.
        let shape = unsafe { Dims::of(ti) };
        let model = shape.shape;
        if t.rank != model.len() {
            return ONNXC_ERR_SHAPE;
        }
        let batched = ti.flags & ONNXC_TENSOR_BATCHED != 0;
        let items = if batched { n } else { 1 };
        let Some(need) = (shape.bytes(ti, dim_values) as usize).checked_mul(items) else {
            return ONNXC_ERR_SHAPE;
        };
        if !t.dims.is_null() {
            for k in 0..model.len() {
                let d = if batched && k == 0 {
                    n as i64
                } else {
                    shape.at(k, dim_values)
                };
                // SAFETY: caller contract: an output's non-null dims hold `rank` values.
                unsafe { *t.dims.add(k) = d };
            }
        }
        if !dynamic(ti) && (t.capacity < need || (need > 0 && t.data.is_null())) {
            short = true;
        }
    }
    if short {
        return ONNXC_ERR_CAPACITY;
    }
    if out_info.iter().any(dynamic) {
        if batch.is_some() {
            // The compiler gives a model with dynamic outputs no run-time batch.
            return ONNXC_ERR_VALUE;
        }
        // A program compiled for these values of the run-time dims takes the dim it leaves
        // at run time, if any.
        let (program, dims) = program_for(fixed, run, dim_values);
        // SAFETY: the caller's contract, passed on.
        return unsafe {
            run_dynamic(
                (ins, dims, outs),
                (out_info, dim_values),
                program,
                workspace_size,
                workspace,
                workspace_bytes,
                threads,
            )
        };
    }
    if n == 0 {
        // No item to run: outputs without the batch would stay unwritten.
        let shared = |t: &TensorInfo| t.flags & ONNXC_TENSOR_BATCHED == 0;
        return if out_info.iter().any(shared) {
            ONNXC_ERR_SHAPE
        } else {
            ONNXC_OK
        };
    }
    // One workspace for every item.
    // SAFETY: the caller's contract, passed on.
    let (ws, need, owned) =
        match unsafe { workspace_for(threads, workspace_size, workspace, workspace_bytes) } {
            Ok(w) => w,
            Err(code) => return code,
        };
    // A program compiled for these values of the run-time dims, if any, with the dims it
    // takes (those from the one it leaves at run time; none when it leaves none).
    let (one_item, dims) = program_for(fixed, run, dim_values);
    // The inputs' pointers, then (for a model taking dims at run time) the dims, then the
    // outputs' pointers.
    let extra = usize::from(dims.is_some());
    let mut stack = [std::ptr::null_mut::<c_void>(); STACK_IO];
    let mut heap = Vec::new();
    let ptrs = pointer_table(&mut stack, &mut heap, n_in + extra + n_out);
    // Each tensor's bytes per item.
    let item_bytes = |ti: &TensorInfo| {
        // SAFETY: an entry of the model's info table.
        unsafe { Dims::of(ti) }.bytes(ti, dim_values) as usize
    };
    let mut rc = ONNXC_OK;
    let mut item = 0;
    while item < n {
        // The largest chunk program that fits the items left, else the one-item program.
        let (items, program) = chunks
            .iter()
            .find(|c| c.items >= 1 && c.items <= n - item)
            .map_or((1, one_item), |c| (c.items, c.run));
        let io = ins.iter().zip(in_info).chain(outs.iter().zip(out_info));
        let (pi, po) = ptrs.split_at_mut(n_in + extra);
        let slots = pi[..n_in].iter_mut().chain(po.iter_mut());
        for (slot, (t, ti)) in slots.zip(io) {
            let step = if ti.flags & ONNXC_TENSOR_BATCHED != 0 {
                item * item_bytes(ti)
            } else {
                0
            };
            *slot = t.data.cast::<u8>().wrapping_add(step).cast();
        }
        if let Some(d) = dims {
            pi[n_in] = d.as_ptr().cast_mut().cast();
        }
        // SAFETY: every pointer is the first of `items` items of a tensor whose dims and
        // capacity were checked above (`item + items ≤ n`); the workspace holds what
        // `workers` threads need for every program of the model.
        rc = unsafe { program(pi.as_ptr().cast(), po.as_ptr(), ws, need, threads) };
        if rc != ONNXC_OK {
            break;
        }
        item += items;
    }
    if owned {
        // SAFETY: allocated above with this size.
        unsafe { abi::onnxc_workspace_free(ws.cast()) };
    }
    rc
}

/// The run's workspace for the workers of `threads`: the caller's, which must hold what
/// `workspace_size` says (`ONNXC_ERR_WORKSPACE`), or one allocated here (`ONNXC_ERR_ALLOC`);
/// with its size and whether the caller of this frees it.
///
/// # Safety
/// As `onnxc_run_shaped`'s `threads`, `workspace_size`, `workspace` and `workspace_bytes`.
unsafe fn workspace_for(
    threads: *const Threads,
    workspace_size: WorkspaceSize,
    workspace: *mut c_void,
    workspace_bytes: usize,
) -> Result<(*mut c_void, usize, bool), i32> {
    // SAFETY: caller contract on `threads`.
    let workers = unsafe { Par::from_raw(threads) }
        .workers()
        .clamp(1, MAX_WORKERS);
    // SAFETY: the model's own entry point.
    let need = unsafe { workspace_size(workers) };
    if workspace.is_null() {
        // SAFETY: any size; null on failure.
        let w = unsafe { abi::onnxc_workspace_alloc(need as u64) }.cast::<c_void>();
        if w.is_null() {
            return Err(ONNXC_ERR_ALLOC);
        }
        Ok((w, need, true))
    } else if workspace_bytes < need {
        Err(ONNXC_ERR_WORKSPACE)
    } else {
        Ok((workspace, need, false))
    }
}

/// `n` null pointers: in `stack` when they fit, else in `heap` (a model with more than
/// `STACK_IO` inputs and outputs).
fn pointer_table<'a>(
    stack: &'a mut [*mut c_void; STACK_IO],
    heap: &'a mut Vec<*mut c_void>,
    n: usize,
) -> &'a mut [*mut c_void] {
    if n <= STACK_IO {
        &mut stack[..n]
    } else {
        heap.resize(n, std::ptr::null_mut());
        heap
    }
}

/// One run of a model with outputs whose dims depend on the data (see the module doc): the
/// inputs are checked, static outputs have room; `dims` are the values of the run-time dims
/// `run` takes after its inputs (None for a model, or a program of one value, that takes
/// none), `dim_values` those of all the model's run-time dims.
///
/// # Safety
/// As `onnxc_run_shaped`.
unsafe fn run_dynamic(
    (ins, dims, outs): (&[Tensor], Option<&[i64]>, &[Tensor]),
    (out_info, dim_values): (&[TensorInfo], &[i64]),
    run: RunThreaded,
    workspace_size: WorkspaceSize,
    workspace: *mut c_void,
    workspace_bytes: usize,
    threads: *const Threads,
) -> i32 {
    let staged = || {
        out_info
            .iter()
            .filter(|t| dynamic(t))
            .map(|t| (t.size_bytes, t.rank as usize))
    };
    let staging = staging_bytes(staged()) as usize;
    // SAFETY: the caller's contract, passed on; the model's sizes include the staging.
    let (ws, need, owned) =
        match unsafe { workspace_for(threads, workspace_size, workspace, workspace_bytes) } {
            Ok(w) => w,
            Err(code) => return code,
        };
    let Some(program) = need.checked_sub(staging) else {
        if owned {
            // SAFETY: allocated by workspace_for with this size.
            unsafe { abi::onnxc_workspace_free(ws.cast()) };
        }
        return ONNXC_ERR_VALUE;
    };
    // Where dynamic output `k` and its dims are staged.
    let stage = ws.cast::<u8>().wrapping_add(program);
    let place = |k: usize| {
        let before = staging_bytes(staged().take(k)) as usize;
        let (bytes, _) = staged().nth(k).unwrap_or((0, 0));
        let data = stage.wrapping_add(before);
        let dims = data.wrapping_add(staging_bytes([(bytes, 0)]) as usize);
        (data, dims.cast::<i64>())
    };
    let n_dyn = staged().count();
    // The program's inputs, then (for a model taking dims at run time) the dims; its
    // outputs: the caller's static ones, staging for the dynamic ones, then each dynamic
    // one's dims.
    let n_in = ins.len() + usize::from(dims.is_some());
    let mut stack = [std::ptr::null_mut::<c_void>(); STACK_IO];
    let mut heap = Vec::new();
    let ptrs = pointer_table(&mut stack, &mut heap, n_in + outs.len() + n_dyn);
    let mut k = 0;
    for (slot, t) in ptrs.iter_mut().zip(ins) {
        *slot = t.data;
    }
    if let Some(d) = dims {
        ptrs[ins.len()] = d.as_ptr().cast_mut().cast();
    }
    for ((slot, t), ti) in ptrs[n_in..].iter_mut().zip(outs).zip(out_info) {
        *slot = if dynamic(ti) {
            k += 1;
            place(k - 1).0.cast()
        } else {
            t.data
        };
    }
    for (k, slot) in ptrs[n_in + outs.len()..].iter_mut().enumerate() {
        *slot = place(k).1.cast();
    }
    let (pi, po) = ptrs.split_at(n_in);
    // SAFETY: inputs and static outputs were checked by the caller; the staging holds each
    // dynamic output at its bounds and its dims; the workspace before it what the program
    // needs.
    let mut rc = unsafe { run(pi.as_ptr().cast(), po.as_ptr(), ws, program, threads) };
    if rc == ONNXC_OK {
        let dyn_outs = outs.iter().zip(out_info).filter(|(_, ti)| dynamic(ti));
        for (k, (t, ti)) in dyn_outs.enumerate() {
            let (data, dims) = place(k);
            // SAFETY: the info table's shape holds `rank` dims; the program wrote `rank`
            // dims into the staging.
            let (most, dims) = unsafe {
                (
                    table(ti.shape, ti.rank as usize),
                    table(dims.cast_const(), ti.rank as usize),
                )
            };
            // The bound the program wrote the output at: at the call's run-time dims (each
            // at most the model's bound, where it is largest).
            // SAFETY: an entry of the model's info table.
            let shape = unsafe { Dims::of(ti) };
            let mut at = [0i64; STACK_RANK];
            let mut heap = Vec::new();
            let bound: &[i64] = if shape.run.is_empty() {
                most
            } else {
                let b = if most.len() <= STACK_RANK {
                    &mut at[..most.len()]
                } else {
                    heap.resize(most.len(), 0);
                    &mut heap[..]
                };
                for (j, v) in b.iter_mut().enumerate() {
                    *v = shape.at(j, dim_values).clamp(0, most[j]);
                }
                b
            };
            if dims.iter().zip(bound).any(|(&d, &b)| d < 0 || d > b) {
                rc = ONNXC_ERR_SHAPE;
                break;
            }
            if !t.dims.is_null() {
                // SAFETY: caller contract: an output's non-null dims hold `rank` values.
                unsafe { std::ptr::copy_nonoverlapping(dims.as_ptr(), t.dims, dims.len()) };
            }
            let cap: usize = most.iter().map(|&b| b as usize).product();
            let elem = (ti.size_bytes as usize).checked_div(cap).unwrap_or(0);
            let len: usize = dims.iter().map(|&d| d as usize).product();
            if t.capacity < len * elem || (len > 0 && t.data.is_null()) {
                rc = ONNXC_ERR_CAPACITY;
                continue;
            }
            if len > 0 {
                // SAFETY: the staging holds the output at its bounds, the caller's buffer
                // `len·elem` bytes.
                unsafe { compact(data, t.data.cast(), bound, dims, elem) };
            }
        }
    }
    if owned {
        // SAFETY: allocated above with this size.
        unsafe { abi::onnxc_workspace_free(ws.cast()) };
    }
    rc
}

/// Ranks of a dynamic output whose bound at the call's dims is computed on the stack.
const STACK_RANK: usize = 16;

/// Copies the row-major tensor of dims `dims` held at `from` inside a row-major tensor of
/// dims `bound` (each at least its dim) into `to`, densely.
///
/// # Safety
/// `from` holds the `bound` tensor and `to` the `dims` one, of `elem`-byte elements.
unsafe fn compact(from: *const u8, to: *mut u8, bound: &[i64], dims: &[i64], elem: usize) {
    let Some((&last, outer)) = dims.split_last() else {
        // SAFETY: one element each.
        unsafe { std::ptr::copy_nonoverlapping(from, to, elem) };
        return;
    };
    let row = last as usize * elem;
    let rows: usize = outer.iter().map(|&d| d as usize).product();
    for r in 0..rows {
        // The row's offset in the bounded tensor, from its coordinates (last fastest).
        let (mut rest, mut off, mut stride) = (r, 0usize, bound[outer.len()] as usize);
        for (k, &d) in outer.iter().enumerate().rev() {
            off += (rest % d as usize) * stride;
            rest /= d as usize;
            stride *= bound[k] as usize;
        }
        // SAFETY: the row lies inside both tensors.
        unsafe { std::ptr::copy_nonoverlapping(from.add(off * elem), to.add(r * row), row) };
    }
}

/// `n` elements at `p` (empty when `n` is 0, whatever `p`).
///
/// # Safety
/// A nonzero `n` needs `p` to point to `n` elements that outlive the use.
unsafe fn table<'a, T>(p: *const T, n: usize) -> &'a [T] {
    if n == 0 || p.is_null() {
        &[]
    } else {
        // SAFETY: caller contract.
        unsafe { std::slice::from_raw_parts(p, n) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::ffi::c_char;

    thread_local! {
        /// Runs of the one-item program, and of the chunk program.
        static CALLS: Cell<usize> = const { Cell::new(0) };
        static CHUNK_CALLS: Cell<usize> = const { Cell::new(0) };
    }

    /// A model computing y = 2x + s: input x [n, 2] f32 (batched), a shared input s [1] f32
    /// added to every element, output y [n, 2] f32 (batched). This is its program for `N`
    /// items at once: the one-item program (`fake_items::<1>`, counted in CALLS) or the
    /// chunk program (`fake_items::<CHUNK>`, counted in CHUNK_CALLS).
    unsafe extern "C" fn fake_items<const N: usize>(
        ins: *const *const c_void,
        outs: *const *mut c_void,
        _ws: *mut c_void,
        _bytes: usize,
        _threads: *const Threads,
    ) -> i32 {
        let calls = if N == 1 { &CALLS } else { &CHUNK_CALLS };
        calls.with(|c| c.set(c.get() + 1));
        // SAFETY: onnxc_run_shaped passes N items of x and y and the whole of s.
        unsafe {
            let x = (*ins).cast::<f32>();
            let s = *(*ins.add(1)).cast::<f32>();
            let y = (*outs).cast::<f32>();
            for k in 0..2 * N {
                *y.add(k) = 2.0 * *x.add(k) + s;
            }
        }
        ONNXC_OK
    }

    const CHUNK: usize = 4;

    unsafe extern "C" fn fake_size(workers: usize) -> usize {
        64 * workers
    }

    const X_SHAPE: [i64; 2] = [1, 2];
    const S_SHAPE: [i64; 1] = [1];

    fn info(ins: &[TensorInfo], outs: &[TensorInfo]) -> ModelInfo {
        ModelInfo {
            name: c"fake".as_ptr(),
            num_inputs: ins.len() as u32,
            num_outputs: outs.len() as u32,
            inputs: ins.as_ptr(),
            outputs: outs.as_ptr(),
            workspace_size: 64,
            workspace_per_worker: 64,
            num_dims: 0,
            dim_bounds: std::ptr::null(),
            dim_names: std::ptr::null(),
            dim_least: std::ptr::null(),
            dim_multiples: std::ptr::null(),
            batch_bound: 0,
        }
    }

    #[test]
    fn run_time_dims_are_found_in_the_inputs_and_checked() {
        // x: [1, 2·seq + 1, 4] with seq ≤ 10.
        static SHAPE: [i64; 3] = [1, 21, 4];
        static RUN: [i64; 30] = [
            -1, 0, 0, 0, 1, -1, 0, 0, 1, 0, // 1
            0, 2, 1, 0, 1, -1, 0, 0, 1, 0, // 2·seq + 1
            -1, 0, 0, 0, 1, -1, 0, 0, 1, 0, // 4
        ];
        let mut t = tensor_info(c"x", &SHAPE, ONNXC_TENSOR_RUN_DIMS);
        t.run_dims = RUN.as_ptr();
        let infos = [t];
        let find_from = |least: i64, dims: &mut [i64; 3]| {
            let x = [Tensor {
                data: std::ptr::null_mut(),
                dims: dims.as_mut_ptr(),
                rank: 3,
                capacity: 0,
            }];
            run_dims(&x, &infos, &[least], &[10], &[]).map(|d| d[0])
        };
        let find = |dims: &mut [i64; 3]| find_from(1, dims);
        assert_eq!(find(&mut [1, 7, 4]), Ok(3));
        assert_eq!(find(&mut [1, 21, 4]), Ok(10));
        // Not 2·seq + 1, past the bound, or zero (below the least value 1).
        assert_eq!(find(&mut [1, 8, 4]), Err(ONNXC_ERR_SHAPE));
        assert_eq!(find(&mut [1, 23, 4]), Err(ONNXC_ERR_SHAPE));
        assert_eq!(find(&mut [1, 1, 4]), Err(ONNXC_ERR_SHAPE));
        assert_eq!(find(&mut [1, i64::MIN, 4]), Err(ONNXC_ERR_SHAPE));
        // Below the model's least value (a window wider than the dim).
        assert_eq!(find_from(3, &mut [1, 5, 4]), Err(ONNXC_ERR_SHAPE));
        assert_eq!(find_from(3, &mut [1, 7, 4]), Ok(3));
        // Zero only where the model's least value is (an empty KV cache).
        assert_eq!(find_from(0, &mut [1, 1, 4]), Ok(0));
        assert_eq!(find_from(0, &mut [1, 7, 4]), Ok(3));
        // The tensor's bytes follow the dim.
        // SAFETY: a table entry made above.
        let d = unsafe { Dims::of(&infos[0]) };
        assert_eq!(d.bytes(&infos[0], &[3]), 4 * 7 * 4);
        assert_eq!(d.at(1, &[3]), 7);
    }

    /// Values below a dim's least value run only a program for those values: the corner of
    /// two dims' least values (a decoder's empty cache and one new token), not a program
    /// that takes the dim at run time (`ANY`) from its least value up.
    #[test]
    fn a_value_below_the_least_runs_only_its_own_program() {
        // cache: [past], new: [seq], with past 0..=10 and seq 2..=10.
        static ONE: [i64; 1] = [10];
        static PAST: [i64; 10] = [0, 1, 0, 0, 1, -1, 0, 0, 1, 0];
        static SEQ: [i64; 10] = [1, 1, 0, 0, 1, -1, 0, 0, 1, 0];
        let entry = |name, run: &'static [i64; 10]| {
            let mut t = tensor_info(name, &ONE, ONNXC_TENSOR_RUN_DIMS);
            t.run_dims = run.as_ptr();
            t
        };
        let infos = [entry(c"cache", &PAST), entry(c"new", &SEQ)];
        let fixed = [
            Fixed {
                values: [0, 1],
                run: counted,
            },
            Fixed {
                values: [0, ANY],
                run: counted,
            },
        ];
        let find_in = |fixed: &[Fixed], past: i64, seq: i64| {
            let mut dims = [[past], [seq]];
            let x = dims.each_mut().map(|d| Tensor {
                data: std::ptr::null_mut(),
                dims: d.as_mut_ptr(),
                rank: 1,
                capacity: 0,
            });
            run_dims(&x, &infos, &[0, 2], &[10, 10], fixed).map(|d| [d[0], d[1]])
        };
        let find = |past: i64, seq: i64| find_in(&fixed, past, seq);
        assert_eq!(find(3, 2), Ok([3, 2]));
        assert_eq!(find(0, 1), Ok([0, 1]));
        // No program for seq 1 at another cache length, none for seq 0.
        assert_eq!(find(3, 1), Err(ONNXC_ERR_SHAPE));
        assert_eq!(find(0, 0), Err(ONNXC_ERR_SHAPE));
        // Without the corner's program, (0, ANY) does not serve seq 1.
        assert_eq!(find_in(&fixed[1..], 0, 1), Err(ONNXC_ERR_SHAPE));
    }

    #[test]
    fn a_dim_that_adds_two_run_time_dims_gives_neither_and_follows_both() {
        // cache: [past], new: [seq], mask: [past + seq + 1], with past and seq ≤ 10.
        static ONE: [i64; 1] = [10];
        static SUM: [i64; 1] = [21];
        static PAST: [i64; 10] = [0, 1, 0, 0, 1, -1, 0, 0, 1, 0];
        static SEQ: [i64; 10] = [1, 1, 0, 0, 1, -1, 0, 0, 1, 0];
        static MASK: [i64; 10] = [0, 1, 1, 0, 1, 1, 1, 0, 1, 0];
        let entry = |name, shape: &'static [i64; 1], run: &'static [i64; 10]| {
            let mut t = tensor_info(name, shape, ONNXC_TENSOR_RUN_DIMS);
            t.run_dims = run.as_ptr();
            t
        };
        let infos = [
            entry(c"mask", &SUM, &MASK),
            entry(c"cache", &ONE, &PAST),
            entry(c"new", &ONE, &SEQ),
        ];
        let find = |dims: [i64; 3]| {
            let mut dims = dims.map(|d| [d]);
            let x = dims.each_mut().map(|d| Tensor {
                data: std::ptr::null_mut(),
                dims: d.as_mut_ptr(),
                rank: 1,
                capacity: 0,
            });
            run_dims(&x, &infos, &[1, 1], &[10, 10], &[]).map(|d| [d[0], d[1]])
        };
        // The mask's dim is passed over: the others give both values.
        assert_eq!(find([12, 7, 4]), Ok([7, 4]));
        assert_eq!(find([99, 7, 4]), Ok([7, 4]));
        // SAFETY: a table entry made above.
        let mask = unsafe { Dims::of(&infos[0]) };
        assert_eq!(mask.at(0, &[7, 4]), 12);
        assert_eq!(mask.bytes(&infos[0], &[7, 4]), 4 * 12);
        // A product of a step of each: 3·past·((seq + 1) / 2) + 2.
        static PRODUCT: [i64; 10] = [0, 0, 2, 0, 1, 1, 0, 1, 2, 3];
        let product = entry(c"anchors", &SUM, &PRODUCT);
        // SAFETY: a table entry made above.
        let anchors = unsafe { Dims::of(&product) };
        assert_eq!(anchors.at(0, &[7, 4]), 3 * 7 * 2 + 2);
        // A run checks the mask against them before the program runs.
        static BOUNDS: [i64; 2] = [10, 10];
        static LEAST: [i64; 2] = [1, 1];
        let mut model = info(&infos, &[]);
        model.num_dims = 2;
        model.dim_bounds = BOUNDS.as_ptr();
        model.dim_least = LEAST.as_ptr();
        let run = |dims: [i64; 3]| {
            let mut data = [0f32; 32];
            let mut dims = dims.map(|d| [d]);
            let x = dims.each_mut().map(|d| Tensor {
                data: data.as_mut_ptr().cast(),
                dims: d.as_mut_ptr(),
                rank: 1,
                capacity: 0,
            });
            RUNS.with(|c| c.set(0));
            // SAFETY: each input's data covers its dims; a null workspace is allocated.
            let rc = unsafe {
                onnxc_run_shaped(
                    &model,
                    counted,
                    fake_size,
                    std::ptr::null(),
                    0,
                    std::ptr::null(),
                    0,
                    x.as_ptr(),
                    std::ptr::null(),
                    std::ptr::null_mut(),
                    0,
                    std::ptr::null(),
                )
            };
            (rc, RUNS.with(Cell::get))
        };
        assert_eq!(run([12, 7, 4]), (ONNXC_OK, 1));
        assert_eq!(run([11, 7, 4]), (ONNXC_ERR_SHAPE, 0));
        assert_eq!(run([13, 7, 4]), (ONNXC_ERR_SHAPE, 0));
    }

    thread_local! {
        /// Runs of `counted`.
        static RUNS: Cell<usize> = const { Cell::new(0) };
    }

    /// A program that only counts its runs.
    unsafe extern "C" fn counted(
        _ins: *const *const c_void,
        _outs: *const *mut c_void,
        _ws: *mut c_void,
        _bytes: usize,
        _threads: *const Threads,
    ) -> i32 {
        RUNS.with(|c| c.set(c.get() + 1));
        ONNXC_OK
    }

    thread_local! {
        /// The seq the general program ran at, and runs of the program for seq 1.
        static GENERAL_SEQ: Cell<i64> = const { Cell::new(0) };
        static AT_ONE: Cell<usize> = const { Cell::new(0) };
    }

    /// y = x + 1 over `[seq]`: the program for any seq, which finds it after the input
    /// pointer.
    unsafe extern "C" fn plus_one(
        ins: *const *const c_void,
        outs: *const *mut c_void,
        _ws: *mut c_void,
        _bytes: usize,
        _threads: *const Threads,
    ) -> i32 {
        // SAFETY: onnxc_run_shaped passes x, the dims, then y, of seq elements each.
        unsafe {
            let seq = *(*ins.add(1)).cast::<i64>();
            GENERAL_SEQ.with(|c| c.set(seq));
            let (x, y) = ((*ins).cast::<f32>(), (*outs).cast::<f32>());
            for k in 0..seq as usize {
                *y.add(k) = *x.add(k) + 1.0;
            }
        }
        ONNXC_OK
    }

    /// The same model's program for seq 1, which takes no dims.
    unsafe extern "C" fn plus_one_at_one(
        ins: *const *const c_void,
        outs: *const *mut c_void,
        _ws: *mut c_void,
        _bytes: usize,
        _threads: *const Threads,
    ) -> i32 {
        AT_ONE.with(|c| c.set(c.get() + 1));
        // SAFETY: onnxc_run_shaped passes x then y, one element each.
        unsafe { *(*outs).cast::<f32>() = *(*ins).cast::<f32>() + 1.0 };
        ONNXC_OK
    }

    #[test]
    fn the_first_program_for_the_dims_values_runs_and_takes_the_dim_it_leaves() {
        let (any, own) = (
            plus_one as RunThreaded as usize,
            plus_one_at_one as RunThreaded as usize,
        );
        // For both values first, then for one of either dim.
        let fixed = [
            Fixed {
                values: [1, 1],
                run: plus_one_at_one,
            },
            Fixed {
                values: [1, ANY],
                run: plus_one,
            },
            Fixed {
                values: [ANY, 2],
                run: plus_one_at_one,
            },
        ];
        let pick = |dims: &[i64]| fixed_for(&fixed, dims).map(|(f, k)| (f as usize, k));
        assert_eq!(pick(&[1, 1]), Some((own, None)));
        assert_eq!(pick(&[1, 5]), Some((any, Some(1))));
        assert_eq!(pick(&[3, 2]), Some((own, Some(0))));
        assert_eq!(pick(&[3, 5]), None);
        // A model of one run-time dim: its second value is not looked at.
        assert_eq!(pick(&[1]), Some((own, None)));
        assert_eq!(pick(&[3]), None);
        assert_eq!(pick(&[]), None);
    }

    #[test]
    fn a_value_with_a_program_of_its_own_runs_it_without_dims() {
        static SHAPE: [i64; 1] = [8];
        static RUN: [i64; 10] = [0, 1, 0, 0, 1, -1, 0, 0, 1, 0];
        static BOUNDS: [i64; 1] = [8];
        static LEAST: [i64; 1] = [1];
        let mut t = tensor_info(c"x", &SHAPE, ONNXC_TENSOR_RUN_DIMS);
        t.run_dims = RUN.as_ptr();
        let mut u = tensor_info(c"y", &SHAPE, ONNXC_TENSOR_RUN_DIMS);
        u.run_dims = RUN.as_ptr();
        let (ins, outs) = ([t], [u]);
        let mut model = info(&ins, &outs);
        model.num_dims = 1;
        model.dim_bounds = BOUNDS.as_ptr();
        model.dim_least = LEAST.as_ptr();
        let fixed = [Fixed {
            values: [1, ANY],
            run: plus_one_at_one,
        }];
        for seq in [1usize, 3] {
            GENERAL_SEQ.with(|c| c.set(0));
            AT_ONE.with(|c| c.set(0));
            let mut x: Vec<f32> = (0..seq).map(|k| k as f32).collect();
            let mut y = vec![0f32; seq];
            let (mut xd, mut yd) = ([seq as i64], [0i64]);
            let tin = [Tensor {
                data: x.as_mut_ptr().cast(),
                dims: xd.as_mut_ptr(),
                rank: 1,
                capacity: 0,
            }];
            let tout = [Tensor {
                data: y.as_mut_ptr().cast(),
                dims: yd.as_mut_ptr(),
                rank: 1,
                capacity: 4 * seq,
            }];
            // SAFETY: every pointer covers what its dims say; a null workspace is allocated.
            let rc = unsafe {
                onnxc_run_shaped(
                    &model,
                    plus_one,
                    fake_size,
                    std::ptr::null(),
                    0,
                    fixed.as_ptr(),
                    fixed.len(),
                    tin.as_ptr(),
                    tout.as_ptr(),
                    std::ptr::null_mut(),
                    0,
                    std::ptr::null(),
                )
            };
            assert_eq!(rc, ONNXC_OK, "seq {seq}");
            assert_eq!(yd, [seq as i64]);
            assert_eq!(y, (1..=seq).map(|k| k as f32).collect::<Vec<_>>());
            let (general, own) = (GENERAL_SEQ.with(Cell::get), AT_ONE.with(Cell::get));
            if seq == 1 {
                assert_eq!((general, own), (0, 1), "seq 1 runs its own program");
            } else {
                assert_eq!(
                    (general, own),
                    (seq as i64, 0),
                    "seq {seq} runs the formulas"
                );
            }
        }
    }

    fn tensor_info(name: &'static std::ffi::CStr, shape: &'static [i64], flags: u32) -> TensorInfo {
        TensorInfo {
            name: name.as_ptr() as *const c_char,
            dtype: 1,
            rank: shape.len() as i32,
            shape: shape.as_ptr(),
            size_bytes: 4 * shape.iter().product::<i64>() as u64,
            key_type: 0,
            num_keys: 0,
            keys: std::ptr::null(),
            flags,
            reserved: 0,
            run_dims: std::ptr::null(),
        }
    }

    /// Runs the fake model on `n` items with the given dims and output capacity; returns
    /// the status, the output's dims and values, and how many item runs there were.
    fn call(
        x_dims: &[i64],
        s_dims: &[i64],
        n: usize,
        capacity: usize,
        ws: usize,
    ) -> (i32, [i64; 2], Vec<f32>, usize) {
        call_with(x_dims, s_dims, n, capacity, Some(ws), 0, &[])
    }

    /// `call` with no workspace for `ws` None, `y_flags` more flags on y, and the model's
    /// chunk programs.
    fn call_with(
        x_dims: &[i64],
        s_dims: &[i64],
        n: usize,
        capacity: usize,
        ws: Option<usize>,
        y_flags: u32,
        chunks: &[Chunk],
    ) -> (i32, [i64; 2], Vec<f32>, usize) {
        let ins = [
            tensor_info(c"x", &X_SHAPE, ONNXC_TENSOR_BATCHED),
            tensor_info(c"s", &S_SHAPE, 0),
        ];
        let outs = [tensor_info(c"y", &X_SHAPE, ONNXC_TENSOR_BATCHED | y_flags)];
        let info = info(&ins, &outs);
        let mut x: Vec<f32> = (0..2 * n).map(|v| v as f32).collect();
        let mut s = [0.5f32];
        let mut y = vec![0f32; 2 * n + 2];
        let (mut xd, mut sd, mut yd) = (x_dims.to_vec(), s_dims.to_vec(), [-1i64; 2]);
        let tin = [
            Tensor {
                data: x.as_mut_ptr().cast(),
                dims: xd.as_mut_ptr(),
                rank: xd.len(),
                capacity: 0,
            },
            Tensor {
                data: s.as_mut_ptr().cast(),
                dims: sd.as_mut_ptr(),
                rank: sd.len(),
                capacity: 0,
            },
        ];
        let tout = [Tensor {
            data: y.as_mut_ptr().cast(),
            dims: yd.as_mut_ptr(),
            rank: 2,
            capacity,
        }];
        let mut workspace = vec![0u8; 256];
        CALLS.with(|c| c.set(0));
        // SAFETY: every pointer covers what its dims say (or the call refuses it).
        let rc = unsafe {
            onnxc_run_shaped(
                &info,
                fake_items::<1>,
                fake_size,
                chunks.as_ptr(),
                chunks.len(),
                std::ptr::null(),
                0,
                tin.as_ptr(),
                tout.as_ptr(),
                ws.map_or(std::ptr::null_mut(), |_| workspace.as_mut_ptr().cast()),
                ws.unwrap_or(0),
                std::ptr::null(),
            )
        };
        (rc, yd, y, CALLS.with(Cell::get))
    }

    /// A model whose string outputs live in the workspace needs the caller's: with a null
    /// one the call refuses before running.
    #[test]
    fn strings_in_the_workspace_need_the_callers_workspace() {
        let (rc, _, _, calls) = call_with(&[1, 2], &[1], 1, 8, None, ONNXC_TENSOR_WORKSPACE, &[]);
        assert_eq!((rc, calls), (ONNXC_ERR_WORKSPACE, 0));
        let (rc, _, y, calls) =
            call_with(&[1, 2], &[1], 1, 8, Some(64), ONNXC_TENSOR_WORKSPACE, &[]);
        assert_eq!((rc, calls, &y[..2]), (ONNXC_OK, 1, &[0.5f32, 2.5][..]));
    }

    #[test]
    fn runs_once_per_item_and_writes_the_dims() {
        let (rc, dims, y, calls) = call(&[3, 2], &[1], 3, 24, 64);
        assert_eq!((rc, dims, calls), (ONNXC_OK, [3, 2], 3));
        assert_eq!(y[..6], [0.5, 2.5, 4.5, 6.5, 8.5, 10.5]);
        assert_eq!(y[6..], [0.0, 0.0], "nothing written past the items");
    }

    /// With a chunk program, the items run in the largest chunks that fit, the rest one by
    /// one, each at its own place in the tensors.
    #[test]
    fn runs_whole_chunks_then_single_items() {
        let chunk = [Chunk {
            items: CHUNK,
            run: fake_items::<CHUNK>,
        }];
        for n in [0usize, 1, 3, 4, 5, 8, 11] {
            CHUNK_CALLS.with(|c| c.set(0));
            let x = [n as i64, 2];
            let (rc, dims, y, calls) = call_with(&x, &[1], n, 8 * n, Some(64), 0, &chunk);
            let chunks = CHUNK_CALLS.with(Cell::get);
            assert_eq!((rc, dims), (ONNXC_OK, [n as i64, 2]), "{n} items");
            assert_eq!((chunks, calls), (n / CHUNK, n % CHUNK), "{n} items");
            let want: Vec<f32> = (0..2 * n).map(|v| 2.0 * v as f32 + 0.5).collect();
            assert_eq!(y[..2 * n], want[..], "{n} items");
            assert_eq!(y[2 * n..], [0.0, 0.0], "nothing written past the items");
        }
    }

    /// A chunk table the model does not have is refused.
    #[test]
    fn a_null_chunk_table_with_chunks_is_refused() {
        let mut y = [0f32; 2];
        let info = info(&[], &[]);
        // SAFETY: the call refuses before reading anything.
        let rc = unsafe {
            onnxc_run_shaped(
                &info,
                fake_items::<1>,
                fake_size,
                std::ptr::null(),
                1,
                std::ptr::null(),
                0,
                std::ptr::null(),
                std::ptr::null(),
                y.as_mut_ptr().cast(),
                64,
                std::ptr::null(),
            )
        };
        assert_eq!(rc, ONNXC_ERR_VALUE);
    }

    #[test]
    fn refuses_dims_the_model_does_not_take() {
        for (x, s) in [
            (&[3i64, 3][..], &[1i64][..]),
            (&[3, 2, 1], &[1]),
            (&[-1, 2], &[1]),
            (&[3, 2], &[2]),
        ] {
            let (rc, _, y, calls) = call(x, s, 3, 24, 64);
            assert_eq!((rc, calls), (ONNXC_ERR_SHAPE, 0), "{x:?} {s:?}");
            assert!(y.iter().all(|&v| v == 0.0));
        }
    }

    #[test]
    fn too_small_outputs_get_their_dims_and_nothing_runs() {
        let (rc, dims, _, calls) = call(&[3, 2], &[1], 3, 23, 64);
        assert_eq!((rc, dims, calls), (ONNXC_ERR_CAPACITY, [3, 2], 0));
        let (rc, _, _, calls) = call(&[3, 2], &[1], 3, 24, 63);
        assert_eq!((rc, calls), (ONNXC_ERR_WORKSPACE, 0));
    }

    #[test]
    fn an_empty_batch_runs_nothing() {
        let (rc, dims, _, calls) = call(&[0, 2], &[1], 0, 0, 64);
        assert_eq!((rc, dims, calls), (ONNXC_OK, [0, 2], 0));
    }

    /// A model selecting the positive elements of x [2, 3] f32, each row's in order, as a
    /// [2, k] output (k the most positives in a row) padded with zeros: a dynamic output
    /// bound [2, 3], its dims a hidden third output.
    unsafe extern "C" fn fake_select(
        ins: *const *const c_void,
        outs: *const *mut c_void,
        _ws: *mut c_void,
        bytes: usize,
        _threads: *const Threads,
    ) -> i32 {
        assert_eq!(
            bytes, 64,
            "the program is given its workspace without the staging"
        );
        // SAFETY: one input [2, 3], a staged output [2, 3] and its dims [2].
        unsafe {
            let x = std::slice::from_raw_parts((*ins).cast::<f32>(), 6);
            let y = std::slice::from_raw_parts_mut((*outs).cast::<f32>(), 6);
            let dims = std::slice::from_raw_parts_mut((*outs.add(1)).cast::<i64>(), 2);
            y.fill(0.0);
            let mut k = 0;
            for r in 0..2 {
                let mut j = 0;
                for &v in x[3 * r..3 * r + 3].iter().filter(|v| **v > 0.0) {
                    y[3 * r + j] = v;
                    j += 1;
                }
                k = k.max(j);
            }
            dims.copy_from_slice(&[2, k as i64]);
        }
        ONNXC_OK
    }

    unsafe extern "C" fn fake_select_size(workers: usize) -> usize {
        64 * workers + staging_bytes([(24, 2)]) as usize
    }

    /// Runs `fake_select` on x with an output buffer of `capacity` floats.
    fn select(x: [f32; 6], capacity: usize) -> (i32, [i64; 2], Vec<f32>) {
        const Y_BOUND: [i64; 2] = [2, 3];
        const X_DIMS: [i64; 2] = [2, 3];
        let ins = [tensor_info(c"x", &X_DIMS, 0)];
        let outs = [tensor_info(c"y", &Y_BOUND, ONNXC_TENSOR_DYNAMIC)];
        let info = info(&ins, &outs);
        let mut x = x;
        let mut xd = X_DIMS;
        let mut y = vec![-1f32; capacity];
        let mut yd = [-1i64; 2];
        let tin = [Tensor {
            data: x.as_mut_ptr().cast(),
            dims: xd.as_mut_ptr(),
            rank: 2,
            capacity: 0,
        }];
        let tout = [Tensor {
            data: y.as_mut_ptr().cast(),
            dims: yd.as_mut_ptr(),
            rank: 2,
            capacity: capacity * 4,
        }];
        // SAFETY: every pointer covers what its dims say; a null workspace is allocated.
        let rc = unsafe {
            onnxc_run_shaped(
                &info,
                fake_select,
                fake_select_size,
                std::ptr::null(),
                0,
                std::ptr::null(),
                0,
                tin.as_ptr(),
                tout.as_ptr(),
                std::ptr::null_mut(),
                0,
                std::ptr::null(),
            )
        };
        (rc, yd, y)
    }

    #[test]
    fn dynamic_outputs_get_their_dims_and_dense_elements() {
        let (rc, dims, y) = select([1.0, -1.0, 2.0, -3.0, 4.0, -5.0], 6);
        assert_eq!((rc, dims), (ONNXC_OK, [2, 2]));
        assert_eq!(
            y,
            [1.0, 2.0, 4.0, 0.0, -1.0, -1.0],
            "rows compacted, nothing past"
        );
        // Too small a buffer: the dims, an error, nothing written.
        let (rc, dims, y) = select([1.0, 1.0, 1.0, -3.0, 4.0, -5.0], 5);
        assert_eq!((rc, dims), (ONNXC_ERR_CAPACITY, [2, 3]));
        assert!(y.iter().all(|&v| v == -1.0));
        // No row selected: [2, 0], no element.
        let (rc, dims, _) = select([0.0; 6], 0);
        assert_eq!((rc, dims), (ONNXC_OK, [2, 0]));
    }
}
