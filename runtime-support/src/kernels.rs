//! The C ABI of the runtime kernels that generated code calls, declared once.
//!
//! Each entry names the exported symbol, the module that defines it and every argument
//! (name, how the generated code produces it, Rust type). The compiler emits each call from
//! its entry (`loops::Stmt::Call` carries one and is checked against it), and this file
//! checks each entry against the definition when the crate compiles: a kernel whose
//! signature changes without its entry does not build. A test checks that every exported
//! `onnxc_*` function is either a kernel here or one of the runtime's other entry points
//! (`OTHER_ENTRY_POINTS`).
//!
//! A kernel that decodes a parameter blob (`ArgKind::Params`/`OptParams`) returns a
//! `Status` (`-> Status` in its entry): 0, or `abi::ONNXC_ERR_PARAMS` when the blob fails
//! validation (`params`), before any buffer is touched; a kernel whose data can be invalid
//! returns that error too (`ROI_ALIGN_F32`: `abi::ONNXC_ERR_INDEX`). Generated code merges it
//! into the run's error code, first error winning. The kernels that make strings return one
//! too, blob or not (`abi::ONNXC_ERR_STRINGS`).

use crate::par::ScratchNeed;
use crate::params::{self, ParamError};

/// How generated code produces an argument. Every argument is one machine word.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// Address of a read-only i64 blob emitted with the object (an encoded geometry or
    /// table), sealed with its length (`params::seal`); the kernel returns a `Status`.
    Params,
    /// `Params`, or null where the kernel takes a default.
    OptParams,
    /// Address of a read-only f32 blob emitted with the object (taps, α/β).
    Floats,
    /// `Floats`, or null where the kernel takes a default.
    OptFloats,
    /// Address inside a tensor the kernel reads.
    In,
    /// `In`, or null where the operand is absent (bias, residual, clamp bounds).
    OptIn,
    /// Address inside a tensor the kernel writes.
    Out,
    /// An integer (extents, flags, strides).
    Int,
    /// Address of the step's scratch area in the workspace.
    Scratch,
    /// `Scratch`, or null where the step needs none.
    OptScratch,
    /// The run's threads (`par::Threads`, the C `onnxc_threads`), or null for a
    /// single-threaded run. A kernel taking one partitions its outputs over the workers
    /// (`par`), each with its own slot of the step's scratch (`par::worker_scratch`).
    Threads,
}

/// What a status-returning kernel returns: `abi::ONNXC_OK`, `abi::ONNXC_ERR_PARAMS` when
/// it refused its parameter blob, or an error its data caused (`ROI_ALIGN_F32`'s
/// `abi::ONNXC_ERR_INDEX`).
pub type Status = i32;

/// One kernel's C signature: `symbol(args…)`, returning nothing or a `Status`.
#[derive(Debug)]
pub struct KernelAbi {
    pub symbol: &'static str,
    pub args: &'static [(&'static str, ArgKind)],
    /// The kernel returns a `Status` (an `i32`), which generated code merges into the
    /// run's error code.
    pub status: bool,
}

impl PartialEq for KernelAbi {
    fn eq(&self, other: &KernelAbi) -> bool {
        self.symbol == other.symbol
    }
}

macro_rules! kernels {
    (@status) => { false };
    (@status Status) => { true };
    ($(
        $(#[doc = $doc:literal])*
        $name:ident = $sym:ident in $($module:ident)::+ ( $($arg:ident : $kind:ident = $ty:ty),* $(,)? )
            $(-> $ret:ident)?;
    )*) => {
        $(
            $(#[doc = $doc])*
            pub const $name: KernelAbi = KernelAbi {
                symbol: stringify!($sym),
                args: &[$((stringify!($arg), ArgKind::$kind)),*],
                status: kernels!(@status $($ret)?),
            };
            // The declaration is the definition's signature, its result included.
            const _: unsafe extern "C" fn($($ty),*) $(-> $ret)? = crate::$($module)::+::$sym;
        )*
        /// Every kernel, for tools and tests.
        pub const ALL: &[&KernelAbi] = &[$(&$name),*];
    };
}

kernels! {
    /// `C = op(A)·op(B)` plus epilogue (row bias, column bias, residual, clamp), f32.
    SGEMM = onnxc_sgemm in gemm(
        m: Int = i64, n: Int = i64, k: Int = i64,
        a: In = *const f32, lda: Int = i64, ta: Int = i64,
        b: In = *const f32, ldb: Int = i64, tb: Int = i64,
        c: Out = *mut f32, ldc: Int = i64,
        bias_row: OptIn = *const f32, bias_col: OptIn = *const f32,
        residual: OptIn = *const f32, clamp: OptFloats = *const f32,
        scratch: Scratch = *mut f32, threads: Threads = *const crate::par::Threads,
    );
    /// `SGEMM` with B packed at compile time (`gemm::pack`).
    SGEMM_PB = onnxc_sgemm_pb in gemm(
        m: Int = i64, n: Int = i64, k: Int = i64,
        a: In = *const f32, lda: Int = i64, ta: Int = i64,
        b_packed: In = *const f32,
        c: Out = *mut f32, ldc: Int = i64,
        bias_row: OptIn = *const f32, bias_col: OptIn = *const f32,
        residual: OptIn = *const f32, clamp: OptFloats = *const f32,
        scratch: Scratch = *mut f32, threads: Threads = *const crate::par::Threads,
    );
    /// Convolution, N-d, grouped, NC[spatial] (`conv::ConvGeometry` in `params`), weights
    /// packed at compile time (`w_packed` 1) or raw, with the epilogue.
    CONV_F32 = onnxc_conv_f32 in conv(
        params: Params = *const i64, x: In = *const f32, w: In = *const f32,
        w_packed: Int = i64, bias: OptIn = *const f32, residual: OptIn = *const f32,
        clamp: OptFloats = *const f32, y: Out = *mut f32, scratch: Scratch = *mut f32,
        threads: Threads = *const crate::par::Threads,
    ) -> Status;
    /// Convolution over channel-blocked tensors (`nchwc`).
    CONV_NCHWC_F32 = onnxc_conv_nchwc_f32 in nchwc(
        params: Params = *const i64, x: In = *const f32, w_packed: In = *const f32,
        bias: OptIn = *const f32, residual: OptIn = *const f32, clamp: OptFloats = *const f32,
        y: Out = *mut f32, scratch: OptScratch = *mut f32,
        threads: Threads = *const crate::par::Threads,
    ) -> Status;
    /// Transposed convolution, 1-D to 3-D, as a GEMM and a col2im.
    CONV_TRANSPOSE_F32 = onnxc_conv_transpose_f32 in conv::transpose(
        params: Params = *const i64, x: In = *const f32, w: In = *const f32,
        w_packed: Int = i64, bias: OptIn = *const f32, clamp: OptFloats = *const f32,
        y: Out = *mut f32, scratch: OptScratch = *mut f32,
    ) -> Status;
    /// 2-D max/average/Lp pooling of NCHW planes (`pool::PoolGeometry`).
    POOL2D_F32 = onnxc_pool2d_f32 in pool(
        params: Params = *const i64, x: In = *const f32, y: Out = *mut f32,
        scratch: Scratch = *mut f32, threads: Threads = *const crate::par::Threads,
    ) -> Status;
    /// 2-D max pooling of uint8 (`signed` 0) or int8 planes (`pool::int8`).
    MAX_POOL_I8 = onnxc_max_pool_i8 in pool::int8(
        params: Params = *const i64, x: In = *const u8, y: Out = *mut u8, signed: Int = i64,
        threads: Threads = *const crate::par::Threads,
    ) -> Status;
    /// Byte table lookup, a 256-entry row per channel (`lookup`): tabulated maps of one
    /// 8-bit operand.
    LOOKUP_U8 = onnxc_lookup_u8 in lookup(
        x: In = *const u8, table: In = *const u8, y: Out = *mut u8, planes: Int = i64,
        rows: Int = i64, inner: Int = i64, flip: Int = i64,
        threads: Threads = *const crate::par::Threads,
    );
    /// Requantized sum of two 8-bit tensors of one shape (`qadd`): QLinearAdd and QDQ
    /// residual connections.
    QADD_U8 = onnxc_qadd_u8 in qadd(
        a: In = *const u8, b: In = *const u8, y: Out = *mut u8, n: Int = i64,
        scales: Floats = *const f32, za: Int = i64, zb: Int = i64, zy: Int = i64,
        flags: Int = i64, threads: Threads = *const crate::par::Threads,
    );
    /// Exact float32 accumulators requantized to 8 bits (`requantize`): QLinearConv and
    /// QLinearMatMul computed through the float32 kernels.
    REQUANTIZE_F32_8 = onnxc_requantize_f32_8 in requantize(
        x: In = *const f32, factors: Floats = *const f32, n_factors: Int = i64,
        outer: Int = i64, channels: Int = i64, inner: Int = i64, zp: Int = i64,
        flags: Int = i64, y: Out = *mut u8, threads: Threads = *const crate::par::Threads,
    );
    /// QuantizeLinear of a float32 tensor to 8 bits with one scale and zero point
    /// (`quantize`): the schedule's bare quantizing maps.
    QUANTIZE_F32_8 = onnxc_quantize_f32_8 in quantize(
        x: In = *const f32, n: Int = i64, scale: Floats = *const f32, zp: Int = i64,
        flags: Int = i64, y: Out = *mut u8, threads: Threads = *const crate::par::Threads,
    );
    /// QuantizeLinear to 8 bits with a scale and zero point the run computed (`quantize`):
    /// DynamicQuantizeLinear's quantizing map.
    QUANTIZE_F32_8_DYN = onnxc_quantize_f32_8_dyn in quantize(
        x: In = *const f32, n: Int = i64, sz: In = *const f32, flags: Int = i64,
        y: Out = *mut u8, threads: Threads = *const crate::par::Threads,
    );
    /// DequantizeLinear of an 8-bit tensor with one scale and zero point (`quantize`).
    DEQUANTIZE_8_F32 = onnxc_dequantize_8_f32 in quantize(
        x: In = *const u8, n: Int = i64, scale: Floats = *const f32, zp: Int = i64,
        flags: Int = i64, y: Out = *mut f32, threads: Threads = *const crate::par::Threads,
    );
    /// Pooling of channel-blocked planes.
    POOL_NCHWC_F32 = onnxc_pool_nchwc_f32 in nchwc::pool(
        params: Params = *const i64, x: In = *const f32, y: Out = *mut f32,
        threads: Threads = *const crate::par::Threads,
    ) -> Status;
    /// `[n, c, hw]` to `[n, c/8, hw, 8]`; `planes`: null, or the input plane of every channel.
    NCHW_TO_NCHWC = onnxc_nchw_to_nchwc in nchwc::reorder(
        x: In = *const f32, n: Int = i64, c: Int = i64, hw: Int = i64, y: Out = *mut f32,
        planes: OptParams = *const i64, threads: Threads = *const crate::par::Threads,
    ) -> Status;
    /// `[n, c/8, hw, 8]` to `[n, c, hw]`.
    NCHWC_TO_NCHW = onnxc_nchwc_to_nchw in nchwc::reorder(
        x: In = *const f32, n: Int = i64, c: Int = i64, hw: Int = i64, y: Out = *mut f32,
        threads: Threads = *const crate::par::Threads,
    );
    /// Fused attention (`attention::AttentionParams`): `out = softmax(β·(α·Q·Kᵀ + bias))·V`
    /// per (batch, head), `ab` = [α, β], every operand read through strides.
    ATTENTION_F32 = onnxc_attention_f32 in attention(
        params: Params = *const i64, ab: Floats = *const f32, q: In = *const f32,
        k: In = *const f32, v: In = *const f32, bias: OptIn = *const f32, out: Out = *mut f32,
        scratch: Scratch = *mut f32, threads: Threads = *const crate::par::Threads,
    ) -> Status;
    /// Softmax of `scale`·x (null: 1) over `rows` rows of `n` floats; `flags` bit 0: rows of
    /// −inf give zeros.
    SOFTMAX_F32 = onnxc_softmax_f32 in softmax(
        x: In = *const f32, y: Out = *mut f32, rows: Int = i64, n: Int = i64,
        scale: OptFloats = *const f32, flags: Int = i64,
        threads: Threads = *const crate::par::Threads,
    );
    /// `n` elements of a 4- or 2-bit type (`bits`), one per byte, packed (`subbyte`).
    PACK_BITS = onnxc_pack_bits in subbyte(
        x: In = *const u8, y: Out = *mut u8, n: Int = i64, bits: Int = i64,
    );
    /// `n` packed elements of a 4- or 2-bit type unpacked to one per byte, sign-extended
    /// when `signed` is not 0 (`subbyte`).
    UNPACK_BITS = onnxc_unpack_bits in subbyte(
        x: In = *const u8, y: Out = *mut u8, n: Int = i64, bits: Int = i64, signed: Int = i64,
    );
    /// TfIdfVectorizer's n-gram counts of int64 token rows, weighted (`tfidf::TfIdfParams`);
    /// `weights` null or one float per column.
    TFIDF_F32 = onnxc_tfidf_f32 in tfidf(
        params: Params = *const i64, weights: OptFloats = *const f32, x: In = *const i64,
        y: Out = *mut f32, threads: Threads = *const crate::par::Threads,
    ) -> Status;
    /// A text pipeline's n-gram counts from its strings (`text_tfidf`): case change,
    /// Tokenizer and TfIdfVectorizer in one pass; per-worker scratch.
    TEXT_TFIDF_F32 = onnxc_text_tfidf_f32 in text_tfidf(
        params: Params = *const i64, weights: OptFloats = *const f32,
        x: In = *const *const std::ffi::c_char, y: Out = *mut f32, scratch: Scratch = *mut f32,
        threads: Threads = *const crate::par::Threads,
    ) -> Status;
    /// Determinants of `batch` `n × n` float64 matrices (`det`); scratch of `n²` doubles.
    DET_F64 = onnxc_det_f64 in det(
        x: In = *const f64, y: Out = *mut f64, batch: Int = i64, n: Int = i64,
        scratch: Scratch = *mut f64,
    );
    /// Inverses of `batch` `n × n` float64 matrices (`inverse`); scratch of `n²` doubles.
    INVERSE_F64 = onnxc_inverse_f64 in inverse(
        x: In = *const f64, y: Out = *mut f64, batch: Int = i64, n: Int = i64,
        scratch: Scratch = *mut f64,
    );
    /// BitCast: `n` bytes reinterpreted (`subbyte::bit_cast`).
    BIT_CAST = onnxc_bit_cast in subbyte(
        x: In = *const u8, y: Out = *mut u8, n: Int = i64, bits: Int = i64, signed: Int = i64,
        to_bool: Int = i64,
    );
    /// Exact GELU of `n` floats.
    GELU_F32 = onnxc_gelu_f32 in gelu(
        x: In = *const f32, y: Out = *mut f32, n: Int = i64, threads: Threads = *const crate::par::Threads,
    );
    /// Sigmoid, SiLU, tanh, HardSigmoid or HardSwish (`activation::SIGMOID`…) of `n` floats;
    /// `params` is `[α, β]`.
    ACTIVATION_F32 = onnxc_activation_f32 in activation(
        kind: Int = i64, params: Floats = *const f32, x: In = *const f32, y: Out = *mut f32,
        n: Int = i64, threads: Threads = *const crate::par::Threads,
    );
    /// Separable resize of the last two axes with compile-time taps (`resize::ResizeGeometry`).
    RESIZE_F32 = onnxc_resize_f32 in resize(
        params: Params = *const i64, floats: Floats = *const f32, x: In = *const f32,
        y: Out = *mut f32, scratch: Scratch = *mut f32,
    ) -> Status;
    /// `RESIZE_F32` over uint8 (`signed` 0) or int8 planes, sums rounded (`resize`).
    RESIZE_8 = onnxc_resize_8 in resize(
        params: Params = *const i64, floats: Floats = *const f32, x: In = *const u8,
        y: Out = *mut u8, scratch: Scratch = *mut f32, signed: Int = i64,
    ) -> Status;
    /// Positions of the k best elements of each line, any element type.
    TOPK = onnxc_topk in topk(
        params: Params = *const i64, x: In = *const u8, idx: Out = *mut i64,
        scratch: Scratch = *mut i64,
    ) -> Status;
    /// Positions of the non-zero elements, any element type (`select`): a count, then rows.
    NONZERO = onnxc_nonzero in select(
        params: Params = *const i64, x: In = *const u8, y: Out = *mut i64,
    ) -> Status;
    /// Boxes NonMaxSuppression selects (`select`): a count, then `[batch, class, box]` rows.
    NMS = onnxc_nms in select(
        params: Params = *const i64, boxes: In = *const f32, scores: In = *const f32,
        max_per_class: In = *const i64, iou: In = *const f32, score: In = *const f32,
        y: Out = *mut i64, scratch: Scratch = *mut i64,
    ) -> Status;
    /// Distinct slices along an axis, any element type (`select`): a count, then positions.
    UNIQUE = onnxc_unique in select(
        params: Params = *const i64, x: In = *const u8, y: Out = *mut i64,
        scratch: Scratch = *mut i64,
    ) -> Status;
    /// Weighted gathers from float32 planes (GridSample's per-channel half).
    GATHER_SUM_F32 = onnxc_gather_sum_f32 in gather(
        params: Params = *const i64, x: In = *const f32, off: In = *const i64,
        w: OptIn = *const f32, y: Out = *mut f32,
    ) -> Status;
    /// Integer convolution of uint8/int8 activations with packed int8 weights
    /// (`qconv::QConvParams`), int32, float32 or requantized output.
    QCONV = onnxc_qconv in qconv(
        params: Params = *const i64, geometry: OptParams = *const i64,
        x: In = *const u8, x_zp: OptIn = *const u8,
        y: Out = *mut u8, scratch: Scratch = *mut f32,
        threads: Threads = *const crate::par::Threads,
    ) -> Status;
    /// Depthwise convolution between 8-bit tensors through float32
    /// (`conv::qdepthwise::QDepthwiseParams`): dequantization, convolution and quantization
    /// a chunk of channels at a time.
    QDEPTHWISE_8 = onnxc_qdepthwise_8 in conv::qdepthwise(
        params: Params = *const i64, x: In = *const u8, w: In = *const f32,
        bias: OptIn = *const f32, y: Out = *mut u8, scratch: Scratch = *mut f32,
        threads: Threads = *const crate::par::Threads,
    ) -> Status;
    /// Integer matrix product of `rows` uint8/int8 activations with packed int8 weights
    /// (`qconv::matmul::QMatMulParams`); `a_zp` null for the blob's zero point.
    QMATMUL = onnxc_qmatmul in qconv::matmul(
        params: Params = *const i64, a: In = *const u8, a_zp: OptIn = *const u8,
        y: Out = *mut u8, rows: Int = i64, scratch: Scratch = *mut f32,
        threads: Threads = *const crate::par::Threads,
    ) -> Status;
    /// The aggregated leaf values of a tree ensemble per row (`tree::encode`'s forest).
    TREE_ENSEMBLE = onnxc_tree_ensemble in tree(
        forest: Params = *const i64, x: In = *const u8, y: Out = *mut u8, rows: Int = i64,
        scratch: OptScratch = *mut u8,
    ) -> Status;
    /// Positions of strings in a table (`strings::encode`), −1 where absent.
    STR_LOOKUP = onnxc_str_lookup in strings(
        table: Params = *const i64, x: In = *const *const std::ffi::c_char, y: Out = *mut i64,
        n: Int = i64,
    ) -> Status;
    /// DictVectorizer: a map's values at their keys' vocabulary positions (`map`).
    DICT_VECTORIZE = onnxc_dict_vectorize in map(
        table: Params = *const i64, map: In = *const i64, y: Out = *mut u8,
        value_bytes: Int = i64, string_keys: Int = i64,
    ) -> Status;
    /// CastMap (SPARSE): a map's values at the positions their int64 keys give (`map`).
    CAST_MAP_SPARSE = onnxc_cast_map_sparse in map(
        map: In = *const i64, y: Out = *mut u8, max: Int = i64, value_bytes: Int = i64,
    ) -> Status;
    /// Whether two arrays of `n` strings hold equal strings, element by element (bool).
    STR_EQUAL = onnxc_str_equal in strings(
        a: In = *const *const std::ffi::c_char, b: In = *const *const std::ffi::c_char,
        y: Out = *mut u8, n: Int = i64,
    );
    /// Whether each of `n` strings matches a compiled pattern as a whole (bool;
    /// `regex::Automaton`).
    REGEX_FULL_MATCH = onnxc_regex_full_match in regex(
        table: Params = *const i64, x: In = *const *const std::ffi::c_char, y: Out = *mut u8,
        n: Int = i64,
    ) -> Status;
    /// A table's strings at positions.
    STR_GATHER = onnxc_str_gather in strings(
        table: Params = *const i64, idx: In = *const i64, y: Out = *mut *const std::ffi::c_char,
        n: Int = i64,
    ) -> Status;
    /// Strings in lower or upper case (`string_make::LOWER`/`UPPER`), made in the step's
    /// string space (`space`, `cap` bytes).
    STR_CASE = onnxc_str_case in string_make(
        x: In = *const *const std::ffi::c_char, y: Out = *mut *const std::ffi::c_char,
        n: Int = i64, upper: Int = i64, space: Out = *mut u8, cap: Int = i64,
    ) -> Status;
    /// Pairs of strings joined, made in the step's string space.
    STR_CONCAT = onnxc_str_concat in string_make(
        a: In = *const *const std::ffi::c_char, b: In = *const *const std::ffi::c_char,
        y: Out = *mut *const std::ffi::c_char, n: Int = i64, space: Out = *mut u8,
        cap: Int = i64,
    ) -> Status;
    /// How many pieces StringSplit makes of each string (`string_make::SplitParams`).
    STR_SPLIT_COUNT = onnxc_str_split_count in string_make(
        params: Params = *const i64, x: In = *const *const std::ffi::c_char,
        z: Out = *mut i64, n: Int = i64,
    ) -> Status;
    /// StringSplit's pieces, `cols` a string (empty strings after the last), made in the
    /// step's string space.
    STR_SPLIT = onnxc_str_split in string_make(
        params: Params = *const i64, x: In = *const *const std::ffi::c_char,
        y: Out = *mut *const std::ffi::c_char, n: Int = i64, cols: Int = i64,
        space: Out = *mut u8, cap: Int = i64,
    ) -> Status;
    /// How many tokens the Tokenizer finds in each string (`tokenize::Tokenizer`).
    TOKENIZE_COUNT = onnxc_tokenize_count in tokenize(
        params: Params = *const i64, x: In = *const *const std::ffi::c_char,
        z: Out = *mut i64, n: Int = i64,
    ) -> Status;
    /// The Tokenizer's rows of `cols` tokens (marks and pad to the length the most tokens of
    /// a string give, null after), made in the step's string space.
    TOKENIZE = onnxc_tokenize in tokenize(
        params: Params = *const i64, x: In = *const *const std::ffi::c_char,
        y: Out = *mut *const std::ffi::c_char, n: Int = i64, cols: Int = i64,
        space: Out = *mut u8, cap: Int = i64,
    ) -> Status;
    /// An SVM's class probabilities from its pairwise decision values (`[k, rows]`).
    SVM_PROBABILITY = onnxc_svm_probability in svm(
        params: Params = *const i64, ab: Floats = *const f32, scores: In = *const f32,
        p: Out = *mut f32, scratch: Scratch = *mut f32,
    ) -> Status;
    /// LinearAttention's recurrence (`linear_attention::LinearAttentionParams`): the output
    /// `[b, t, hq·dv]` then the final state `[b, hkv, dk, dv]`, both into `y`.
    LINEAR_ATTENTION_F32 = onnxc_linear_attention_f32 in linear_attention(
        params: Params = *const i64, scale: Floats = *const f32, q: In = *const f32,
        k: In = *const f32, v: In = *const f32, past: OptIn = *const f32,
        decay: OptIn = *const f32, beta: OptIn = *const f32, y: Out = *mut f32,
        threads: Threads = *const crate::par::Threads,
    ) -> Status;
    /// An RNN, GRU or LSTM recurrence over one direction (`recurrent::RecurrentParams`):
    /// `xw` `[seq·batch, gates·hidden]` (X·Wᵀ), `r` `[gates·hidden, hidden]` (or, with
    /// `r_int8`, `rq` its integer product's `QMatMulParams`), optional bias `[Wb, Rb]`,
    /// initial h and c, peepholes; into `y` every step's h, the last h and c.
    RECURRENT_F32 = onnxc_recurrent_f32 in recurrent(
        params: Params = *const i64, clip: Floats = *const f32, xw: In = *const f32,
        r: OptIn = *const f32, rq: OptParams = *const i64, bias: OptIn = *const f32,
        h0: OptIn = *const f32, c0: OptIn = *const f32, peephole: OptIn = *const f32,
        y: Out = *mut f32,
        scratch: Scratch = *mut f32, threads: Threads = *const crate::par::Threads,
    ) -> Status;
    /// Both directions of a bidirectional RNN, GRU or LSTM (`recurrent_pair_f32`): the
    /// parameters are direction 0's, direction 1 runs reversed; each direction's operands as
    /// `RECURRENT_F32` takes them; into `y` each direction's result in turn.
    RECURRENT_PAIR_F32 = onnxc_recurrent_pair_f32 in recurrent(
        params: Params = *const i64, clip: Floats = *const f32,
        xw0: In = *const f32, r0: OptIn = *const f32, rq0: OptParams = *const i64,
        bias0: OptIn = *const f32,
        h00: OptIn = *const f32, c00: OptIn = *const f32, peephole0: OptIn = *const f32,
        xw1: In = *const f32, r1: OptIn = *const f32, rq1: OptParams = *const i64,
        bias1: OptIn = *const f32,
        h01: OptIn = *const f32, c01: OptIn = *const f32, peephole1: OptIn = *const f32,
        y: Out = *mut f32, scratch: Scratch = *mut f32, threads: Threads = *const crate::par::Threads,
    ) -> Status;
    /// RoiAlign (`roi_align::RoiAlignParams`): `x` `[n, c, h, w]`, `rois` `[r, 4]`
    /// (x1, y1, x2, y2), `batch` `[r]` int64 → `y` `[r, c, oh, ow]`; `ONNXC_ERR_INDEX` (those
    /// rois' outputs zero) for a batch index outside `[0, n)`.
    ROI_ALIGN_F32 = onnxc_roi_align_f32 in roi_align(
        params: Params = *const i64, spatial_scale: Floats = *const f32, x: In = *const f32,
        rois: In = *const f32, batch: In = *const i64, y: Out = *mut f32,
        threads: Threads = *const crate::par::Threads,
    ) -> Status;
}

/// What a call of `kernel` asks of its scratch, from its compiled parameter blob decoded as
/// the kernel decodes it when it runs: so a blob the kernel would refuse is refused here,
/// where the model is compiled, and the compiler can compare the scratch it planned with
/// what the decoded geometry needs. The tables checked per call only in their headers are
/// checked in full here (`tree::check`, `strings::check`). `blob`: the call's
/// `Params`/`OptParams` argument (None: null); `ints`: its `Int` arguments, in order.
/// Returns the scratch of a status-returning kernel (rounded, as laid out; zero where it needs
/// none), None for the others.
pub fn planned_scratch(
    kernel: &KernelAbi,
    blob: Option<&[i64]>,
    ints: &[i64],
) -> Result<Option<ScratchNeed>, ParamError> {
    Ok(scratch_of(kernel, blob, ints)?.map(|s| s.rounded()))
}

fn scratch_of(
    kernel: &KernelAbi,
    blob: Option<&[i64]>,
    ints: &[i64],
) -> Result<Option<ScratchNeed>, ParamError> {
    use crate::{conv, nchwc, pool, resize, strings, svm, topk, tree};
    if !kernel.status {
        return Ok(None);
    }
    let int = |k: usize| {
        ints.get(k)
            .copied()
            .ok_or(ParamError("an integer argument is missing"))
    };
    if *kernel == NCHW_TO_NCHWC {
        let (n, c, hw) = (int(0)?, int(1)?, int(2)?);
        params::product(
            [n, c.saturating_add(nchwc::CB as i64 - 1), hw],
            "a tensor is too large",
        )?;
        if let Some(b) = blob {
            nchwc::reorder::decode_planes(b, c as usize, hw as usize)?;
        }
        return Ok(Some(ScratchNeed::default()));
    }
    if *kernel == STR_CASE || *kernel == STR_CONCAT {
        // No parameters: their status is the string space's (`abi::ONNXC_ERR_STRINGS`).
        return Ok(Some(ScratchNeed::default()));
    }
    if *kernel == CAST_MAP_SPARSE {
        // No parameters: its status is the caller's map's (`abi::ONNXC_ERR_VALUE`).
        return Ok(Some(ScratchNeed::default()));
    }
    let b = blob.ok_or(ParamError("no parameter blob"))?;
    let floats = |n: usize| Some(ScratchNeed::shared(n * 4));
    let bytes = |n: usize| Some(ScratchNeed::shared(n));
    let some = |n: usize| bytes(some_scratch(n));
    Ok(if *kernel == CONV_F32 {
        Some(conv::ConvGeometry::decode(b)?.scratch(int(0)? != 0))
    } else if *kernel == CONV_NCHWC_F32 {
        Some(nchwc::BlockedConv::decode(b)?.scratch())
    } else if *kernel == CONV_TRANSPOSE_F32 {
        floats(conv::transpose::ConvTransposeGeometry::decode(b)?.scratch_floats(int(0)? != 0))
    } else if *kernel == POOL2D_F32 {
        Some(pool::PoolGeometry::decode(b)?.scratch())
    } else if *kernel == MAX_POOL_I8 {
        pool::PoolGeometry::decode(b)?;
        bytes(0)
    } else if *kernel == POOL_NCHWC_F32 {
        let g = pool::PoolGeometry::decode(b)?;
        let cb = nchwc::CB as i64;
        params::product(
            [g.planes, g.input[0], g.input[1], cb],
            "a tensor is too large",
        )?;
        params::product(
            [g.planes, g.output[0], g.output[1], cb],
            "a tensor is too large",
        )?;
        bytes(0)
    } else if *kernel == RESIZE_F32 {
        some(resize::ResizeParams::decode(b)?.scratch_floats() * 4)
    } else if *kernel == RESIZE_8 {
        some(resize::ResizeParams::decode_8(b)?.scratch_floats_8() * 4)
    } else if *kernel == TOPK {
        some(topk::TopkParams::decode(b)?.n * 8)
    } else if *kernel == NONZERO {
        crate::select::NonZeroParams::decode(b)?;
        bytes(0)
    } else if *kernel == UNIQUE {
        some(crate::select::UniqueParams::decode(b)?.n * 24)
    } else if *kernel == NMS {
        some(crate::select::NmsParams::decode(b)?.boxes * 16)
    } else if *kernel == GATHER_SUM_F32 {
        crate::gather::GatherParams::decode(b)?;
        bytes(0)
    } else if *kernel == QCONV {
        Some(crate::qconv::QConvParams::decode(b)?.scratch())
    } else if *kernel == QDEPTHWISE_8 {
        Some(crate::conv::qdepthwise::QDepthwiseParams::decode(b)?.scratch())
    } else if *kernel == QMATMUL {
        Some(crate::qconv::matmul::QMatMulParams::decode(b)?.scratch())
    } else if *kernel == TREE_ENSEMBLE {
        tree::check(b).map_err(|_| ParamError("the forest fails tree::check"))?;
        bytes(tree::scratch_bytes(b))
    } else if *kernel == DICT_VECTORIZE {
        if int(1)? != 0 {
            strings::check(b)?;
        } else {
            crate::map::check_ints(b)?;
        }
        bytes(0)
    } else if *kernel == STR_LOOKUP || *kernel == STR_GATHER {
        strings::check(b)?;
        bytes(0)
    } else if *kernel == SVM_PROBABILITY {
        some(svm::scratch_floats(svm::decode(b)?.0) * 4)
    } else if *kernel == ATTENTION_F32 {
        Some(crate::attention::AttentionParams::decode(b)?.scratch())
    } else if *kernel == LINEAR_ATTENTION_F32 {
        crate::linear_attention::LinearAttentionParams::decode(b)?;
        bytes(0)
    } else if *kernel == RECURRENT_F32 {
        floats(crate::recurrent::RecurrentParams::decode(b)?.scratch_floats())
    } else if *kernel == RECURRENT_PAIR_F32 {
        floats(crate::recurrent::RecurrentParams::decode(b)?.pair_scratch_floats())
    } else if *kernel == ROI_ALIGN_F32 {
        crate::roi_align::RoiAlignParams::decode(b)?;
        bytes(0)
    } else if *kernel == REGEX_FULL_MATCH {
        crate::regex::Automaton::decode(b)?;
        bytes(0)
    } else if *kernel == TOKENIZE || *kernel == TOKENIZE_COUNT {
        crate::tokenize::Tokenizer::decode(b)?;
        bytes(0)
    } else if *kernel == STR_SPLIT || *kernel == STR_SPLIT_COUNT {
        crate::string_make::check_split(b)?;
        bytes(0)
    } else if *kernel == TFIDF_F32 {
        crate::tfidf::TfIdfParams::decode(b)?;
        bytes(0)
    } else if *kernel == TEXT_TFIDF_F32 {
        let p = crate::text_tfidf::TextTfIdf::decode(b)?;
        strings::check(p.pool_words)?;
        Some(p.scratch())
    } else {
        return Err(ParamError(
            "a status-returning kernel planned_scratch does not know",
        ));
    })
}

/// Scratch bytes of a kernel whose signature takes scratch sized by an operand: at least
/// one word, so that the call gets a valid address when an empty operand needs no bytes
/// (the compiler plans the same, `KernelOp::scratch_bytes`).
pub fn some_scratch(bytes: usize) -> usize {
    bytes.max(8)
}

/// The runtime's exported functions that are not kernels, with the reason each exists.
pub const OTHER_ENTRY_POINTS: &[(&str, &str)] = &[
    ("onnxc_workspace_alloc", "NAME_run with a null workspace"),
    ("onnxc_workspace_free", "NAME_run with a null workspace"),
    ("onnxc_strerror", "the C API: error messages"),
    (
        "onnxc_run_shaped",
        "NAME_run_shaped: dims checked, one run per batch item",
    ),
    ("onnxc_f16_to_f32", "generated code: half-precision loads"),
    ("onnxc_f32_to_f16", "generated code: half-precision stores"),
    (
        "onnxc_f64_to_f16",
        "generated code: half-precision stores from float64",
    ),
    (
        "onnxc_f64_to_bf16",
        "generated code: bfloat16 stores from float64",
    ),
    ("onnxc_ipow", "generated code: integer Pow"),
    ("onnxc_lowp_to_f32", "generated code: float8/float4 loads"),
    (
        "onnxc_lowp_from_f32",
        "generated code: float8/float4 stores",
    ),
    ("onnxc_lowp_round", "generated code: casts to float8/float4"),
    (
        "onnxc_driver_main",
        "`onnxc run`/`bench`: the linked driver",
    ),
    ("onnxc_prof_now", "`--profile`: step timing"),
    ("onnxc_prof_record", "`--profile`: step timing"),
    (
        "onnxc_parallel_loop",
        "generated code: a step's loop in parallel chunks",
    ),
    (
        "onnxc_threads_workers",
        "NAME_run_threaded: the workspace it needs",
    ),
    ("onnxc_pool_create", "the C API: the runtime's thread pool"),
    ("onnxc_pool_destroy", "the C API: the runtime's thread pool"),
    ("onnxc_pool_threads", "the C API: the runtime's thread pool"),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernels that decode a parameter blob, those that make strings and the map
    /// readers are exactly those that return a status, and `planned_scratch` knows each of
    /// them.
    #[test]
    fn parameter_kernels_return_a_status() {
        for k in ALL {
            let params = k
                .args
                .iter()
                .any(|(_, a)| matches!(a, ArgKind::Params | ArgKind::OptParams));
            // Without a blob: the string makers, and a reader of the caller's maps.
            let data = [&STR_CASE, &STR_CONCAT, &CAST_MAP_SPARSE].contains(k);
            assert_eq!(params || data, k.status, "{}", k.symbol);
            let known = planned_scratch(k, Some(&[1]), &[0; 3]);
            assert_ne!(
                known,
                Err(ParamError(
                    "a status-returning kernel planned_scratch does not know"
                )),
                "{}",
                k.symbol
            );
            assert_eq!(known.is_ok_and(|s| s.is_none()), !k.status, "{}", k.symbol);
        }
    }

    /// Every `extern "C" fn onnxc_*` in the crate's sources is declared above, once.
    #[test]
    fn every_exported_function_is_declared() {
        let mut found = Vec::new();
        let mut dirs = vec![std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("kernels.rs") {
                    let text = std::fs::read_to_string(&p).unwrap();
                    for (i, _) in text.match_indices("extern \"C\" fn onnxc_") {
                        let name: String = text[i + "extern \"C\" fn ".len()..]
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        found.push(name);
                    }
                    // One-expression exports (`abi.rs`'s `exports!`): `onnxc_name(arg: T) -> U = …;`.
                    for (i, _) in text.match_indices("\nexports! {") {
                        let block = &text[i..i + text[i..].find("\n}").unwrap_or(text.len() - i)];
                        for line in block.lines().map(str::trim_start) {
                            if line.starts_with("onnxc_") {
                                found.push(line.chars().take_while(|c| *c != '(').collect());
                            }
                        }
                    }
                }
            }
        }
        found.sort();
        let mut declared: Vec<String> = ALL
            .iter()
            .map(|k| k.symbol.to_string())
            .chain(OTHER_ENTRY_POINTS.iter().map(|(s, _)| s.to_string()))
            .collect();
        declared.sort();
        assert_eq!(
            found, declared,
            "exported functions vs kernels.rs declarations"
        );
    }
}
