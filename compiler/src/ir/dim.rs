//! Tensor dimensions: known integers or symbolic expressions over named symbols.
//!
//! Symbols come from the model (`dim_param` such as `batch`) or are invented for
//! dimensions the model leaves unnamed. Arithmetic folds constants eagerly, so a
//! shape whose symbols are all bound by `--shape` ends up fully `Known`.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Dim {
    Known(i64),
    Sym(Arc<SymExpr>),
}

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
        Dim::Sym(Arc::new(SymExpr::Var(name.into())))
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
        Dim::Sym(Arc::new(mk(self, other)))
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
            |a, b| (b > 0).then(|| (a + b - 1).div_euclid(b)),
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
            Dim::Sym(e) => match &**e {
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
            match &**e {
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
            Dim::Sym(e) => match &**e {
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

/// Largest tensor onnxc compiles, in bytes: 2^48 (256 TiB), beyond any process's address
/// space on the 64-bit targets; it keeps every element count and byte offset far from i64
/// overflow.
pub const MAX_TENSOR_BYTES: u64 = 1 << 48;

/// Checks that a tensor of `dims` with `elem_bytes`-byte elements is at most
/// `MAX_TENSOR_BYTES` (no overflow on the way); the error says how large it would be.
pub fn check_size(dims: &[i64], elem_bytes: usize) -> Result<(), String> {
    let elems = dims
        .iter()
        .try_fold(1u128, |n, &d| n.checked_mul(u128::try_from(d).ok()?));
    match elems {
        Some(n) if n * (elem_bytes.max(1) as u128) <= MAX_TENSOR_BYTES as u128 => Ok(()),
        _ => Err(format!(
            "a tensor of shape {dims:?} would take {} bytes, more than the {} a process can \
             address (2^48); check the shapes (and shape inputs) that lead to it",
            match elems {
                Some(n) => (n * elem_bytes.max(1) as u128).to_string(),
                None => "more than 2^128".to_string(),
            },
            MAX_TENSOR_BYTES
        )),
    }
}

pub fn num_elements(shape: &[Dim]) -> Dim {
    shape.iter().cloned().fold(Dim::Known(1), |a, b| a.mul(b))
}

pub fn fmt_shape(shape: &[Dim]) -> String {
    let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}
