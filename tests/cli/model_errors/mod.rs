//! Model errors: each names the node, its op type and opset and what to do; every
//! unsupported op is reported at once; parameters that are run-time inputs are checked
//! against the declared shape when the model runs.

use super::{compile_error, compiles, fails, onnxc, run_fails, stderr};
use onnxc_tests::model::{
    D, f32_tensor, graph, importing, int_tensor, model, node, save, save_tensor, sequence_info,
    value_info, with_graph, with_int, with_ints, with_str,
};
use onnxc_tests::{run_model, scratch};

mod graphs;
mod nodes;
mod shapes;
mod unsupported;
