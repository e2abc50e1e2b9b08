//! Closures the runtime leaves out of line, read from its static library's symbols.
//!
//! The runtime's kernels inline their helpers and closures into `#[target_feature]`
//! functions; one compiled apart is a call per use, without the function's instruction set
//! (twice a closure in a kernel's inner loop, `array::from_fn`'s or a helper's, slowed a
//! model by a quarter while every test passed). Out of line and expected are the task bodies
//! handed to the pool (`par`), dispatchers and cold paths: the functions below. A new one
//! fails this test: if it is inside a kernel's loop, make it an `#[inline(always)]` function
//! or a plain loop; if it is a task body or runs once per call, add its function here.

use onnxc_tests::onnxc_bin;
use std::collections::BTreeSet;
use std::process::Command;

/// The functions (paths below `onnxc_runtime::`) whose closures are compiled apart.
const EXPECTED: &[&str] = &[
    "activation::activation_par",
    "attention::AttentionParams::decode",
    "attention::attention_f32",
    "conv::conv_f32",
    "conv::depthwise::depthwise_par",
    "conv::geometry::ConvGeometry::depthwise_blocked_dims",
    "conv::geometry::ConvGeometry::phase_dims",
    "conv::im2col::conv_group",
    "conv::indirect::conv_indirect",
    "conv::pixel_major::<impl onnxc_runtime::conv::geometry::ConvGeometry>::pm_padded_dims",
    "conv::pixel_major::conv_pixel_major",
    "conv::qdepthwise::qdepthwise",
    "conv::subsample",
    "driver::EPOCH::{{constant}}",
    "driver::PROFILE::{{constant}}",
    "driver::map_file",
    "driver::onnxc_driver_main",
    "gemm::gemv::gemv_matrix_b",
    "gemm::gemv::gemv_packed_b",
    "gemm::indirect::gemm_indirect_b",
    "gemm::packed_a::gemm_a",
    "gemm::packed_b::gemm_packed_b",
    "linear_attention::linear_attention_f32",
    "lookup::lookup_on",
    "nchwc::conv",
    "nchwc::gemm_image",
    "nchwc::padded_input",
    "nchwc::pool::onnxc_pool_nchwc_f32",
    "nchwc::reorder::onnxc_nchw_to_nchwc",
    "nchwc::reorder::onnxc_nchwc_to_nchw",
    "nchwc::subsample",
    "par::Par::run_ranges",
    "par::onnxc_parallel_loop",
    "pool::int8::max_pool_i8",
    "pool::pool2d_f32",
    "qconv::matmul::qmatmul_on",
    "qconv::qconv_on",
    "recurrent::recurrent_pair_f32",
    "resize::ResizeParams::decode",
    "roi_align::roi_align_f32",
    "simd::dispatch_ranges",
    "softmax::onnxc_softmax_f32",
    "text_tfidf::text_tfidf_f32",
    "tfidf::tfidf_f32",
    "topk::heap_select",
    "tree::encode::check",
    "tree::encode::encode",
    "winograd::conv_with",
];

#[test]
fn only_task_bodies_and_cold_closures_stay_out_of_line() {
    let lib = Command::new(onnxc_bin())
        .arg("--print-runtime-lib")
        .output()
        .expect("onnxc runs");
    let lib = String::from_utf8(lib.stdout).expect("a path");
    let nm = Command::new("nm")
        .args(["--demangle", "--defined-only"])
        .arg(lib.trim())
        .output()
        .expect("nm (binutils) reads the runtime library");
    assert!(nm.status.success(), "nm failed on {}", lib.trim());
    let symbols = String::from_utf8_lossy(&nm.stdout);
    let found: BTreeSet<String> = symbols
        .lines()
        .filter_map(|l| l.splitn(3, ' ').nth(2))
        .filter_map(|s| s.strip_prefix("onnxc_runtime::"))
        .filter_map(|s| s.find("::{{closure}}").map(|i| s[..i].to_string()))
        .collect();
    assert!(
        !found.is_empty(),
        "no closure symbols found: is the runtime library built with symbols?"
    );
    let expected: BTreeSet<String> = EXPECTED.iter().map(|s| s.to_string()).collect();
    let new: Vec<_> = found.difference(&expected).collect();
    assert!(
        new.is_empty(),
        "closures compiled out of line in {new:#?}: inside a kernel's loop they are a call per \
         use (see this file's documentation); if they are task bodies or cold, add them to \
         EXPECTED"
    );
    let gone: Vec<_> = expected.difference(&found).collect();
    assert!(
        gone.is_empty(),
        "EXPECTED lists functions with no out-of-line closure any more: remove {gone:#?}"
    );
}
