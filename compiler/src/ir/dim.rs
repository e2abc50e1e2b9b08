//! Tensor dimensions: known integers or symbolic expressions over named symbols.
//!
//! Symbols come from the model (`dim_param` such as `batch`) or are invented for
//! dimensions the model leaves unnamed. Arithmetic folds constants eagerly, so a
//! shape whose symbols are all bound by `--shape` ends up fully `Known`.
//!
//! Arithmetic never wraps: a constant result that would overflow `i64` stays an
//! expression over its constant operands, which [`check_shape`] reports. Every shape the
//! frontend declares or infers goes through [`check_shape`] (the limits below), so later
//! stages compute offsets, sizes and strides in `i64` without overflow.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Dim {
    Known(i64),
    Sym(Arc<SymNode>),
}

/// A symbolic dim's expression and its depth (operations on the longest path to a symbol),
/// which is capped: walkers over dims recurse, and a chain of 200,000 ops on a symbolic dim
/// overflowed the stack.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct SymNode {
    depth: u32,
    expr: SymExpr,
}

/// Deepest expression a dim keeps; a deeper one becomes a fresh symbol of its own (a dim
/// the compiled code would need bound: the import reports it as such).
const MAX_SYM_DEPTH: u32 = 64;

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum SymExpr {
    Var(String),
    Add(Dim, Dim),
    Sub(Dim, Dim),
    Mul(Dim, Dim),
    FloorDiv(Dim, Dim),
    CeilDiv(Dim, Dim),
    Max(Dim, Dim),
    Min(Dim, Dim),
}

impl From<i64> for Dim {
    fn from(v: i64) -> Dim {
        Dim::Known(v)
    }
}

impl Dim {
    pub fn sym(name: impl Into<String>) -> Dim {
        Dim::Sym(Arc::new(SymNode {
            depth: 1,
            expr: SymExpr::Var(name.into()),
        }))
    }

    fn depth(&self) -> u32 {
        match self {
            Dim::Known(_) => 0,
            Dim::Sym(s) => s.depth,
        }
    }

    pub fn known(&self) -> Option<i64> {
        match self {
            Dim::Known(v) => Some(*v),
            Dim::Sym(_) => None,
        }
    }

    pub fn is_known(&self) -> bool {
        matches!(self, Dim::Known(_))
    }

    pub fn is_one(&self) -> bool {
        matches!(self, Dim::Known(1))
    }

    fn bin(
        self,
        other: Dim,
        fold: impl Fn(i64, i64) -> Option<i64>,
        mk: impl Fn(Dim, Dim) -> SymExpr,
    ) -> Dim {
        if let (Dim::Known(a), Dim::Known(b)) = (&self, &other)
            && let Some(v) = fold(*a, *b)
        {
            return Dim::Known(v);
        }
        let depth = 1 + self.depth().max(other.depth());
        if depth > MAX_SYM_DEPTH {
            static DEEP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let k = DEEP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Dim::sym(format!("dim{k}_of_over_{MAX_SYM_DEPTH}_operations"));
        }
        Dim::Sym(Arc::new(SymNode {
            depth,
            expr: mk(self, other),
        }))
    }

    pub fn add(self, other: impl Into<Dim>) -> Dim {
        let other = other.into();
        if other == Dim::Known(0) {
            return self;
        }
        if self == Dim::Known(0) {
            return other;
        }
        self.bin(other, |a, b| a.checked_add(b), SymExpr::Add)
    }

    pub fn sub(self, other: impl Into<Dim>) -> Dim {
        let other = other.into();
        if other == Dim::Known(0) {
            return self;
        }
        if self == other {
            return Dim::Known(0);
        }
        self.bin(other, |a, b| a.checked_sub(b), SymExpr::Sub)
    }

    pub fn mul(self, other: impl Into<Dim>) -> Dim {
        let other = other.into();
        if other == Dim::Known(1) {
            return self;
        }
        if self == Dim::Known(1) {
            return other;
        }
        if self == Dim::Known(0) || other == Dim::Known(0) {
            return Dim::Known(0);
        }
        self.bin(other, |a, b| a.checked_mul(b), SymExpr::Mul)
    }

    pub fn floor_div(self, other: impl Into<Dim>) -> Dim {
        let other = other.into();
        if other == Dim::Known(1) {
            return self;
        }
        self.bin(
            other,
            |a, b| (b != 0).then(|| a.div_euclid(b)),
            SymExpr::FloorDiv,
        )
    }

    pub fn ceil_div(self, other: impl Into<Dim>) -> Dim {
        let other = other.into();
        if other == Dim::Known(1) {
            return self;
        }
        self.bin(
            other,
            |a, b| (b > 0).then(|| a.div_euclid(b) + i64::from(a.rem_euclid(b) != 0)),
            SymExpr::CeilDiv,
        )
    }

    pub fn max(self, other: impl Into<Dim>) -> Dim {
        let other = other.into();
        if self == other {
            return self;
        }
        self.bin(other, |a, b| Some(a.max(b)), SymExpr::Max)
    }

    pub fn min(self, other: impl Into<Dim>) -> Dim {
        let other = other.into();
        if self == other {
            return self;
        }
        self.bin(other, |a, b| Some(a.min(b)), SymExpr::Min)
    }

    /// Replaces symbols by the values in `binding`, folding what becomes constant.
    pub fn substitute(&self, binding: &HashMap<String, i64>) -> Dim {
        match self {
            Dim::Known(_) => self.clone(),
            Dim::Sym(e) => match &e.expr {
                SymExpr::Var(name) => binding
                    .get(name)
                    .map_or_else(|| self.clone(), |v| Dim::Known(*v)),
                SymExpr::Add(a, b) => a.substitute(binding).add(b.substitute(binding)),
                SymExpr::Sub(a, b) => a.substitute(binding).sub(b.substitute(binding)),
                SymExpr::Mul(a, b) => a.substitute(binding).mul(b.substitute(binding)),
                SymExpr::FloorDiv(a, b) => a.substitute(binding).floor_div(b.substitute(binding)),
                SymExpr::CeilDiv(a, b) => a.substitute(binding).ceil_div(b.substitute(binding)),
                SymExpr::Max(a, b) => a.substitute(binding).max(b.substitute(binding)),
                SymExpr::Min(a, b) => a.substitute(binding).min(b.substitute(binding)),
            },
        }
    }

    /// Names of the symbols this dim depends on.
    pub fn symbols(&self, out: &mut Vec<String>) {
        if let Dim::Sym(e) = self {
            match &e.expr {
                SymExpr::Var(name) => {
                    if !out.contains(name) {
                        out.push(name.clone())
                    }
                }
                SymExpr::Add(a, b)
                | SymExpr::Sub(a, b)
                | SymExpr::Mul(a, b)
                | SymExpr::FloorDiv(a, b)
                | SymExpr::CeilDiv(a, b)
                | SymExpr::Max(a, b)
                | SymExpr::Min(a, b) => {
                    a.symbols(out);
                    b.symbols(out);
                }
            }
        }
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Known(v) => write!(f, "{v}"),
            Dim::Sym(e) => match &e.expr {
                SymExpr::Var(n) => write!(f, "{n}"),
                SymExpr::Add(a, b) => write!(f, "({a} + {b})"),
                SymExpr::Sub(a, b) => write!(f, "({a} - {b})"),
                SymExpr::Mul(a, b) => write!(f, "({a} * {b})"),
                SymExpr::FloorDiv(a, b) => write!(f, "({a} / {b})"),
                SymExpr::CeilDiv(a, b) => write!(f, "ceil({a} / {b})"),
                SymExpr::Max(a, b) => write!(f, "max({a}, {b})"),
                SymExpr::Min(a, b) => write!(f, "min({a}, {b})"),
            },
        }
    }
}

/// A tensor shape. Rank is always known.
pub type Shape = Vec<Dim>;

pub fn shape_from(dims: &[i64]) -> Shape {
    dims.iter().map(|&d| Dim::Known(d)).collect()
}

/// The shape as integers, if every dim is known.
pub fn known_dims(shape: &[Dim]) -> Option<Vec<i64>> {
    shape.iter().map(Dim::known).collect()
}

/// Longest axis a tensor may have: the runtime kernels' largest extent
/// (`onnxc_runtime::params::MAX_EXTENT`, 2^31 - 1). Window arithmetic over such values (a
/// sum of a few, a product of two) stays far inside `i64`.
pub const MAX_DIM: i64 = onnxc_runtime::params::MAX_EXTENT;

/// Most elements a tensor may have: the runtime kernels' largest count
/// (`onnxc_runtime::params::MAX_WORDS`, 2^32; 16 GiB of float32), so every count a kernel's
/// parameters hold is in range.
pub const MAX_ELEMENTS: i64 = onnxc_runtime::params::MAX_WORDS;

/// Checks a tensor's known dims against the limits: no dim negative or above [`MAX_DIM`],
/// at most [`MAX_ELEMENTS`] elements (no overflow on the way). The error names the
/// offending value and the limit.
pub fn check_size(dims: &[i64]) -> Result<(), String> {
    for (k, &d) in dims.iter().enumerate() {
        check_dim(k, d, || format!("{dims:?}"))?;
    }
    if dims.contains(&0) {
        return Ok(());
    }
    // Every factor is at most 2^31, so the running product stays far from u128 overflow
    // until it passes the limit, where the loop stops.
    let mut n: u128 = 1;
    for &d in dims {
        n *= d as u128;
        if n > MAX_ELEMENTS as u128 {
            let total = dims
                .iter()
                .try_fold(1u128, |a, &d| a.checked_mul(d as u128))
                .map_or("more than 2^128".to_string(), |t| t.to_string());
            return Err(format!(
                "a tensor of shape {dims:?} would have {total} elements, more than the \
                 {MAX_ELEMENTS} (2^32) onnxc compiles in one tensor; check the shapes (and \
                 shape inputs) that lead to it"
            ));
        }
    }
    Ok(())
}

/// Dim `k` of a shape (`shape` prints it) within `0..=MAX_DIM`.
fn check_dim(k: usize, d: i64, shape: impl Fn() -> String) -> Result<(), String> {
    if d < 0 {
        return Err(format!("shape {}: dim {k} is negative ({d})", shape()));
    }
    if d > MAX_DIM {
        return Err(format!(
            "shape {}: dim {k} is {d}, longer than the {MAX_DIM} (2^31 - 1) onnxc takes per \
             axis; check the shapes (and shape inputs) that lead to it",
            shape()
        ));
    }
    Ok(())
}

/// [`check_size`] for a shape with symbolic dims: known dims are checked as there (the
/// element count once every dim is known); a dim whose expression has no symbol is
/// arithmetic that overflowed `i64`.
pub fn check_shape(shape: &[Dim]) -> Result<(), String> {
    if let Some(dims) = known_dims(shape) {
        return check_size(&dims);
    }
    for (k, d) in shape.iter().enumerate() {
        match d {
            Dim::Known(v) => check_dim(k, *v, || fmt_shape(shape))?,
            Dim::Sym(_) => {
                let mut syms = Vec::new();
                d.symbols(&mut syms);
                if syms.is_empty() {
                    return Err(format!(
                        "shape {}: dim {k} overflows 64-bit integers ({d}); check the shapes \
                         (and shape inputs and attributes) that lead to it",
                        fmt_shape(shape)
                    ));
                }
            }
        }
    }
    Ok(())
}

pub fn num_elements(shape: &[Dim]) -> Dim {
    shape.iter().cloned().fold(Dim::Known(1), |a, b| a.mul(b))
}

pub fn fmt_shape(shape: &[Dim]) -> String {
    let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits() {
        assert!(check_size(&[MAX_DIM, 2]).is_ok());
        assert!(check_size(&[1 << 16, 1 << 16]).is_ok());
        // An empty tensor holds nothing, whatever its other dims.
        assert!(check_size(&[MAX_DIM, MAX_DIM, 0]).is_ok());
        let e = check_size(&[MAX_DIM + 1]).unwrap_err();
        assert!(e.contains("dim 0 is 2147483648"), "{e}");
        let e = check_size(&[1 << 20, 1 << 20, 4]).unwrap_err();
        assert!(e.contains("4398046511104 elements"), "{e}");
        assert!(check_size(&[3, -1]).unwrap_err().contains("negative"));
        // Symbolic dims pass; known ones are checked; overflowed arithmetic is reported.
        assert!(check_shape(&[Dim::sym("n"), Dim::Known(3)]).is_ok());
        assert!(check_shape(&[Dim::sym("n"), Dim::Known(-3)]).is_err());
        let wrapped = Dim::Known(i64::MAX).add(1);
        assert!(!wrapped.is_known());
        let e = check_shape(&[wrapped]).unwrap_err();
        assert!(e.contains("overflows 64-bit integers"), "{e}");
        assert_eq!(Dim::Known(i64::MAX).ceil_div(2), Dim::Known(1 << 62));
        assert_eq!(Dim::Known(7).ceil_div(2), Dim::Known(4));
        assert_eq!(Dim::Known(-7).ceil_div(2), Dim::Known(-3));
    }

    #[test]
    fn expressions_stay_shallow() {
        let n = Dim::sym("n");
        let mut d = n.clone();
        for _ in 0..100_000 {
            d = d.add(n.clone());
        }
        assert!(d.depth() <= MAX_SYM_DEPTH);
        let mut syms = Vec::new();
        d.symbols(&mut syms);
        assert!(!syms.is_empty() && !d.to_string().is_empty());
        // Shallow expressions keep their form.
        assert_eq!(n.clone().add(n.clone()).add(2).to_string(), "((n + n) + 2)");
    }
}
