//! The compiler's intermediate representations above the loop level: element types,
//! symbolic dims, constant tensors, scalar expressions and the op graph.

pub mod cost;
pub mod dim;
pub mod dtype;
pub mod eval;
pub mod expr;
pub mod graph;
pub mod interp;
pub mod tensor;

pub use dim::{Dim, Shape};
pub use dtype::DType;
pub use expr::E;
pub use graph::{Graph, Node, NodeId, Op, Origin, TypeInfo, ValueId};
pub use tensor::{Scalar, Tensor, Value};
