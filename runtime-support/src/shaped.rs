//! `NAME_run_shaped`: a model's entry point that takes every tensor with its dims.
//!
//! Each generated `NAME_run_shaped` calls `onnxc_run_shaped` with the model's info table
//! and its `NAME_run_threaded`. The inputs' dims are checked against the model's (a
//! mismatch is `ONNXC_ERR_SHAPE`, before anything is read); every output's dims are written,
//! and an output whose buffer is too small makes the call return `ONNXC_ERR_CAPACITY`
//! before anything runs (snprintf's convention: the caller learns the size and retries).
//! Tensors whose dim 0 is a run-time batch (`ONNXC_TENSOR_BATCHED`) hold `n` items; the
//! compiled program computes one, so it runs once per item, on the same workspace.

use crate::abi::{
    self, ModelInfo, ONNXC_ERR_ALLOC, ONNXC_ERR_CAPACITY, ONNXC_ERR_SHAPE, ONNXC_ERR_VALUE,
    ONNXC_ERR_WORKSPACE, ONNXC_OK, ONNXC_TENSOR_BATCHED, TensorInfo,
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

/// Most inputs plus outputs whose per-item pointers live on the stack; a model with more
/// allocates them per call.
const STACK_IO: usize = 64;

/// Runs a model on shaped tensors (the body of every `NAME_run_shaped`).
///
/// # Safety
/// `info` is a model's info table and `run`/`workspace_size` its entry points; `inputs`
/// and `outputs` point to `num_inputs`/`num_outputs` tensors whose `dims` hold `rank`
/// values (outputs' may be null) and whose `data` holds the elements their dims give
/// (outputs: `capacity` bytes); `workspace` is null or `workspace_bytes` bytes, 64-byte
/// aligned; `threads` as `NAME_run_threaded`'s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_run_shaped(
    info: *const ModelInfo,
    run: RunThreaded,
    workspace_size: WorkspaceSize,
    inputs: *const Tensor,
    outputs: *const Tensor,
    workspace: *mut c_void,
    workspace_bytes: usize,
    threads: *const Threads,
) -> i32 {
    if info.is_null() {
        return ONNXC_ERR_VALUE;
    }
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
    // The batch size, from the inputs that carry it.
    let mut batch: Option<usize> = None;
    for (t, ti) in ins.iter().zip(in_info) {
        // SAFETY: the info table's shape holds `rank` dims.
        let model = unsafe { table(ti.shape, ti.rank as usize) };
        if t.rank != model.len() || (t.rank > 0 && t.dims.is_null()) {
            return ONNXC_ERR_SHAPE;
        }
        // SAFETY: caller contract: `rank` dims.
        let dims = unsafe { table(t.dims, t.rank) };
        let batched = ti.flags & ONNXC_TENSOR_BATCHED != 0;
        for (k, (&d, &m)) in dims.iter().zip(model).enumerate() {
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
        if t.data.is_null() && ti.size_bytes > 0 && !(batched && dims[0] == 0) {
            return ONNXC_ERR_VALUE;
        }
    }
    let n = batch.unwrap_or(1);
    // Outputs: their dims, and room for them.
    let mut short = false;
    for (t, ti) in outs.iter().zip(out_info) {
        // SAFETY: as above.
        let model = unsafe { table(ti.shape, ti.rank as usize) };
        if t.rank != model.len() {
            return ONNXC_ERR_SHAPE;
        }
        let batched = ti.flags & ONNXC_TENSOR_BATCHED != 0;
        let items = if batched { n } else { 1 };
        let Some(need) = (ti.size_bytes as usize).checked_mul(items) else {
            return ONNXC_ERR_SHAPE;
        };
        if !t.dims.is_null() {
            for (k, &m) in model.iter().enumerate() {
                let d = if batched && k == 0 { n as i64 } else { m };
                // SAFETY: caller contract: an output's non-null dims hold `rank` values.
                unsafe { *t.dims.add(k) = d };
            }
        }
        if t.capacity < need || (need > 0 && t.data.is_null()) {
            short = true;
        }
    }
    if short {
        return ONNXC_ERR_CAPACITY;
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
    // SAFETY: caller contract on `threads`.
    let workers = unsafe { Par::from_raw(threads) }
        .workers()
        .clamp(1, MAX_WORKERS);
    // SAFETY: the model's own entry point.
    let need = unsafe { workspace_size(workers) };
    let (ws, owned) = if workspace.is_null() {
        // SAFETY: any size; null on failure.
        let w = unsafe { abi::onnxc_workspace_alloc(need as u64) }.cast::<c_void>();
        if w.is_null() {
            return ONNXC_ERR_ALLOC;
        }
        (w, true)
    } else if workspace_bytes < need {
        return ONNXC_ERR_WORKSPACE;
    } else {
        (workspace, false)
    };
    let mut stack = [std::ptr::null_mut::<c_void>(); STACK_IO];
    let mut heap = Vec::new();
    let ptrs: &mut [*mut c_void] = if n_in + n_out <= STACK_IO {
        &mut stack[..n_in + n_out]
    } else {
        heap.resize(n_in + n_out, std::ptr::null_mut());
        &mut heap
    };
    let mut rc = ONNXC_OK;
    for item in 0..n {
        let io = ins.iter().zip(in_info).chain(outs.iter().zip(out_info));
        for (slot, (t, ti)) in ptrs.iter_mut().zip(io) {
            let step = if ti.flags & ONNXC_TENSOR_BATCHED != 0 {
                item * ti.size_bytes as usize
            } else {
                0
            };
            *slot = t.data.cast::<u8>().wrapping_add(step).cast();
        }
        let (pi, po) = ptrs.split_at(n_in);
        // SAFETY: every pointer is an item of a tensor whose dims and capacity were checked
        // above; the workspace holds what `workers` threads need.
        rc = unsafe { run(pi.as_ptr().cast(), po.as_ptr(), ws, need, threads) };
        if rc != ONNXC_OK {
            break;
        }
    }
    if owned {
        // SAFETY: allocated above with this size.
        unsafe { abi::onnxc_workspace_free(ws.cast()) };
    }
    rc
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
        static CALLS: Cell<usize> = const { Cell::new(0) };
    }

    /// A model computing y = 2x item by item: input x [n, 2] f32 (batched), a shared input
    /// s [1] f32 added to every element, output y [n, 2] f32 (batched).
    unsafe extern "C" fn fake_run(
        ins: *const *const c_void,
        outs: *const *mut c_void,
        _ws: *mut c_void,
        _bytes: usize,
        _threads: *const Threads,
    ) -> i32 {
        CALLS.with(|c| c.set(c.get() + 1));
        // SAFETY: onnxc_run_shaped passes one item of x and y and the whole of s.
        unsafe {
            let x = (*ins).cast::<f32>();
            let s = *(*ins.add(1)).cast::<f32>();
            let y = (*outs).cast::<f32>();
            for k in 0..2 {
                *y.add(k) = 2.0 * *x.add(k) + s;
            }
        }
        ONNXC_OK
    }

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
        let ins = [
            tensor_info(c"x", &X_SHAPE, ONNXC_TENSOR_BATCHED),
            tensor_info(c"s", &S_SHAPE, 0),
        ];
        let outs = [tensor_info(c"y", &X_SHAPE, ONNXC_TENSOR_BATCHED)];
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
                fake_run,
                fake_size,
                tin.as_ptr(),
                tout.as_ptr(),
                workspace.as_mut_ptr().cast(),
                ws,
                std::ptr::null(),
            )
        };
        (rc, yd, y, CALLS.with(Cell::get))
    }

    #[test]
    fn runs_once_per_item_and_writes_the_dims() {
        let (rc, dims, y, calls) = call(&[3, 2], &[1], 3, 24, 64);
        assert_eq!((rc, dims, calls), (ONNXC_OK, [3, 2], 3));
        assert_eq!(y[..6], [0.5, 2.5, 4.5, 6.5, 8.5, 10.5]);
        assert_eq!(y[6..], [0.0, 0.0], "nothing written past the items");
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
}
