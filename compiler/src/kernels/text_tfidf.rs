//! A text pipeline's n-gram counts straight from its strings (`onnxc_runtime::text_tfidf`):
//! the case change, Tokenizer and TfIdfVectorizer that scikit-learn's text vectorizers
//! export, fused by the TfIdfVectorizer's builder (`frontend::ops::text`).

use super::{KernelOp, LowerCx, Operand, required_scratch};
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use onnxc_runtime::par::ScratchNeed;
use onnxc_runtime::text_tfidf::TextTfIdf as Params;
use std::sync::Arc;

/// Operand 0: the strings, one a row; the result `[rows, columns]` float32.
#[derive(Clone, Debug, PartialEq)]
pub struct TextTfIdf {
    pub blob: Arc<Vec<i64>>,
    pub weights: Option<Arc<Vec<f32>>>,
}

impl KernelOp for TextTfIdf {
    fn name(&self) -> &'static str {
        "text_tfidf"
    }

    fn attrs(&self) -> String {
        match Params::decode(&self.blob) {
            Ok(p) => format!(
                "case={:?} tokens={:?} mark={} mode={:?} n={}..={} skip={} pool={} columns={}",
                p.case,
                p.tokenizer.mode,
                p.tokenizer.mark,
                p.tfidf.mode,
                p.tfidf.min_n,
                p.tfidf.max_n,
                p.tfidf.max_skip,
                onnxc_runtime::strings::len(p.pool_words),
                p.tfidf.out
            ),
            Err(e) => format!("invalid: {e}"),
        }
    }

    fn scratch(&self, _: &[Operand<'_>], _: Operand<'_>) -> ScratchNeed {
        Params::decode(&self.blob).map_or(ScratchNeed::default(), |p| p.scratch())
    }

    /// Each string's row depends on the others only through the padding to the most
    /// tokens of a call's strings, as the Tokenizer's rows do (`kernels::StrPieces`).
    fn per_item(
        &self,
        operands: &[Option<usize>],
        _ranks: &[usize],
        results: &[Option<usize>],
    ) -> bool {
        super::per_row(operands, results)
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        Ok(vec![Stmt::call(
            &kernels::TEXT_TFIDF_F32,
            vec![
                // Params, not a Blob: the row count inside follows a dim taken at run
                // time (`loops::dims` makes differing words formulas).
                Arg::Params(self.blob.to_vec()),
                self.weights
                    .as_ref()
                    .map_or(Arg::Null, |w| Arg::Floats(w.to_vec())),
                cx.operand_arg(0),
                cx.result_arg(),
                required_scratch(cx, self)?,
                Arg::Threads,
            ],
        )?])
    }
}
