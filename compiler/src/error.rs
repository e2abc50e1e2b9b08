//! Errors. Model errors name the node, op type and opset and say what to do; compiler bugs
//! are `Internal` and say so.

use std::fmt;

/// One ONNX node the compiler cannot handle.
#[derive(Debug, Clone, PartialEq)]
pub struct Unsupported {
    pub node: String,
    pub op_type: String,
    pub domain: String,
    pub opset: i64,
    pub reason: String,
}

#[derive(Debug)]
pub enum Error {
    /// Reading or writing a file failed.
    Io {
        path: String,
        source: std::io::Error,
    },
    /// The bytes are not a valid ONNX model.
    Parse(String),
    /// Every node the compiler cannot handle, collected before failing.
    Unsupported(Vec<Unsupported>),
    /// The model is malformed or inconsistent (bad attribute, shape mismatch, …).
    Model(String),
    /// A symbolic dim has no value and the compiled code needs one.
    NeedShape(String),
    /// Invalid command-line usage or input data.
    Usage(String),
    /// Linking or running a compiled model failed.
    Tool(String),
    /// A bug in onnxc: an invariant broke after the model was validated.
    Internal(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "{path}: {source}"),
            Error::Parse(m) => write!(f, "not a valid ONNX model: {m}"),
            Error::Unsupported(list) => {
                let mut ops: Vec<String> = list
                    .iter()
                    .map(|u| {
                        let dom = if u.domain.is_empty() {
                            String::new()
                        } else {
                            format!("{}::", u.domain)
                        };
                        match u.opset {
                            0 => format!("{dom}{}", u.op_type),
                            v => format!("{dom}{}-{v}", u.op_type),
                        }
                    })
                    .collect();
                ops.sort();
                ops.dedup();
                writeln!(
                    f,
                    "the model uses {} node(s) onnxc cannot compile ({}):",
                    list.len(),
                    ops.join(", ")
                )?;
                for u in list {
                    let dom = if u.domain.is_empty() {
                        "ai.onnx".to_string()
                    } else {
                        u.domain.clone()
                    };
                    // Opset 0: a domain the model does not import (the reason says so).
                    let version = if u.opset > 0 {
                        format!(", opset {}", u.opset)
                    } else {
                        String::new()
                    };
                    writeln!(
                        f,
                        "  node '{}': {} (domain {dom}{version}): {}",
                        u.node, u.op_type, u.reason
                    )?;
                }
                write!(f, "see docs/supported-ops.md for what is supported")
            }
            Error::Model(m) => write!(f, "{m}"),
            Error::NeedShape(m) => write!(f, "{m}"),
            Error::Usage(m) => write!(f, "{m}"),
            Error::Tool(m) => write!(f, "{m}"),
            Error::Internal(m) => write!(
                f,
                "internal compiler error (a bug in onnxc, please report it): {m}"
            ),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.as_ref().display().to_string(),
            source,
        }
    }

    /// The error with `note` appended to its message (in parentheses), for the context the
    /// message's own text lacks; a list of unsupported nodes and an I/O error are unchanged.
    pub fn noted(self, note: &str) -> Error {
        let add = |m: String| format!("{m} ({note})");
        match self {
            Error::Parse(m) => Error::Parse(add(m)),
            Error::Model(m) => Error::Model(add(m)),
            Error::NeedShape(m) => Error::NeedShape(add(m)),
            Error::Usage(m) => Error::Usage(add(m)),
            Error::Tool(m) => Error::Tool(add(m)),
            Error::Internal(m) => Error::Internal(add(m)),
            e @ (Error::Io { .. } | Error::Unsupported(_)) => e,
        }
    }
}

/// `bail!`-style constructor for model errors.
#[macro_export]
macro_rules! model_err {
    ($($arg:tt)*) => { $crate::error::Error::Model(format!($($arg)*)) };
}

/// `s` as a JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A warning as one line of JSON (`--error-format json`).
pub fn warning_json(message: &str) -> String {
    format!(
        "{{\"level\": \"warning\", \"message\": {}}}",
        json_str(message)
    )
}

impl Error {
    /// The kind of error, as `--error-format json` names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Io { .. } => "io",
            Error::Parse(_) => "parse",
            Error::Unsupported(_) => "unsupported",
            Error::Model(_) => "model",
            Error::NeedShape(_) => "need_shape",
            Error::Usage(_) => "usage",
            Error::Tool(_) => "tool",
            Error::Internal(_) => "internal",
        }
    }

    /// The error as one line of JSON (`--error-format json`): `level`, `kind`, `message`
    /// (the text a person reads) and, for unsupported ops, every node with its op type,
    /// domain, opset and reason.
    pub fn to_json(&self) -> String {
        let nodes = match self {
            Error::Unsupported(list) => {
                let items: Vec<String> = list
                    .iter()
                    .map(|u| {
                        format!(
                            "{{\"node\": {}, \"op_type\": {}, \"domain\": {}, \"opset\": {}, \"reason\": {}}}",
                            json_str(&u.node),
                            json_str(&u.op_type),
                            json_str(&u.domain),
                            u.opset,
                            json_str(&u.reason)
                        )
                    })
                    .collect();
                format!(", \"nodes\": [{}]", items.join(", "))
            }
            _ => String::new(),
        };
        format!(
            "{{\"level\": \"error\", \"kind\": \"{}\", \"message\": {}{nodes}}}",
            self.kind(),
            json_str(&self.to_string())
        )
    }
}
