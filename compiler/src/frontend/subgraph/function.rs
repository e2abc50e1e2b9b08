//! Model-local functions (`ModelProto.functions`, IR version 8 on; skl2onnx writes them for
//! KNNImputer, onnxscript-based exporters for modules): a node whose (domain, op type,
//! overload) names one is the function's body imported in its place, as an inlined branch
//! (`inline_body`), with the node's attributes (or the function's defaults) put where the
//! body refers to them (`ref_attr_name`) and the function's opset imports in force. A model
//! function takes precedence over an op of the same name.

use super::super::Importer;
use super::Val;
use crate::error::{Error, Result};
use crate::ir::Origin;
use onnxc_proto::{AttributeProto, FunctionProto, GraphProto, NodeProto, ValueInfoProto};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

/// Deepest nesting of function calls: a function that calls itself, directly or not, never
/// ends.
const MAX_CALL_DEPTH: usize = 64;

/// Most body nodes all calls of model functions import (functions that each call the next
/// twice would import 2^depth copies).
const MAX_FUNCTION_NODES: usize = 1 << 20;

/// A model's functions by (domain, name, overload), the default domain spelled "".
pub(in crate::frontend) type Functions = HashMap<(String, String, String), Rc<FunctionProto>>;

pub(in crate::frontend) fn functions(m: &onnxc_proto::ModelProto) -> Functions {
    m.functions
        .iter()
        .map(|f| {
            let domain = f.domain.clone().unwrap_or_default();
            let domain = if domain == "ai.onnx" {
                String::new()
            } else {
                domain
            };
            let key = (
                domain,
                f.name.clone().unwrap_or_default(),
                f.overload.clone().unwrap_or_default(),
            );
            (key, Rc::new(f.clone()))
        })
        .collect()
}

impl Importer<'_> {
    /// The model function node `n` calls (its domain normalized as `domain`), if any.
    pub(in crate::frontend) fn function_of(
        &self,
        n: &NodeProto,
        domain: &str,
    ) -> Option<Rc<FunctionProto>> {
        let key = (
            domain.to_string(),
            n.op_type.clone().unwrap_or_default(),
            n.overload.clone().unwrap_or_default(),
        );
        self.functions.get(&key).cloned()
    }

    /// Imports the body of model function `f` for node `n`.
    pub(in crate::frontend) fn call_function(
        &mut self,
        n: &NodeProto,
        origin: &Origin,
        f: &FunctionProto,
    ) -> Result<()> {
        if self.call_depth >= MAX_CALL_DEPTH {
            return Err(Error::Model(format!(
                "{origin}: model functions call each other more than {MAX_CALL_DEPTH} deep (a \
                 function that calls itself never ends)"
            )));
        }
        self.function_nodes = self.function_nodes.saturating_add(f.node.len());
        if self.function_nodes > MAX_FUNCTION_NODES {
            return Err(Error::Model(format!(
                "{origin}: the model's function calls import more than {MAX_FUNCTION_NODES} \
                 nodes"
            )));
        }
        if n.input.len() > f.input.len() || n.output.len() > f.output.len() {
            return Err(Error::Model(format!(
                "{origin} gives {} inputs and takes {} outputs; the model function it calls \
                 declares {} and {}",
                n.input.len(),
                n.output.len(),
                f.input.len(),
                f.output.len()
            )));
        }
        // Attribute values: the node's, else the function's defaults.
        let mut values: HashMap<&str, &AttributeProto> = f
            .attribute_proto
            .iter()
            .map(|a| (a.name.as_deref().unwrap_or_default(), a))
            .collect();
        for a in &n.attribute {
            values.insert(a.name.as_deref().unwrap_or_default(), a);
        }
        // Inputs the node leaves out are absent in the body (an optional input's "").
        let mut args = Vec::new();
        let mut inputs = Vec::new();
        let mut absent = HashSet::new();
        for (k, name) in f.input.iter().enumerate() {
            // A sequence operand is passed as the sequence.
            let arg = match n.input.get(k).and_then(|i| self.seqs.get(i)) {
                Some(s) => Some(Val::Seq(s.clone())),
                // An empty optional operand: the input is absent in the body.
                None => self.operand(n, origin, k)?.map(Val::Tensor),
            };
            match arg {
                Some(v) => {
                    args.push(v);
                    inputs.push(ValueInfoProto {
                        name: Some(name.clone()),
                        ..Default::default()
                    });
                }
                None => {
                    absent.insert(name.as_str());
                }
            }
        }
        let body = GraphProto {
            name: f.name.clone(),
            input: inputs,
            output: f.output[..n.output.len()]
                .iter()
                .map(|o| ValueInfoProto {
                    name: Some(o.clone()),
                    ..Default::default()
                })
                .collect(),
            node: f
                .node
                .iter()
                .map(|b| resolve(b, &values, &absent))
                .collect(),
            ..Default::default()
        };
        // The function's opset imports, over the model's.
        let mut opsets = self.opsets.clone();
        for o in &f.opset_import {
            let d = o.domain.clone().unwrap_or_default();
            let d = if d == "ai.onnx" { String::new() } else { d };
            opsets.insert(d, o.version.unwrap_or(1));
        }
        let outer = std::mem::replace(&mut self.opsets, opsets);
        self.call_depth += 1;
        let outs = self.inline_body_values(&body, &args, origin, "model function");
        self.call_depth -= 1;
        self.opsets = outer;
        self.bind_values(n, origin, outs?)
    }
}

/// `node` of a function body with its attribute references resolved from `values` (one
/// with no value is left out, as the attribute is then absent) and its reads of `absent`
/// inputs made absent; graphs in its attributes likewise.
fn resolve(
    node: &NodeProto,
    values: &HashMap<&str, &AttributeProto>,
    absent: &HashSet<&str>,
) -> NodeProto {
    let mut out = node.clone();
    for i in &mut out.input {
        if absent.contains(i.as_str()) {
            i.clear();
        }
    }
    out.attribute = node
        .attribute
        .iter()
        .filter_map(|a| {
            let mut a = match a.ref_attr_name.as_deref() {
                Some(r) if !r.is_empty() => {
                    let mut v = (*values.get(r)?).clone();
                    v.name = a.name.clone();
                    v.ref_attr_name = None;
                    v
                }
                _ => a.clone(),
            };
            if let Some(g) = a.g.as_mut() {
                g.node = g.node.iter().map(|b| resolve(b, values, absent)).collect();
            }
            for g in &mut a.graphs {
                g.node = g.node.iter().map(|b| resolve(b, values, absent)).collect();
            }
            Some(a)
        })
        .collect();
    out
}
