//! C ABI: error codes, model info structs, workspace allocation, f16 helpers.
//! Mirrors `include/onnxc_runtime.h`.

use std::alloc::{Layout, alloc, dealloc};
use std::ffi::c_char;

pub const ONNXC_OK: i32 = 0;
pub const ONNXC_ERR_INDEX: i32 = 1;
pub const ONNXC_ERR_ALLOC: i32 = 2;
pub const ONNXC_ERR_SHAPE: i32 = 3;
pub const ONNXC_ERR_VALUE: i32 = 4;
/// A kernel refused its compiled parameters (`params`): the object is corrupt or was
/// compiled by a mismatched onnxc.
pub const ONNXC_ERR_PARAMS: i32 = 5;
/// `NAME_run_threaded` was given a workspace smaller than the thread count needs.
pub const ONNXC_ERR_WORKSPACE: i32 = 6;
/// `NAME_run_shaped`: an output's buffer is smaller than the output (its dims were written).
pub const ONNXC_ERR_CAPACITY: i32 = 7;
/// `NAME_run`/`NAME_run_threaded` of a model with outputs whose dims depend on the data
/// (`ONNXC_TENSOR_DYNAMIC`): only `NAME_run_shaped` can return them.
pub const ONNXC_ERR_DYNAMIC: i32 = 8;
/// The strings a run makes (StringNormalizer, StringConcat, StringSplit) do not fit in the
/// string space compiled for them (`onnxc --string-bytes`).
pub const ONNXC_ERR_STRINGS: i32 = 9;

/// `TensorInfo::flags`: dim 0 is a run-time batch (`shape[0]` is 1, one item's).
pub const ONNXC_TENSOR_BATCHED: u32 = 1;
/// `TensorInfo::flags`: an output whose dims depend on the values the run computes (the
/// rows NonZero, NonMaxSuppression or Unique select, a TopK, Slice or Loop sized at run
/// time): `shape` and `size_bytes` are upper bounds,
/// `NAME_run_shaped` writes the actual dims.
pub const ONNXC_TENSOR_DYNAMIC: u32 = 2;
/// `TensorInfo::flags`: a string output whose strings may be made by the run, in the
/// workspace (StringNormalizer, StringConcat, StringSplit): they stay valid until the
/// workspace is reused, and a run with a null workspace returns `ONNXC_ERR_WORKSPACE`.
pub const ONNXC_TENSOR_WORKSPACE: u32 = 4;
/// `TensorInfo::flags`: an input of type map(`key_type`, `dtype`), passed as a pointer to
/// an `onnxc_map` (`map::Map`), which only the map kernels read (`map`).
pub const ONNXC_TENSOR_MAP: u32 = 8;
/// Some dims follow the model's run-time dims (`TensorInfo::run_dims`).
pub const ONNXC_TENSOR_RUN_DIMS: u32 = 16;

#[repr(C)]
pub struct TensorInfo {
    pub name: *const c_char,
    pub dtype: i32,
    pub rank: i32,
    pub shape: *const i64,
    pub size_bytes: u64,
    /// 0 for a tensor; for an output ONNX-ML's ZipMap makes (a sequence of maps), the
    /// ONNX type of the maps' keys (7 int64, 8 string): row i of the `[n, num_keys]`
    /// float32 tensor is the map {keys[j]: value[i, j]}; for a map input
    /// (`ONNXC_TENSOR_MAP`), the type of its keys.
    pub key_type: i32,
    pub num_keys: i32,
    /// `num_keys` int64 values or `const char *` strings.
    pub keys: *const std::ffi::c_void,
    /// `ONNXC_TENSOR_*` bits.
    pub flags: u32,
    pub reserved: u32,
    /// With `ONNXC_TENSOR_RUN_DIMS`: per dim, ten int64 values `dim, mul, add, pre, div,
    /// dim2, mul2, pre2, div2, prod`: for the model's run-time dims `dims`, with
    /// `s = (dims[dim] + pre) / div` and `t = (dims[dim2] + pre2) / div2` (rounding down;
    /// `t` 0 where `dim2` is -1), the dim is `mul·s + mul2·t + prod·s·t + add` (`dim` -1:
    /// `shape`'s value): one run-time dim, or two (a mask over `past + seq`, a detector's
    /// anchors over `h · w`); inputs' have `pre` 0 and `div` 1. `shape` and `size_bytes` are
    /// then the tensor's at the dims' bounds.
    pub run_dims: *const i64,
}

#[repr(C)]
pub struct ModelInfo {
    pub name: *const c_char,
    pub num_inputs: u32,
    pub num_outputs: u32,
    pub inputs: *const TensorInfo,
    pub outputs: *const TensorInfo,
    /// Bytes of `NAME_run`'s workspace (one worker).
    pub workspace_size: u64,
    /// Bytes each further worker of `NAME_run_threaded` adds to it.
    pub workspace_per_worker: u64,
    /// Dims the model takes at run time (`NAME_run_shaped` finds their values in the
    /// inputs' dims): how many, their largest values, their names, their least values
    /// (below them the model is invalid: a window wider than the dim) and the multiples
    /// they are taken in (a dim taken in multiples of 32 is 32 × its value: its least and
    /// largest values count multiples).
    pub num_dims: u64,
    pub dim_bounds: *const i64,
    pub dim_names: *const *const c_char,
    pub dim_least: *const i64,
    pub dim_multiples: *const i64,
    /// The most items a run-time batch may hold (`--dim N=..B` on a leading batch dim);
    /// 0 when any number may. A larger batch is `ONNXC_ERR_SHAPE`.
    pub batch_bound: i64,
}

/// A kernel entry point's tensor argument: the `len` elements at `ptr`, empty when `len` is
/// 0 (an empty tensor's address may be anything), None when `ptr` is null otherwise.
///
/// # Safety
/// `ptr` is null or holds `len` elements.
pub(crate) unsafe fn elements<'a, T>(ptr: *const T, len: usize) -> Option<&'a [T]> {
    match (ptr.is_null(), len) {
        (_, 0) => Some(&[]),
        (true, _) => None,
        // SAFETY: the contract.
        (false, _) => Some(unsafe { std::slice::from_raw_parts(ptr, len) }),
    }
}

/// `elements` of an output argument.
///
/// # Safety
/// `ptr` is null or holds `len` elements that nothing else accesses during `'a`.
pub(crate) unsafe fn elements_mut<'a, T>(ptr: *mut T, len: usize) -> Option<&'a mut [T]> {
    match (ptr.is_null(), len) {
        (_, 0) => Some(&mut []),
        (true, _) => None,
        // SAFETY: the contract.
        (false, _) => Some(unsafe { std::slice::from_raw_parts_mut(ptr, len) }),
    }
}

pub const WORKSPACE_ALIGN: usize = 64;

/// Workspaces of at least this size are aligned to it and, on Linux, advised to use
/// transparent huge pages: kernels stream activations at large strides, and with 4 KiB pages
/// nearly every row of such a stream is a TLB miss.
const HUGE_PAGE: usize = 2 << 20;

fn workspace_layout(total: usize) -> Option<Layout> {
    Layout::from_size_align(
        total,
        if total >= HUGE_PAGE {
            HUGE_PAGE
        } else {
            WORKSPACE_ALIGN
        },
    )
    .ok()
}

#[cfg(target_os = "linux")]
fn advise_huge_pages(base: *mut u8, total: usize) {
    unsafe extern "C" {
        fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
    }
    const MADV_HUGEPAGE: i32 = 14;
    let len = total & !(HUGE_PAGE - 1);
    if len > 0 && (base as usize).is_multiple_of(HUGE_PAGE) {
        // SAFETY: [base, base + len) lies inside the allocation; the advice only changes how
        // the kernel backs it (failure is harmless and ignored).
        unsafe { madvise(base.cast(), len, MADV_HUGEPAGE) };
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_: *mut u8, _: usize) {}

/// Allocates a 64-byte aligned workspace of `size` bytes (null on failure).
/// The size is stored in a header so `onnxc_workspace_free` needs only the pointer.
///
/// # Safety
/// The result must be released with `onnxc_workspace_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_workspace_alloc(size: u64) -> *mut u8 {
    let Some(total) = (size as usize).checked_add(WORKSPACE_ALIGN) else {
        return std::ptr::null_mut();
    };
    let Some(layout) = workspace_layout(total) else {
        return std::ptr::null_mut();
    };
    // SAFETY: layout has non-zero size.
    let base = unsafe { alloc(layout) };
    if base.is_null() {
        return base;
    }
    advise_huge_pages(base, total);
    // SAFETY: base has room for the header word at its start.
    unsafe {
        (base as *mut usize).write(total);
        base.add(WORKSPACE_ALIGN)
    }
}

/// # Safety
/// `p` must come from `onnxc_workspace_alloc` (or be null).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_workspace_free(p: *mut u8) {
    if p.is_null() {
        return;
    }
    // SAFETY: p was returned by onnxc_workspace_alloc, so the header sits before it.
    unsafe {
        let base = p.sub(WORKSPACE_ALIGN);
        let total = (base as *const usize).read();
        dealloc(
            base,
            workspace_layout(total).expect("the layout it was allocated with"),
        );
    }
}

/// Each error code's description, NUL-terminated for C.
fn description(code: i32) -> &'static str {
    match code {
        ONNXC_OK => "success\0",
        ONNXC_ERR_INDEX => "an index input is out of range\0",
        ONNXC_ERR_ALLOC => "workspace allocation failed\0",
        ONNXC_ERR_SHAPE => "an input's dims or values imply a shape the model does not allow\0",
        ONNXC_ERR_VALUE => "an input value is invalid for the model\0",
        ONNXC_ERR_PARAMS => {
            "a kernel's compiled parameters are invalid (corrupt object or mismatched onnxc)\0"
        }
        ONNXC_ERR_WORKSPACE => {
            "the workspace is smaller than NAME_workspace_size_threads(workers), or null where \
             the model's string outputs live in it\0"
        }
        ONNXC_ERR_CAPACITY => "an output buffer is smaller than the output\0",
        ONNXC_ERR_DYNAMIC => "the model's output dims depend on the data: call NAME_run_shaped\0",
        ONNXC_ERR_STRINGS => {
            "the strings the run makes exceed the space compiled for them (onnxc --string-bytes)\0"
        }
        _ => "unknown error\0",
    }
}

/// A static description of an error code.
#[unsafe(no_mangle)]
pub extern "C" fn onnxc_strerror(code: i32) -> *const c_char {
    description(code).as_ptr() as *const c_char
}

pub fn strerror(code: i32) -> &'static str {
    description(code).trim_end_matches('\0')
}

/// C ABI entry points that are one expression each: `name(argument: type) -> type = body;`.
macro_rules! exports {
    ($($(#[$doc:meta])* $name:ident($v:ident: $from:ty) -> $to:ty = $e:expr;)*) => {
        $(
            $(#[$doc])*
            #[unsafe(no_mangle)]
            pub extern "C" fn $name($v: $from) -> $to {
                $e
            }
        )*
    };
}

// Half-precision conversions (`half`'s), rounding to nearest even.
exports! {
    /// IEEE half → single.
    onnxc_f16_to_f32(bits: u16) -> f32 = half::f16::from_bits(bits).to_f32();
    /// Single → IEEE half, round to nearest even.
    onnxc_f32_to_f16(v: f32) -> u16 = half::f16::from_f32(v).to_bits();
    /// Double → IEEE half, round to nearest even (direct, no double rounding).
    onnxc_f64_to_f16(v: f64) -> u16 = half::f16::from_f64(v).to_bits();
    /// Double → bfloat16, round to nearest even (direct).
    onnxc_f64_to_bf16(v: f64) -> u16 = half::bf16::from_f64(v).to_bits();
}

/// Integer power with wrapping (used for integer `Pow`); negative exponents follow
/// integer division semantics (0 unless the base is ±1).
#[unsafe(no_mangle)]
pub extern "C" fn onnxc_ipow(base: i64, exp: i64) -> i64 {
    if exp < 0 {
        return match base {
            1 => 1,
            -1 => {
                if exp % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        };
    }
    let (mut r, mut b, mut e) = (1i64, base, exp);
    while e > 0 {
        if e & 1 == 1 {
            r = r.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        e >>= 1;
    }
    r
}
