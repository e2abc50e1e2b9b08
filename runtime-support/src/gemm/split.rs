//! How a product's C is split over the workers (`Split`): block shapes chosen by a cost model.

use super::*;

/// How a GEMM's C is split over workers: `rows` × `cols` blocks, task `t` taking row block
/// `t / cols` and column block `t % cols`. Blocks are whole units — `MC_A` rows (so row
/// blocks start where a sequential run's do) and 32 columns (whole tiles of every kernel) —
/// dealt out evenly: block `i` of `b` over `u` units takes units `i·u/b .. (i+1)·u/b` (a
/// uniform block size left the last block a sliver: ResNet-50's 14×14 pointwise layers
/// split 196 columns as 64, 64, 64, 4). Columns first, as every block of rows reads all of
/// B; another shape where its modelled time (`Split::cost`: each block's multiply-adds and
/// reads of A and B, the tasks claimed in order by the first free worker) is at least an
/// eighth shorter. So a tall product with few columns splits rows: SqueezeNet's 512→1000
/// classifier at 13×13 (169 columns) made 4 blocks of 32, 64, 32 and 41 columns, each
/// streaming all 2 MB of A, 62% of the work on one of 2 workers; rows give 4 equal blocks
/// of a quarter of A.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    pub rows: usize,
    pub cols: usize,
    /// Row and column units of the whole C.
    row_units: usize,
    col_units: usize,
    row_unit: usize,
    col_unit: usize,
}

/// Multiply-adds below which a GEMM (or a convolution's) task is not worth a thread.
pub const MIN_TASK_MACS: usize = 1 << 17;

impl Split {
    /// One block: the whole C.
    pub fn whole(m: usize, n: usize) -> Split {
        Split {
            rows: 1,
            cols: 1,
            row_units: 1,
            col_units: 1,
            row_unit: m.max(1),
            col_unit: n.max(1),
        }
    }

    /// The split of an m × n × k product over `par`'s workers, about two tasks per worker
    /// when the work allows, shaped for the least `cost`. `packs_b`: every task packs the
    /// columns of B it reads (B neither pre-packed nor read in place).
    pub fn of(par: &Par, m: usize, n: usize, k: usize, packs_b: bool) -> Split {
        let (row_unit, col_unit) = (MC_A, 2 * NR);
        let (tr, tc) = (m.div_ceil(row_unit), n.div_ceil(col_unit));
        let macs = m.saturating_mul(n).saturating_mul(k.max(1));
        let t = par.tasks(macs, MIN_TASK_MACS, 2, tr.saturating_mul(tc));
        if t <= 1 {
            return Split::whole(m, n);
        }
        let w = par.workers();
        let split = |cols: usize| Split {
            rows: tr.min(t.div_ceil(cols)),
            cols,
            row_units: tr,
            col_units: tc,
            row_unit,
            col_unit,
        };
        // Columns first (every block of rows reads all of B); another shape only where it
        // is clearly cheaper, since the cost is a model.
        let first = split(tc.min(t));
        let mut best = (first.cost(m, n, k, w, packs_b), first);
        let bar = best.0 - best.0 / 8;
        // Fewer columns by halves (a few shapes: this runs on every call).
        let mut cols = tc.min(t);
        while cols > 1 {
            cols /= 2;
            let s = split(cols);
            let c = s.cost(m, n, k, w, packs_b);
            if c < bar && c < best.0 {
                best = (c, s);
            }
        }
        best.1
    }

    /// The time the split takes, in multiply-adds: its blocks' multiply-adds and reads
    /// (`READ_COST` each float of A and of B, twice that for B a task packs), the tasks
    /// claimed in order by whichever of the `w` workers is free first (a list schedule: the
    /// runtime's pool runs each worker's block of consecutive tasks first and then hands out
    /// what is left, which takes as long when the tasks cost alike, as a split's do); for
    /// many workers, the bound max(largest block, total / workers).
    fn cost(&self, m: usize, n: usize, k: usize, w: usize, packs_b: bool) -> usize {
        /// Multiply-adds a core does in the time it reads one float from L2 or L3 (Zen 4:
        /// 32 a cycle against 32 bytes a cycle from L2).
        const READ_COST: usize = 4;
        /// Workers simulated (their tasks at most twice as many).
        const SIMULATED: usize = 8;
        let b_cost = if packs_b { 2 * READ_COST } else { READ_COST };
        let block = |rows: usize, cols: usize| {
            (rows.saturating_mul(cols))
                .saturating_add(rows.saturating_mul(READ_COST))
                .saturating_add(cols.saturating_mul(b_cost))
                .saturating_mul(k)
        };
        let w = w.max(1);
        if w <= SIMULATED && self.tasks() <= 2 * SIMULATED {
            let mut free = [0usize; SIMULATED];
            for t in 0..self.tasks() {
                let (r, c) = self.block(t, m, n);
                let i = (0..w).min_by_key(|&i| free[i]).unwrap_or(0);
                free[i] = free[i].saturating_add(block(r.len(), c.len()));
            }
            return free[..w].iter().copied().max().unwrap_or(0);
        }
        // Every column block covers all m rows and every row block all n columns.
        let largest = block(
            (self.row_units.div_ceil(self.rows) * self.row_unit).min(m),
            (self.col_units.div_ceil(self.cols) * self.col_unit).min(n),
        );
        let total = (m.saturating_mul(n))
            .saturating_add(m.saturating_mul(self.cols).saturating_mul(READ_COST))
            .saturating_add(n.saturating_mul(self.rows).saturating_mul(b_cost))
            .saturating_mul(k);
        largest.max(total / w)
    }

    pub fn tasks(&self) -> usize {
        self.rows * self.cols
    }

    /// Task `t`'s rows and columns of an m × n C.
    pub fn block(&self, t: usize, m: usize, n: usize) -> (Range<usize>, Range<usize>) {
        let (r, c) = (t / self.cols, t % self.cols);
        let part = |i: usize, blocks: usize, units: usize, unit: usize, len: usize| {
            ((i * units / blocks * unit).min(len))..(((i + 1) * units / blocks * unit).min(len))
        };
        (
            part(r, self.rows, self.row_units, self.row_unit, m),
            part(c, self.cols, self.col_units, self.col_unit, n),
        )
    }
}
