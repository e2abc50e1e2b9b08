//! Op builders, one file per family. Each builder reads a node through `Ctx` and emits core
//! ops; semantics follow the model's opset for that op.

pub mod activation;
pub mod attention;
pub mod contrib;
pub mod contrib_quant;
pub mod control;
pub mod data;
pub mod deform_conv;
pub mod elementwise;
pub mod flex_attention;
pub mod grid_sample;
pub mod legacy;
pub mod linalg;
pub mod loss;
pub mod ml;
pub mod ms_attention;
pub mod nn;
pub mod norm;
pub mod norm_more;
pub mod qdq;
pub mod qlinear;
pub mod quant;
pub mod random;
pub mod reduce;
pub mod regex;
pub mod resize;
pub mod rnn;
pub mod roi_align;
pub mod rotary;
pub mod select;
pub mod shape;
pub mod sort;
pub mod spectral;
pub mod stateful;
pub mod text;
pub mod transformer;
