//! The op table: ONNX `(domain, op_type)` → builder. Adding an op is one builder function
//! plus one line here (and its conformance cases in the manifest).

use super::ctx::Ctx;
use super::ops::{
    activation, attention, col2im, contrib, contrib_quant, control, data, deform_conv, elementwise,
    grid_sample, legacy, linalg, loss, mel, ml, ms_attention, nn, norm, norm_more, optimizer, pool,
    qlinear, quant, random, reduce, regex, resize, rnn, roi_align, rotary, select, shape, sort,
    spectral, stateful, strings, text, transformer,
};
use crate::error::Result;
use crate::ir::ValueId;

pub type Builder = fn(&mut Ctx) -> Result<Vec<ValueId>>;

/// `(op_type, builder)` for the default ONNX domain.
pub const ONNX_OPS: &[(&str, Builder)] = &[
    // elementwise arithmetic and logic
    ("Add", elementwise::add),
    ("Sub", elementwise::sub),
    ("Mul", elementwise::mul),
    ("Div", elementwise::div),
    ("Pow", elementwise::pow),
    ("Mod", elementwise::modulo),
    ("Max", elementwise::max),
    ("Min", elementwise::min),
    ("Sum", elementwise::sum),
    ("Mean", elementwise::mean),
    ("Equal", elementwise::equal),
    ("Less", elementwise::less),
    ("LessOrEqual", elementwise::less_or_equal),
    ("Greater", elementwise::greater),
    ("GreaterOrEqual", elementwise::greater_or_equal),
    ("And", elementwise::and),
    ("Or", elementwise::or),
    ("Xor", elementwise::xor),
    ("Not", elementwise::not),
    ("BitwiseAnd", elementwise::bitwise_and),
    ("BitwiseOr", elementwise::bitwise_or),
    ("BitwiseXor", elementwise::bitwise_xor),
    ("BitwiseNot", elementwise::bitwise_not),
    ("BitShift", elementwise::bit_shift),
    ("Where", elementwise::where_),
    ("Cast", elementwise::cast),
    ("CastLike", elementwise::cast_like),
    ("BitCast", elementwise::bit_cast),
    ("Abs", elementwise::abs),
    ("Neg", elementwise::neg),
    ("Sqrt", elementwise::sqrt),
    ("Exp", elementwise::exp),
    ("Log", elementwise::log),
    ("Sin", elementwise::sin),
    ("Cos", elementwise::cos),
    ("Tan", elementwise::tan),
    ("Asin", elementwise::asin),
    ("Acos", elementwise::acos),
    ("Atan", elementwise::atan),
    ("Sinh", elementwise::sinh),
    ("Cosh", elementwise::cosh),
    ("Asinh", elementwise::asinh),
    ("Acosh", elementwise::acosh),
    ("Atanh", elementwise::atanh),
    ("Erf", elementwise::erf),
    ("Floor", elementwise::floor),
    ("Ceil", elementwise::ceil),
    ("Round", elementwise::round),
    ("Sign", elementwise::sign),
    ("Reciprocal", elementwise::reciprocal),
    ("IsNaN", elementwise::is_nan),
    ("IsInf", elementwise::is_inf),
    ("Clip", elementwise::clip),
    ("Identity", elementwise::identity),
    ("Dropout", elementwise::dropout),
    // activations
    ("Relu", activation::relu),
    ("LeakyRelu", activation::leaky_relu),
    ("PRelu", activation::prelu),
    ("Sigmoid", activation::sigmoid),
    ("HardSigmoid", activation::hard_sigmoid),
    ("HardSwish", activation::hard_swish),
    ("Tanh", activation::tanh),
    ("Elu", activation::elu),
    ("Selu", activation::selu),
    ("Celu", activation::celu),
    ("Softplus", activation::softplus),
    ("Softsign", activation::softsign),
    ("ThresholdedRelu", activation::thresholded_relu),
    ("Shrink", activation::shrink),
    ("Mish", activation::mish),
    ("Gelu", activation::gelu),
    ("Swish", activation::swish),
    ("SwiGLU", activation::swiglu),
    // linear algebra
    ("MatMul", linalg::matmul),
    ("Gemm", linalg::gemm),
    // neural network
    ("Conv", nn::conv),
    ("MaxPool", pool::max_pool),
    ("AveragePool", pool::average_pool),
    ("LpPool", pool::lp_pool),
    ("GlobalAveragePool", pool::global_average_pool),
    ("GlobalMaxPool", pool::global_max_pool),
    ("GlobalLpPool", pool::global_lp_pool),
    ("Softmax", nn::softmax),
    ("LogSoftmax", nn::log_softmax),
    ("Hardmax", nn::hardmax),
    // normalization
    ("BatchNormalization", norm::batch_norm),
    ("LRN", norm::lrn),
    // reductions
    ("ReduceSum", reduce::reduce_sum),
    ("ReduceMean", reduce::reduce_mean),
    ("ReduceMax", reduce::reduce_max),
    ("ReduceMin", reduce::reduce_min),
    ("ReduceProd", reduce::reduce_prod),
    ("ReduceL1", reduce::reduce_l1),
    ("ReduceL2", reduce::reduce_l2),
    ("ReduceLogSum", reduce::reduce_log_sum),
    ("ReduceLogSumExp", reduce::reduce_log_sum_exp),
    ("ReduceSumSquare", reduce::reduce_sum_square),
    ("ArgMax", reduce::arg_max),
    ("ArgMin", reduce::arg_min),
    // shapes and data movement
    ("Reshape", shape::reshape),
    ("Flatten", shape::flatten),
    ("Concat", shape::concat),
    ("Transpose", shape::transpose),
    ("Squeeze", shape::squeeze),
    ("Unsqueeze", shape::unsqueeze),
    ("Shape", shape::shape),
    ("Size", shape::size),
    ("Constant", shape::constant),
    ("ConstantOfShape", shape::constant_of_shape),
    ("Slice", data::slice),
    ("Gather", data::gather),
    ("GatherElements", data::gather_elements),
    ("GatherND", data::gather_nd),
    ("Expand", data::expand),
    ("Tile", data::tile),
    ("Range", data::range),
    ("OneHot", data::one_hot),
    ("Trilu", data::trilu),
    ("Split", data::split),
    ("Pad", data::pad),
    ("CenterCropPad", data::center_crop_pad),
    ("MaxUnpool", data::max_unpool),
    ("DepthToSpace", data::depth_to_space),
    ("Resize", resize::resize),
    ("TopK", sort::topk),
    ("NonZero", select::nonzero),
    ("Compress", select::compress),
    ("NonMaxSuppression", select::non_max_suppression),
    ("Unique", select::unique),
    ("GridSample", grid_sample::grid_sample),
    // Experimental ops of opsets 1-9 (no schema in current onnx).
    ("ImageScaler", legacy::image_scaler),
    ("Scale", legacy::scale),
    ("Affine", legacy::affine),
    ("ScaledTanh", legacy::scaled_tanh),
    ("ParametricSoftplus", legacy::parametric_softplus),
    ("Crop", legacy::crop),
    ("AffineGrid", grid_sample::affine_grid),
    ("RotaryEmbedding", rotary::rotary_embedding),
    ("DFT", spectral::dft),
    ("STFT", spectral::stft),
    ("HannWindow", spectral::hann_window),
    ("MelWeightMatrix", mel::mel_weight_matrix),
    ("HammingWindow", spectral::hamming_window),
    ("BlackmanWindow", spectral::blackman_window),
    ("If", control::imported),
    ("Loop", control::imported),
    ("Optional", control::optional),
    ("SequenceEmpty", control::imported),
    ("SequenceConstruct", control::imported),
    ("SequenceInsert", control::imported),
    ("SequenceAt", control::imported),
    ("SequenceErase", control::imported),
    ("SequenceLength", control::imported),
    ("SplitToSequence", control::imported),
    ("ConcatFromSequence", control::imported),
    ("SequenceMap", control::imported),
    ("OptionalHasElement", control::optional_has_element),
    ("OptionalGetElement", control::optional_get_element),
    ("Scan", control::imported),
    ("RNN", rnn::rnn),
    ("GRU", rnn::gru),
    ("LSTM", rnn::lstm),
    ("QuantizeLinear", quant::quantize_linear),
    ("DequantizeLinear", quant::dequantize_linear),
    ("DynamicQuantizeLinear", quant::dynamic_quantize_linear),
    ("MatMulInteger", qlinear::matmul_integer),
    ("QLinearMatMul", qlinear::qlinear_matmul),
    ("ConvInteger", qlinear::conv_integer),
    ("QLinearConv", qlinear::qlinear_conv),
    ("Upsample", resize::upsample),
    ("SpaceToDepth", data::space_to_depth),
    ("EyeLike", data::eye_like),
    ("CumSum", data::cum_sum),
    ("CumProd", data::cum_prod),
    ("ReverseSequence", data::reverse_sequence),
    ("ScatterND", data::scatter_nd),
    ("ScatterElements", data::scatter_elements),
    ("Scatter", data::scatter_elements),
    ("TensorScatter", data::tensor_scatter),
    ("CausalConvWithState", stateful::causal_conv_with_state),
    ("LinearAttention", stateful::linear_attention),
    ("LayerNormalization", norm_more::layer_norm),
    ("RMSNormalization", norm_more::rms_norm),
    ("InstanceNormalization", norm_more::instance_norm),
    ("GroupNormalization", norm_more::group_norm),
    ("LpNormalization", norm_more::lp_norm),
    ("MeanVarianceNormalization", norm_more::mean_variance_norm),
    ("Einsum", linalg::einsum),
    ("Det", linalg::det),
    ("Attention", attention::attention),
    ("ConvTranspose", nn::conv_transpose),
    ("Col2Im", col2im::col2im),
    ("DeformConv", deform_conv::deform_conv),
    ("RoiAlign", roi_align::roi_align),
    ("TfIdfVectorizer", text::tfidf_vectorizer),
    ("RegexFullMatch", regex::regex_full_match),
    ("StringNormalizer", strings::string_normalizer),
    ("StringConcat", strings::string_concat),
    ("StringSplit", strings::string_split),
    ("RandomUniform", random::random_uniform),
    ("RandomUniformLike", random::random_uniform_like),
    ("RandomNormal", random::random_normal),
    ("RandomNormalLike", random::random_normal_like),
    ("Bernoulli", random::bernoulli),
    ("Multinomial", random::multinomial),
    ("NegativeLogLikelihoodLoss", loss::nll_loss),
    ("SoftmaxCrossEntropyLoss", loss::softmax_cross_entropy_loss),
];

/// Limits of supported ops, for `docs/supported-ops.md`.
pub const NOTES: &[(&str, &str)] = &[
    (
        "TreeEnsembleRegressor",
        "a leaf listed more than once for the single target counts its first weight, as onnxruntime (skl2onnx's decision_leaf output relies on it); the reference evaluator sums the copies",
    ),
    (
        "CastMap",
        "the SPARSE form, [1, max_map], float values to TO_FLOAT/TO_INT64 and string values to TO_STRING; DENSE (one column per map entry, a count known at run time) and string/number conversions are refused; the map is an onnxc_map input",
    ),
    (
        "DictVectorizer",
        "[1, vocabulary] as onnxruntime; the map is an onnxc_map input (README: Maps); keys outside the vocabulary are ignored",
    ),
    (
        "MelWeightMatrix",
        "onnx's reference formulas, in float64; constant parameters fold into a constant table; run-time ones need the output's declared shape, checked against them (ONNXC_ERR_SHAPE)",
    ),
    (
        "Col2Im",
        "a gather (each image element sums the block columns covering it); run-time image_shape/block_shape need the output's declared shape and are checked against it (ONNXC_ERR_SHAPE); floats of 16 bits or more and integers of 8 bits or more (no bool, float8, 4- or 2-bit values)",
    ),
    (
        "Adagrad",
        "one update step, as elementwise maps in the variables' type (onnx's reference formulas)",
    ),
    (
        "Adam",
        "one update step, as elementwise maps in the variables' type (onnx's reference formulas)",
    ),
    (
        "Momentum",
        "one update step, standard or Nesterov, as elementwise maps in the variables' type",
    ),
    (
        "Gradient",
        "not supported: it stands for the derivative of a subgraph, which needs automatic differentiation of the graph; differentiate before exporting",
    ),
    (
        "NonZero",
        "constant input: folded; otherwise a runtime kernel writes the positions at their bound (one per element) and the output's dims come from NAME_run_shaped (ONNXC_TENSOR_DYNAMIC); what reads the positions must compute each on its own (no Shape or reduction of them)",
    ),
    (
        "Compress",
        "constant condition: a gather; otherwise NonZero's positions gathered, with NonZero's limits",
    ),
    (
        "Unique",
        "numbers and booleans; constant input: folded; otherwise a runtime kernel (numpy's order: NaN last, -0 equal to 0) with NonZero's limits on what reads Y, indices and counts",
    ),
    (
        "NonMaxSuppression",
        "float32; a runtime kernel (onnx's reference order and IoU in float32); the rows' bound is batches·classes·min(boxes, max_output_boxes_per_class) for a constant maximum, with NonZero's limits on what reads them",
    ),
    (
        "Attention",
        "opsets 23–25; softmax_precision is computed in float32",
    ),
    (
        "BatchNormalization",
        "training_mode=1 (opsets 14+) normalizes by the batch's statistics and outputs the updated running mean and variance; the statistics outputs of opsets 1–6's training form are rejected",
    ),
    (
        "Cast",
        "to and from every element type but string and complex: float8 and float4 with `saturate` (E8M0 rounds up only, the default round_mode), 4- and 2-bit integers wrapping as the reference does",
    ),
    (
        "Dropout",
        "inference: identity, all-true mask; training mode (a constant or run-time flag) draws the mask from the seeded generator of the Random ops",
    ),
    (
        "RandomUniform",
        "counter-based: element i draws SplitMix64 of the seed's stream (the seed's float64 bits; a fixed default without one), so every run gives the same values (also RandomUniformLike, RandomNormal(Like) by Box–Muller, Bernoulli, Multinomial by inverse CDF in float64, whose running sums take classes² steps a row, as CumSum's do); values differ from numpy's generator, which the backend cases' outputs come from",
    ),
    (
        "RegexFullMatch",
        "RE2 syntax compiled to a byte automaton at compile time (\\w, \\d, \\s, \\b ASCII as in RE2); no backreferences or lookaround (RE2 has none either)",
    ),
    (
        "StringNormalizer",
        "onnxruntime's semantics: stopwords remove whole strings (compared lower-cased when is_case_sensitive is 0), an all-removed input gives one empty string (its length is a data-dependent dim, NAME_run_shaped); case changes map code points one to one (Unicode's simple mapping) whatever the locale; the strings are made in the workspace (--string-bytes per string, else ONNXC_ERR_STRINGS), so the run needs the caller's workspace and its output strings live until the workspace is reused",
    ),
    (
        "StringConcat",
        "made in the workspace, as StringNormalizer's strings",
    ),
    (
        "StringSplit",
        "Python's str.split (an empty delimiter splits at runs of ASCII white space); the pieces' axis is a data-dependent dim bounded by maxsplit + 1 and by --string-bytes (more pieces in one string: ONNXC_ERR_STRINGS); made in the workspace, as StringNormalizer's strings",
    ),
    (
        "TfIdfVectorizer",
        "int32, int64 and string tokens; weights belong to the pool's n-grams as the spec and onnxruntime read them (onnx's reference evaluator reads them by output column)",
    ),
    (
        "MaxPool",
        "Indices output supported (storage_order 0 and 1)",
    ),
    ("Range", "run-time operands need a declared output shape"),
    (
        "Reshape",
        "a run-time shape needs the declared output shape; checked at run time",
    ),
    (
        "ReduceSum",
        "run-time axes need the declared output shape; checked at run time (also the other Reduce* ops)",
    ),
    (
        "Slice",
        "run-time starts/ends/axes/steps need the declared output shape (checked at run time), or slice one constant axis, whose length is then a data-dependent dim (NAME_run_shaped, NonZero's limits on what reads the result)",
    ),
    (
        "ConvTranspose",
        "float32, 1-D to 3-D: a GEMM and a col2im in the runtime (weights packed at compile time when constant); other types a generic loop nest",
    ),
    (
        "Conv",
        "float32 through im2col + GEMM; other float types through a generic loop nest",
    ),
    (
        "Resize",
        "run-time scales/sizes need the declared output shape (checked at run time); float32 resizes of the last two axes with constant scales/sizes/roi run a dedicated kernel (uint8/int8 ones too, but for tf_crop_and_resize and exclude_outside, summing in f64), others generic loops (f32; f64 for f64 and integer inputs); opset 10 follows onnxruntime (asymmetric, nearest rounds down when upsampling, up when downsampling); opsets 11–12's tf_half_pixel_for_nn as onnxruntime computes it, in float32",
    ),
    (
        "QuantizeLinear",
        "to 2- to 16-bit integers, float8 (with `saturate`) and float4; per tensor, axis or block",
    ),
    (
        "DequantizeLinear",
        "from 2- to 16-bit integers, int32, float8 and float4; per tensor, axis or block",
    ),
    (
        "If",
        "inlined when the condition is a constant (an initializer, or computable from shapes); on a run-time condition both branches are computed and the outputs selected, a branch's run-time checks failing the run only where it is taken (not for checked indices inside reductions or scatters); a branch that cannot be built at the compiled shapes is left out (a warning; the run returns ONNXC_ERR_SHAPE where the condition selects it); one type and shape per output; no sequence values",
    ),
    (
        "DFT",
        "float32/float64; dft_length constant; axis constant, or run-time with the output shape declared (each matching axis computed, the run-time one selected and checked); one matrix product with a constant DFT matrix (O(N²) per frame, no FFT)",
    ),
    (
        "STFT",
        "float32/float64; frame_length constant (or the window's length); frame_step constant, or run-time with the output shape declared (checked at run time); framing map then one matrix product with a constant DFT matrix",
    ),
    (
        "RotaryEmbedding",
        "one map; position_ids checked against the caches at run time (ONNXC_ERR_INDEX); float16/bfloat16 computed in float32",
    ),
    (
        "AffineGrid",
        "size a constant, or a run-time input with the output shape declared (N and the spatial sizes checked at run time)",
    ),
    (
        "GridSample",
        "every mode, padding mode and spatial rank (1-D to N-D); cubic+border follows onnx's reference (onnxruntime clamps taps, not positions); taps and weights computed by generated code, the per-channel gathers by a runtime kernel for float32",
    ),
    (
        "TopK",
        "K a constant; or a run-time input with the output shape declared (checked at run time), or without one the first K of the sorted axis, K a data-dependent dim (NAME_run_shaped, NonZero's limits on what reads them); the result is sorted whatever `sorted` says (equal values by position, NaN last); a runtime kernel finds the positions",
    ),
    (
        "SequenceEmpty",
        "kept at compile time: constant positions, static shapes; as a graph input or output, one tensor per element (`--sequence`); through Loop (known trip), If and functions, not Scan",
    ),
    (
        "SequenceConstruct",
        "kept at compile time: constant positions, static shapes; as a graph input or output, one tensor per element (`--sequence`); through Loop (known trip), If and functions, not Scan",
    ),
    (
        "SequenceInsert",
        "kept at compile time: constant positions, static shapes; as a graph input or output, one tensor per element (`--sequence`); through Loop (known trip), If and functions, not Scan",
    ),
    (
        "SequenceAt",
        "kept at compile time: constant positions, static shapes; as a graph input or output, one tensor per element (`--sequence`); through Loop (known trip), If and functions, not Scan",
    ),
    (
        "SequenceErase",
        "kept at compile time: constant positions, static shapes; as a graph input or output, one tensor per element (`--sequence`); through Loop (known trip), If and functions, not Scan",
    ),
    (
        "SequenceLength",
        "kept at compile time: constant positions, static shapes; as a graph input or output, one tensor per element (`--sequence`); through Loop (known trip), If and functions, not Scan",
    ),
    (
        "SplitToSequence",
        "kept at compile time: constant positions, static shapes; as a graph input or output, one tensor per element (`--sequence`); through Loop (known trip), If and functions, not Scan",
    ),
    (
        "ConcatFromSequence",
        "kept at compile time: constant positions, static shapes; as a graph input or output, one tensor per element (`--sequence`); through Loop (known trip), If and functions, not Scan",
    ),
    (
        "SequenceMap",
        "the body is unrolled once per element (sequences of compile-time length), within Loop's unrolling limits",
    ),
    (
        "MaxUnpool",
        "a scatter of X at I's flat positions into zeros (positions checked at run time); output_shape constant or declared",
    ),
    (
        "CenterCropPad",
        "target sizes constant, or a run-time input with the output shape declared (checked at run time)",
    ),
    (
        "Optional",
        "an optional holding a tensor or sequence is that value; an optional graph input may be compiled empty (`--absent`); an empty Optional() is an omitted value (OptionalHasElement false), but not a branch output of an If on a run-time condition",
    ),
    (
        "OptionalHasElement",
        "decided at compile time: true for a tensor, false for an omitted input",
    ),
    ("OptionalGetElement", "tensors only (no sequences)"),
    (
        "Loop",
        "unrolled: the trip count known at compile time, or a condition that folds to false (constants, or computable from shapes; the body's condition is folded per iteration); a run-time condition is if-converted up to the trip count (the body's checks guarded by it; scan outputs then have a data-dependent row count, the iterations that ran: NAME_run_shaped, NonZero's limits on what reads them); at most 4096 iterations; no sequence values",
    ),
    (
        "Scan",
        "unrolled: the scanned length must be known at compile time (--shape fixes a symbolic one); at most 4096 iterations; opset 8's sequence_lens only at full length",
    ),
    (
        "LSTM",
        "float32 layers with the default activations and no sequence_lens run the runtime's recurrence kernel, at any length (also a length taken at run time); the others are unrolled over the sequence, whose length must be known at compile time (at most 4096 steps); activations, clip, sequence_lens (and input_forget) follow onnxruntime",
    ),
    (
        "GRU",
        "float32 layers with the default activations and no sequence_lens run the runtime's recurrence kernel, at any length (also a length taken at run time); the others are unrolled over the sequence, whose length must be known at compile time (at most 4096 steps); activations, clip, sequence_lens (and input_forget) follow onnxruntime",
    ),
    (
        "RNN",
        "float32 layers with the default activations and no sequence_lens run the runtime's recurrence kernel, at any length (also a length taken at run time); the others are unrolled over the sequence, whose length must be known at compile time (at most 4096 steps); activations, clip, sequence_lens (and input_forget) follow onnxruntime",
    ),
    (
        "QLinearConv",
        "exact integer arithmetic, requantized as the reference evaluator does: constant 8-bit weights on the integer convolution kernel (AVX-512 VNNI, AVX2, portable), else the float32 convolution kernels where every partial sum is bounded below 2^24 (exact), float64 loops otherwise",
    ),
    (
        "QLinearMatMul",
        "exact integer product, requantized as the reference evaluator does: a constant 8-bit B on the integer matrix-product kernel (AVX-512 VNNI, AVX2, portable), else the float32 GEMM where every partial sum is bounded below 2^24 (exact), int32 loops otherwise",
    ),
    (
        "Einsum",
        "generic contraction loop; '...' must appear in the output if used",
    ),
];

/// Contrib ops onnxruntime registers in the default domain (opset 1) though ONNX has no
/// schema for them; its transformer optimizer writes them there.
pub const ORT_DEFAULT_DOMAIN_OPS: &[(&str, Builder)] = &[(
    "SimplifiedLayerNormalization",
    transformer::simplified_layer_norm,
)];

/// `(op_type, builder)` for onnxruntime's `com.microsoft` domain: the quantized ops its
/// quantizer writes (QOperator format, dynamic quantization), the fusions its transformer
/// optimizer and graph optimizations write, and the attention and 4-bit ops of LLM exports.
pub const MICROSOFT_OPS: &[(&str, Builder)] = &[
    ("QLinearAdd", contrib::qlinear_add),
    ("QLinearMul", contrib::qlinear_mul),
    ("QLinearSigmoid", contrib::qlinear_sigmoid),
    ("QLinearLeakyRelu", contrib::qlinear_leaky_relu),
    ("QLinearSoftmax", contrib::qlinear_softmax),
    ("QGemm", qlinear::qgemm),
    (
        "QLinearGlobalAveragePool",
        contrib::qlinear_global_average_pool,
    ),
    ("QLinearConcat", contrib::qlinear_concat),
    ("QLinearConv", contrib::qlinear_conv),
    ("NhwcMaxPool", contrib::nhwc_max_pool),
    ("QLinearAveragePool", contrib_quant::qlinear_average_pool),
    ("QLinearReduceMean", contrib_quant::qlinear_reduce_mean),
    ("QLinearWhere", contrib_quant::qlinear_where),
    (
        "MatMulIntegerToFloat",
        contrib_quant::matmul_integer_to_float,
    ),
    ("DynamicQuantizeLSTM", rnn::dynamic_quantize_lstm),
    ("QEmbedLayerNormalization", contrib_quant::qembed_layer_norm),
    (
        "DynamicQuantizeMatMul",
        contrib_quant::dynamic_quantize_matmul,
    ),
    ("MatMulNBits", contrib_quant::matmul_nbits),
    ("SkipLayerNormalization", transformer::skip_layer_norm),
    (
        "SkipSimplifiedLayerNormalization",
        transformer::skip_simplified_layer_norm,
    ),
    ("LayerNormalization", norm_more::layer_norm),
    (
        "SimplifiedLayerNormalization",
        transformer::simplified_layer_norm,
    ),
    ("Gelu", transformer::gelu),
    ("BiasGelu", transformer::bias_gelu),
    ("FastGelu", transformer::fast_gelu),
    ("QuickGelu", transformer::quick_gelu),
    ("BiasAdd", transformer::bias_add),
    ("BiasSplitGelu", transformer::bias_split_gelu),
    ("FusedMatMul", transformer::fused_matmul),
    ("CDist", linalg::cdist),
    ("GridSample", grid_sample::ms_grid_sample),
    ("Inverse", linalg::inverse),
    ("Trilu", data::trilu),
    ("FusedGemm", transformer::fused_gemm),
    ("FusedConv", transformer::fused_conv),
    ("TransposeMatMul", transformer::fused_matmul),
    ("EmbedLayerNormalization", transformer::embed_layer_norm),
    ("RotaryEmbedding", transformer::rotary_embedding),
    ("Attention", ms_attention::attention),
    ("QAttention", ms_attention::qattention),
    ("MultiHeadAttention", ms_attention::multi_head_attention),
    ("GroupQueryAttention", ms_attention::group_query_attention),
    ("QuantizeLinear", quant::quantize_linear),
    ("DequantizeLinear", quant::dequantize_linear),
    ("Tokenizer", strings::tokenizer),
];

/// What onnxc implements of each `com.microsoft` op (and of `ORT_DEFAULT_DOMAIN_OPS`), for
/// `docs/supported-ops.md`.
pub const MICROSOFT_NOTES: &[(&str, &str)] = &[
    (
        "Trilu",
        "as ai.onnx Trilu-14 (what onnxruntime's registered symbolics export torch.triu/tril as)",
    ),
    (
        "Inverse",
        "float16, float and double; Gauss-Jordan elimination with partial pivoting in float64, rounded to the input's type (a singular matrix gives infinities or NaN, as onnxruntime)",
    ),
    (
        "GridSample",
        "as ai.onnx GridSample-16 (what PyTorch exports grid_sample as below opset 16): 4-D input, bilinear, nearest or bicubic, every padding mode",
    ),
    (
        "Tokenizer",
        "onnxruntime's semantics: tokenexp's longest match at the leftmost position, separators' first alternative, a single empty separator for characters, RE2 syntax compiled to automata at compile time (as RegexFullMatch); the tokens' axis is a data-dependent dim bounded by --string-bytes / mincharnum + the marks (more tokens in one string: ONNXC_ERR_STRINGS); made in the workspace, as StringNormalizer's strings; TfIdfVectorizer reads the padded rows directly when its pool holds no empty string",
    ),
    (
        "QLinearAdd",
        "per-tensor scales and zero points, broadcasting; the documented formula in float32",
    ),
    (
        "QLinearMul",
        "per-tensor scales and zero points, broadcasting; the documented formula in float32",
    ),
    (
        "QLinearSigmoid",
        "dequantize, sigmoid, quantize (a 256-entry table per run)",
    ),
    ("QLinearLeakyRelu", "dequantize, LeakyRelu, quantize"),
    (
        "QLinearConv",
        "as ONNX's QLinearConv; with channels_last=1 (onnxruntime's NHWC transformer) over NHWC activations, transposed around the convolution",
    ),
    (
        "NhwcMaxPool",
        "MaxPool of an 8-bit NHWC input, transposed around the pool",
    ),
    (
        "QLinearSoftmax",
        "axis semantics of the `opset` attribute (before 13 the input is coerced to 2-D at axis 1; onnxruntime softmaxes a 4-D input's last axis there)",
    ),
    (
        "QGemm",
        "B per tensor or per column; int32 bias; float or quantized output",
    ),
    (
        "QLinearGlobalAveragePool",
        "NCHW or channels_last; exact integer sum",
    ),
    (
        "QLinearConcat",
        "each input requantized to the output's scale and zero point",
    ),
    (
        "QLinearAveragePool",
        "AveragePool's attributes, NCHW or channels_last; the mean of x − z_x exact (float64), requantized once (onnxruntime rounds float32 dequantized values: one step apart near ties)",
    ),
    (
        "QLinearReduceMean",
        "axes and keepdims attributes; the mean exact, requantized once",
    ),
    (
        "QLinearWhere",
        "broadcasting; X and Y requantized to Z's scale and zero point",
    ),
    (
        "QEmbedLayerNormalization",
        "uint8 or int8 tables, gamma and beta with one scale and zero point each, dequantized to float32 at compile time ((q − zero point) · scale, as onnxruntime), then EmbedLayerNormalization",
    ),
    (
        "DynamicQuantizeLSTM",
        "int8 or uint8 weights with scales and zero points per direction or per column; as onnxruntime at one thread, the input sequence and each step's hidden state are quantized to uint8 as DynamicQuantizeLinear does, the products summed exactly in integers and scaled to float32 (onnxruntime's uint8×int8 x86 kernels without VNNI saturate with full-range int8 weights; its quantizer's reduce_range avoids it); unrolled as LSTM; sequence_lens not supported",
    ),
    (
        "MatMulIntegerToFloat",
        "a_scale and a_zero_point per tensor, B's per tensor or per column; exact integer product, then float32 scaling and bias",
    ),
    (
        "DynamicQuantizeMatMul",
        "A quantized to uint8 as DynamicQuantizeLinear does, then MatMulIntegerToFloat",
    ),
    (
        "MatMulNBits",
        "2-, 4- and 8-bit constant weights (packed or float zero points, default 2^(bits−1)) dequantized at compile time into a float32 [K, N] matrix for the float32 GEMM: the object file holds 4·K·N bytes of weights, 8× the 4-bit size; no g_idx, no prepacked weights; accuracy_level is ignored (float32 throughout)",
    ),
    (
        "QAttention",
        "Attention of the exact integer projection (X − z_x)(W − z_w)·s_x·s_w + bias; onnxruntime's uint8×int8 x86 kernels can saturate with full-range int8 weights (its quantizer's reduce_range avoids it)",
    ),
    (
        "SkipLayerNormalization",
        "skip of the input's shape, [1, S, H] or [S, H]; outputs mean, inv_std_var and the sum",
    ),
    (
        "SkipSimplifiedLayerNormalization",
        "RMS normalization of input + skip (+ bias); outputs inv_std_var and the sum",
    ),
    ("LayerNormalization", "as ONNX's LayerNormalization"),
    (
        "SimplifiedLayerNormalization",
        "default domain (onnxruntime registers it there): RMSNormalization's formula",
    ),
    ("Gelu", "exact (erf); the GELU kernel for float32"),
    ("BiasGelu", "GELU of A + B (B over the last axis)"),
    ("FastGelu", "tanh approximation, optional bias"),
    ("QuickGelu", "x·σ(αx), α 1.702 by default"),
    (
        "BiasAdd",
        "X + bias + skip (onnxruntime has no CPU kernel; the documented formula)",
    ),
    (
        "BiasSplitGelu",
        "left half · GELU(right half) of X + bias (onnxruntime has no CPU kernel; the documented formula)",
    ),
    (
        "FusedMatMul",
        "transA/transB, transBatchA/transBatchB and alpha",
    ),
    ("TransposeMatMul", "as FusedMatMul"),
    (
        "CDist",
        "metric sqeuclidean or euclidean (the metrics of onnxruntime's CPU kernel); float or double; summed as squared differences (onnxruntime expands them into norms and a product, which can round differently)",
    ),
    (
        "FusedGemm",
        "Gemm then Relu, Tanh, Sigmoid, LeakyRelu, HardSigmoid or Clip",
    ),
    (
        "FusedConv",
        "Conv plus Z, then Relu, Tanh, Sigmoid, LeakyRelu, HardSigmoid or Clip",
    ),
    (
        "EmbedLayerNormalization",
        "word, position (given or 0..S) and segment embeddings, layer-normalized; ids checked at run time (ONNXC_ERR_INDEX); mask_index = count of ones per mask row",
    ),
    (
        "RotaryEmbedding",
        "position_ids [B, S] or one offset; checked against the caches at run time; not packed batching",
    ),
    (
        "Attention",
        "packed QKV weights and bias, qkv_hidden_sizes, every CPU mask form (raw [B, T] / [B, S, T], key lengths [B], end and start positions [2B]), unidirectional, past/present of a length fixed at compile time, attention_bias; float32 (float16 and bfloat16 computed in float32); not do_rotary or past_present_share_buffer",
    ),
    (
        "MultiHeadAttention",
        "3-D query with 3-D key/value (bias added) or projected 4-D key/value, key_padding_mask as Attention's masks, attention_bias, past/present key and value, unidirectional; float32 (float16 and bfloat16 computed in float32); not packed QKV/KV (nor has onnxruntime's CPU kernel), not beam-search inputs",
    ),
    (
        "GroupQueryAttention",
        "static past/present shapes (present = past + new tokens, or the declared length), per-row positions from seqlens_k checked at run time (ONNXC_ERR_INDEX), packed QKV, rotary embedding, local window, softcap, attention_bias; float32 (float16 and bfloat16 computed in float32); not smooth softmax, head sinks, quantized KV caches or shared buffers",
    ),
    ("QuantizeLinear", "as ONNX's QuantizeLinear"),
    ("DequantizeLinear", "as ONNX's DequantizeLinear"),
];

/// `(op_type, builder)` for the `ai.onnx.ml` domain (classical models: scikit-learn,
/// LightGBM and XGBoost exports).
pub const ML_OPS: &[(&str, Builder)] = &[
    (
        "ArrayFeatureExtractor",
        ml::preprocess::array_feature_extractor,
    ),
    ("Binarizer", ml::preprocess::binarizer),
    ("CastMap", ml::maps::cast_map),
    ("CategoryMapper", ml::preprocess::category_mapper),
    ("DictVectorizer", ml::maps::dict_vectorizer),
    ("FeatureVectorizer", ml::preprocess::feature_vectorizer),
    ("Imputer", ml::preprocess::imputer),
    ("LabelEncoder", ml::preprocess::label_encoder),
    ("LinearClassifier", ml::linear::linear_classifier),
    ("LinearRegressor", ml::linear::linear_regressor),
    ("Normalizer", ml::preprocess::normalizer),
    ("OneHotEncoder", ml::preprocess::one_hot_encoder),
    ("SVMClassifier", ml::svm::svm_classifier),
    ("SVMRegressor", ml::svm::svm_regressor),
    ("Scaler", ml::preprocess::scaler),
    ("TreeEnsemble", ml::tree::tree_ensemble),
    ("TreeEnsembleClassifier", ml::tree::tree_ensemble_classifier),
    ("TreeEnsembleRegressor", ml::tree::tree_ensemble_regressor),
    ("ZipMap", ml::zipmap::zipmap),
];

/// `(op_type, builder)` for the `ai.onnx.preview` domain (ops ONNX is still trying out).
pub const PREVIEW_OPS: &[(&str, Builder)] = &[
    // The importer builds it, inlining its score_mod/prob_mod subgraphs.
    ("FlexAttention", control::imported),
];

/// `(op_type, builder)` for the `ai.onnx.preview.training` domain: the optimizers, which
/// are pure functions of their inputs (`Gradient` needs differentiation and is refused).
pub const TRAINING_OPS: &[(&str, Builder)] = &[
    ("Adagrad", optimizer::adagrad),
    ("Adam", optimizer::adam),
    ("Momentum", optimizer::momentum),
];

/// Why an op `lookup` does not find is refused: what to do instead where a domain is known
/// to be out of reach.
pub fn missing_reason(domain: &str) -> String {
    match domain {
        "com.microsoft.nchwc" => "onnxruntime's NCHWc layout, written when a model is saved at \
             ORT_ENABLE_ALL: its weights are stored in blocks whose size depends on the machine \
             that saved it (8 or 16 channels) and is not recorded in the model; save the \
             optimized model at ORT_ENABLE_EXTENDED, or compile the model as exported"
            .into(),
        _ => "no implementation of this op".into(),
    }
}

/// `(domain, op_type, since opset, outputs)` for the standard ops whose schema has more
/// than one output (optional ones included), from onnx 1.23's schemas (`max_output` of
/// `onnx.defs.get_all_schemas_with_history()`); `usize::MAX` for a variadic output list.
/// Every other op of `ONNX_OPS`, `ML_OPS`, `PREVIEW_OPS` and `TRAINING_OPS` has one, as
/// have versions of a listed op before its first entry (MaxPool before opset 8).
const MULTI_OUTPUT: &[(&str, &str, i64, usize)] = &[
    ("", "Attention", 23, 4),
    ("", "BatchNormalization", 1, 5),
    ("", "BatchNormalization", 14, 3),
    ("", "CausalConvWithState", 27, 2),
    ("", "Dropout", 1, 2),
    ("", "DynamicQuantizeLinear", 11, 3),
    ("", "GRU", 1, 2),
    ("", "If", 1, usize::MAX),
    ("", "LSTM", 1, 3),
    ("", "LayerNormalization", 17, 3),
    ("", "LinearAttention", 27, 2),
    ("", "Loop", 1, usize::MAX),
    ("", "MaxPool", 8, 2),
    ("", "RNN", 1, 2),
    ("", "Scan", 8, usize::MAX),
    ("", "SequenceMap", 17, usize::MAX),
    ("", "SoftmaxCrossEntropyLoss", 12, 2),
    ("", "Split", 1, usize::MAX),
    ("", "StringSplit", 20, 2),
    ("", "TopK", 1, 2),
    ("", "Unique", 11, 4),
    ("ai.onnx.ml", "LinearClassifier", 1, 2),
    ("ai.onnx.ml", "SVMClassifier", 1, 2),
    ("ai.onnx.ml", "TreeEnsembleClassifier", 1, 2),
    ("ai.onnx.preview.training", "Adagrad", 1, usize::MAX),
    ("ai.onnx.preview.training", "Adam", 1, usize::MAX),
    ("ai.onnx.preview.training", "Gradient", 1, usize::MAX),
    ("ai.onnx.preview.training", "Momentum", 1, usize::MAX),
];

/// How many outputs the schema of `op_type` at `opset` has (optional ones included), for
/// the standard ops onnxc builds; None for a variadic list or an op whose schema onnxc does
/// not know (the contrib domains, the ORT ops of the default domain).
pub fn schema_outputs(domain: &str, op_type: &str, opset: i64) -> Option<usize> {
    let mut listed = MULTI_OUTPUT
        .iter()
        .filter(|(d, op, _, _)| *d == domain && *op == op_type)
        .peekable();
    if listed.peek().is_some() {
        let n = listed
            .filter(|e| e.2 <= opset)
            .map(|e| e.3)
            .next_back()
            .unwrap_or(1);
        return (n != usize::MAX).then_some(n);
    }
    let standard: &[&[(&str, Builder)]] = match domain {
        "" => &[ONNX_OPS],
        "ai.onnx.ml" => &[ML_OPS],
        "ai.onnx.preview" => &[PREVIEW_OPS],
        "ai.onnx.preview.training" => &[TRAINING_OPS],
        _ => return None,
    };
    let known = standard
        .iter()
        .flat_map(|t| t.iter())
        .any(|(n, _)| *n == op_type);
    known.then_some(1)
}

pub fn lookup(domain: &str, op_type: &str) -> Option<Builder> {
    let tables: &[&[(&str, Builder)]] = match domain {
        "" => &[ONNX_OPS, ORT_DEFAULT_DOMAIN_OPS],
        "com.microsoft" => &[MICROSOFT_OPS],
        "ai.onnx.ml" => &[ML_OPS],
        "ai.onnx.preview" => &[PREVIEW_OPS],
        "ai.onnx.preview.training" => &[TRAINING_OPS],
        _ => return None,
    };
    tables
        .iter()
        .flat_map(|t| t.iter())
        .find(|(n, _)| *n == op_type)
        .map(|(_, b)| *b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_contrib_op_has_a_note() {
        for (name, _) in MICROSOFT_OPS.iter().chain(ORT_DEFAULT_DOMAIN_OPS) {
            assert!(
                MICROSOFT_NOTES.iter().any(|(n, _)| n == name),
                "{name} has no entry in MICROSOFT_NOTES"
            );
        }
    }
}
