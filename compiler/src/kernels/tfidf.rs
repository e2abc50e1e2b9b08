//! TfIdfVectorizer (`onnxc_tfidf_f32`): n-gram counts of int64 token rows against a pool
//! flattened into the parameter blob (a trie, `onnxc_runtime::tfidf`), weighted by the
//! mode; float32 `[rows, columns]`.

use super::{KernelOp, LowerCx, Operand, f32_result};
use crate::ir::Tensor;
use crate::ir::interp::EvalError;
use crate::loops::{Arg, Stmt};
use onnxc_runtime::kernels;
use onnxc_runtime::par::Par;
use onnxc_runtime::tfidf::TfIdfParams;
use std::sync::Arc;

/// Operand: int64 tokens `[rows, n]`; result `[rows, columns]` float32.
#[derive(Clone, Debug, PartialEq)]
pub struct TfIdf {
    /// `onnxc_runtime::tfidf::encode`'s blob.
    pub blob: Arc<Vec<i64>>,
    /// One weight per n-gram id (per `ngram_indexes` entry), read by the IDF and TFIDF
    /// modes.
    pub weights: Option<Arc<Vec<f32>>>,
    /// The tokens are string positions in a pool without the empty string: the null
    /// strings that pad a Tokenizer's rows past their run-time length are absent from it
    /// (−1), so they count in no n-gram.
    pub pad_neutral: bool,
}

impl KernelOp for TfIdf {
    fn name(&self) -> &'static str {
        "tfidf"
    }

    fn attrs(&self) -> String {
        match TfIdfParams::decode(&self.blob) {
            Ok(p) => format!(
                "mode={:?} n={}..={} skip={} edges={} columns={}",
                p.mode,
                p.min_n,
                p.max_n,
                p.max_skip,
                p.entries.len() / onnxc_runtime::tfidf::ENTRY,
                p.out
            ),
            Err(e) => format!("invalid: {e}"),
        }
    }

    fn eval(
        &self,
        x: &[&Tensor],
        result: Operand<'_>,
        limit: usize,
    ) -> Option<Result<Tensor, EvalError>> {
        let p = match TfIdfParams::decode(&self.blob) {
            Ok(p) => p,
            Err(e) => {
                return Some(Err(EvalError::KernelParams {
                    kernel: kernels::TFIDF_F32.symbol,
                    reason: e.0,
                }));
            }
        };
        if p.rows * p.n * (p.max_skip + 1) * p.max_n > limit {
            return None;
        }
        let mut y = vec![0f32; result.len() as usize];
        onnxc_runtime::tfidf::tfidf_f32(
            &p,
            self.weights.as_deref().map(|w| &w[..]),
            &x[0].to_i64s(),
            &mut y,
            Par::SEQ,
        );
        Some(Ok(f32_result(result, &y)))
    }

    /// Padding tokens past a row's run-time length count in no n-gram.
    fn reads_padded_rows(&self, operands: &[Option<usize>], ranks: &[usize]) -> bool {
        self.pad_neutral && operands.first() == Some(&Some(ranks[0].saturating_sub(1)))
    }

    fn per_item(
        &self,
        operands: &[Option<usize>],
        ranks: &[usize],
        results: &[Option<usize>],
    ) -> bool {
        ranks.first() == Some(&2) && super::per_row(operands, results)
    }

    fn lower(&self, cx: &dyn LowerCx) -> crate::Result<Vec<Stmt>> {
        Ok(vec![Stmt::call(
            &kernels::TFIDF_F32,
            vec![
                Arg::Params(self.blob.to_vec()),
                self.weights
                    .as_ref()
                    .map_or(Arg::Null, |w| Arg::Floats(w.to_vec())),
                cx.operand_arg(0),
                cx.result_arg(),
                Arg::Threads,
            ],
        )?])
    }
}
