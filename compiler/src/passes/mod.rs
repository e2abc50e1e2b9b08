//! Graph-to-graph passes. `optimize` is the literal pass list.

pub mod batch;
pub mod cse;
pub mod data_dims;
pub mod dce;
pub mod fold;
pub mod gelu;

use crate::error::{Error, Result};
use crate::ir::Graph;

#[derive(Clone, Debug)]
pub struct PassOptions {
    /// Run the optimizing passes (off at -O0: only what correctness needs).
    pub optimize: bool,
    pub fold_limit: usize,
}

pub fn optimize(g: &mut Graph, opts: &PassOptions) -> Result<()> {
    fold::run(g, opts.fold_limit).map_err(Error::Model)?;
    dce::run(g);
    if opts.optimize {
        cse::run(g);
        dce::run(g);
        gelu::run(g);
        dce::run(g);
    }
    Ok(())
}
