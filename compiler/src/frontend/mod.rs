//! ONNX → graph IR. The only module that sees prost types.
//!
//! `load` decodes bytes into a `ModelProto`; `import` walks the nodes in order, resolving each
//! op type through the registry to a builder that emits core ops. Unsupported nodes do not
//! stop the walk: every one is collected and reported together.

pub mod build;
pub mod ctx;
mod declared;
pub mod inspect;
mod io_types;
pub mod ops;
pub mod registry;
mod sequence;
mod subgraph;
pub mod tensor;

use crate::error::{Error, Result, Unsupported};
use crate::ir::dim::Dim;
use crate::ir::graph::{IoGroup, IoKind};
use crate::ir::{DType, Graph, Op, Origin, TypeInfo, ValueId};
use ctx::Ctx;
use onnxc_proto::{GraphProto, ModelProto, NodeProto};
use prost::Message;
use std::collections::HashMap;
use tensor::{DataDir, tensor_from_proto};

use declared::declare_backwards;
pub(crate) use io_types::is_named_dim;
pub use io_types::{Unbound, check_negative_dims, rename_dim, unbound_dims};
use io_types::{map_type, packed_dims, tensor_type};

/// Options of the import stage.
#[derive(Clone, Debug)]
pub struct ImportOptions {
    /// `--shape NAME=D0,D1,…`: concrete shapes for graph inputs.
    pub input_shapes: Vec<(String, Vec<i64>)>,
    /// `--dim SYMBOL=N`: values for named symbolic dims, in every input that uses them.
    pub dim_values: Vec<(String, i64)>,
    /// `--sequence NAME=[D0,…][…]…`: the element shapes of a sequence graph input (its
    /// length is their count).
    pub sequences: Vec<(String, Vec<Vec<i64>>)>,
    /// `--absent NAME`: optional graph inputs passed empty.
    pub absent: Vec<String>,
    /// Constant-fold nodes whose output has at most this many elements.
    pub fold_limit: usize,
    /// `--string-bytes N`: bytes of string space per string that an op makes at run time
    /// (StringNormalizer, StringConcat, StringSplit; `onnxc_runtime::string_make`).
    pub string_bytes: u64,
    /// Keep maps that make more elements than their operands hold (a Range, an Expand of a
    /// constant: a detector's anchor grid) computed at run time, not folded
    /// (`Graph::keep_expanding`): a run-time dim's retry when their folded tables' lengths
    /// followed it.
    pub keep_expanding: bool,
    /// Besides `keep_expanding`, keep selections from larger float tables by other operands
    /// computed at run time (`Graph::keep_selections`): a run-time dim's last retry when a
    /// table's rows Gathered at the dims (a decoder's position rows at its cache length)
    /// were folded into constants that follow it.
    pub keep_selections: bool,
    /// Keep float constants read as scalars (a quantization's scales) loaded where the code
    /// runs, not folded with the constants beside them (`loops::lower::LowerOptions::
    /// keep_scales`): a run-time dim's retry when a scale folded with a count of the dims
    /// (QLinearGlobalAveragePool's `x_scale / (y_scale · N)`) differed with it, so that the
    /// count stays a literal of its own, which follows the dims as a formula.
    pub keep_scales: bool,
    /// Products of two quantized operands computed at run time (attention's scores and its
    /// weighted sum) take the split float32 plan wherever it is exact, never the direct one,
    /// whose exactness depends on their depth (`ops::qlinear::f32_plan_of_values`): a
    /// run-time dim's retry when that depth followed the dim across the direct plan's limit
    /// (QLinearMatMul over 512 keys), so that every value takes the same steps.
    pub split_products: bool,
    /// Tables chosen without sizes (`schedule::lut::tabulate`) take rows over one dim at
    /// most (a channel): a run-time dim's retry when a table folded from a constant that
    /// follows the dims (a quantized Add of token rows and position rows `[seq, 16]`, whose
    /// table has a row per position and channel) was taken at some values and not at
    /// others, its entries limited.
    pub narrow_tables: bool,
}

/// The string space of an op that makes strings, per string, unless `--string-bytes` says.
pub const DEFAULT_STRING_BYTES: u64 = 256;

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            input_shapes: Vec::new(),
            dim_values: Vec::new(),
            sequences: Vec::new(),
            absent: Vec::new(),
            fold_limit: 1 << 22,
            string_bytes: DEFAULT_STRING_BYTES,
            keep_expanding: false,
            keep_selections: false,
            keep_scales: false,
            split_products: false,
            narrow_tables: false,
        }
    }
}

/// A decoded model, as `load` returns it (other stages pass it on without looking inside).
pub type Model = ModelProto;

/// Decodes an ONNX model; `path` (if any) locates external data files.
pub fn load(bytes: &[u8]) -> Result<ModelProto> {
    let m = ModelProto::decode(bytes)
        .map_err(|e| Error::Parse(format!("protobuf decoding failed: {e}")))?;
    if m.graph.is_none() {
        return Err(Error::Parse(
            "the file decodes as protobuf but has no graph (is it an ONNX model?)".into(),
        ));
    }
    if m.ir_version.is_none() && m.opset_import.is_empty() {
        return Err(Error::Parse(
            "no ir_version and no opset_import: this is not an ONNX model".into(),
        ));
    }
    // The IR spec: a model MUST import at least one opset (IR versions 1 and 2 predate
    // opset_import and mean opset 1).
    if let Some(v) = m.ir_version
        && v >= 3
        && m.opset_import.is_empty()
    {
        return Err(Error::Model(format!(
            "the model has IR version {v} but no opset_import; the ONNX IR requires one (add \
             the default domain's opset, e.g. onnx.helper.make_opsetid(\"\", 17), to \
             model.opset_import)"
        )));
    }
    Ok(m)
}

/// The opset versions a model imports, by domain ("" for the default ONNX domain).
pub fn opsets(m: &ModelProto) -> HashMap<String, i64> {
    let mut map = HashMap::new();
    for o in &m.opset_import {
        let d = o.domain.clone().unwrap_or_default();
        let d = if d == "ai.onnx" { String::new() } else { d };
        map.insert(d, o.version.unwrap_or(1));
    }
    if !map.contains_key("") && m.opset_import.is_empty() {
        // IR version 1/2 models predate opset_import; they mean opset 1.
        map.insert(String::new(), 1);
    }
    map
}

/// The version onnxc takes for a known domain a node uses but the model does not import:
/// onnxruntime's (its contrib ops are all version 1; `ai.onnx.ml` and the preview domains
/// their newest, onnx 1.23's). Such a model is invalid ONNX (onnx's checker rejects it),
/// but tools that insert contrib ops write it and onnxruntime runs it.
fn implied_opset(domain: &str) -> Option<i64> {
    match domain {
        "com.microsoft" | "ai.onnx.preview" | "ai.onnx.preview.training" => Some(1),
        "ai.onnx.ml" => Some(5),
        _ => None,
    }
}

/// Add to `opsets` the implied version of every known domain the graph's nodes (subgraphs
/// included) use without an import; returns a warning for each.
fn imply_opsets(gp: &GraphProto, opsets: &mut HashMap<String, i64>) -> Vec<String> {
    fn walk(gp: &GraphProto, used: &mut Vec<(String, String)>) {
        for n in &gp.node {
            let d = n.domain.clone().unwrap_or_default();
            if !d.is_empty() && d != "ai.onnx" && !used.iter().any(|(u, _)| *u == d) {
                used.push((d, n.op_type.clone().unwrap_or_default()));
            }
            for a in &n.attribute {
                a.g.iter().chain(&a.graphs).for_each(|sub| walk(sub, used));
            }
        }
    }
    let mut used = Vec::new();
    walk(gp, &mut used);
    let mut warnings = Vec::new();
    for (domain, op) in used {
        if opsets.contains_key(&domain) {
            continue;
        }
        if let Some(v) = implied_opset(&domain) {
            opsets.insert(domain.clone(), v);
            warnings.push(format!(
                "the model uses domain '{domain}' (e.g. {op}) without importing it (invalid \
                 ONNX: add it to the model's opset_import); taking version {v}, as onnxruntime \
                 does"
            ));
        }
    }
    warnings
}

/// Newest default-domain opset onnxc knows (that of onnx 1.23, whose operator schemas it
/// follows); a model importing a newer one may use semantics it does not have.
pub const MAX_DEFAULT_OPSET: i64 = 28;

/// The default domain's opset must be a version that exists: 1 up to `MAX_DEFAULT_OPSET`.
fn check_opsets(m: &ModelProto) -> Result<()> {
    match opsets(m).get("") {
        Some(&v) if !(1..=MAX_DEFAULT_OPSET).contains(&v) => Err(Error::Model(format!(
            "the model imports opset {v} of the default ONNX domain; onnxc supports opsets 1 to \
             {MAX_DEFAULT_OPSET} (onnx 1.23): convert the model (onnx.version_converter) or fix \
             its opset_import"
        ))),
        _ => Ok(()),
    }
}

pub fn import(m: &ModelProto, dir: &DataDir, opts: &ImportOptions) -> Result<Graph> {
    check_opsets(m)?;
    let gp = m
        .graph
        .as_ref()
        .ok_or_else(|| Error::Parse("model has no graph".into()))?;
    let mut imp = importer(m, gp, dir, opts);
    imp.graph(gp)?;
    Ok(imp.g)
}

/// `import` for a model the caller gives up: initializer bytes move into the graph instead
/// of being copied (a large model's weights are then in memory once, not twice).
pub fn import_owned(mut m: ModelProto, dir: &DataDir, opts: &ImportOptions) -> Result<Graph> {
    check_opsets(&m)?;
    let mut taken: HashMap<usize, Vec<u8>> = HashMap::new();
    if let Some(gp) = m.graph.as_mut() {
        for (i, init) in gp.initializer.iter_mut().enumerate() {
            if init.data_location != Some(1)
                && let Some(raw) = init.raw_data.as_mut()
            {
                taken.insert(i, std::mem::take(raw));
            }
        }
    }
    let gp = m
        .graph
        .as_ref()
        .ok_or_else(|| Error::Parse("model has no graph".into()))?;
    let mut imp = importer(&m, gp, dir, opts);
    imp.taken = taken;
    imp.graph(gp)?;
    Ok(imp.g)
}

fn importer<'a>(
    m: &ModelProto,
    gp: &GraphProto,
    dir: &'a DataDir,
    opts: &'a ImportOptions,
) -> Importer<'a> {
    let mut opsets = opsets(m);
    let name = gp.name.clone().unwrap_or_else(|| "model".into());
    let mut g = Graph::new(name);
    g.warnings.extend(imply_opsets(gp, &mut opsets));
    g.keep_expanding = opts.keep_expanding;
    g.keep_selections = opts.keep_selections;
    g.split_products = opts.split_products;
    g.narrow_tables = opts.narrow_tables;
    Importer {
        g,
        env: HashMap::new(),
        opsets,
        dir,
        opts,
        unsupported: Vec::new(),
        unbuilt: HashMap::new(),
        declared: HashMap::new(),
        guessed: HashMap::new(),
        taken: HashMap::new(),
        unrolled: 0,
        seqs: HashMap::new(),
        absent: std::collections::HashSet::new(),
        poisoned: std::collections::HashSet::new(),
        local: std::collections::HashSet::new(),
        shadowed: Vec::new(),
        position: 0,
        qdq: Default::default(),
        data_dependent: std::collections::HashSet::new(),
        functions: subgraph::function::functions(m),
        call_depth: 0,
        function_nodes: 0,
    }
}

struct Importer<'a> {
    g: Graph,
    env: HashMap<String, ValueId>,
    opsets: HashMap<String, i64>,
    dir: &'a DataDir,
    opts: &'a ImportOptions,
    unsupported: Vec<Unsupported>,
    /// Optional node outputs the builder did not produce; an error only if something reads them.
    unbuilt: HashMap<String, Unsupported>,
    /// Static types the model declares for values (graph outputs, value_info), and those
    /// that follow from them through shape-preserving ops (`declare_backwards`).
    declared: HashMap<String, (DType, Vec<i64>)>,
    /// Shapes guessed for values from a broadcasting op's declared result
    /// (`declare_backwards`), for builders that would refuse the node without one.
    guessed: HashMap<String, Vec<i64>>,
    /// Raw bytes moved out of the top-level initializers (by index), for `import_owned`.
    taken: HashMap<usize, Vec<u8>>,
    /// Nodes imported by unrolling Loop and Scan bodies so far (`subgraph::MAX_UNROLLED_NODES`
    /// bounds the total, nested loops included).
    unrolled: usize,
    /// Sequence values in scope (`sequence.rs`): lists of tensor values known at compile time.
    seqs: HashMap<String, sequence::Seq>,
    /// Optional graph inputs passed empty (`--absent`): read as omitted inputs.
    absent: std::collections::HashSet<String>,
    /// Values of nodes that could not be built (reported once, at their node): what reads
    /// them is skipped, in subgraphs too.
    poisoned: std::collections::HashSet<String>,
    /// Names defined in the graph being imported (not its enclosing scopes): a name may be
    /// assigned once per graph, and a subgraph may shadow an outer name.
    local: std::collections::HashSet<String>,
    /// The enclosing scopes' bindings of names the subgraphs being imported bind again,
    /// innermost last (`subgraph::Shadowed`).
    shadowed: Vec<subgraph::Shadowed>,
    /// Position in its graph of the node being imported (errors name unnamed nodes by it).
    position: usize,
    /// Quantized values seen so far (`ops::qdq`).
    qdq: ops::qdq::Notes,
    /// Values computed from values whose rows depend on the data (`Graph::data_dims`) or
    /// registered as such: a node reading one must not fold to a constant (it would have
    /// read the rows' bound as their count, as Shape does).
    data_dependent: std::collections::HashSet<ValueId>,
    /// The model's local functions (`subgraph::function`).
    functions: subgraph::function::Functions,
    /// Model functions being imported, one inside the other.
    call_depth: usize,
    /// Body nodes imported for model function calls so far.
    function_nodes: usize,
}

/// Most inputs (or outputs) a node may have: a variadic node of 100,000 inputs compiles in
/// seconds; far larger ones would take minutes.
const MAX_NODE_ARITY: usize = 1 << 17;

impl Importer<'_> {
    fn graph(&mut self, gp: &GraphProto) -> Result<()> {
        // Every graph input is named once (the IR's single assignment; the checker and
        // onnxruntime refuse a repeat).
        let mut seen = std::collections::HashSet::new();
        if let Some(name) = gp
            .input
            .iter()
            .map(|vi| vi.name.as_deref().unwrap_or_default())
            .find(|n| !seen.insert(*n))
        {
            return Err(Error::Model(format!(
                "graph input '{name}' is listed twice; every ONNX value is assigned once"
            )));
        }
        // Initializers are constants; graph inputs that are also initializers (IR < 4 style)
        // are not runtime inputs. A repeated initializer name is invalid ONNX, which
        // onnxruntime takes with a warning, the last one winning: so does onnxc.
        let mut seen = std::collections::HashSet::new();
        for (i, init) in gp.initializer.iter().enumerate() {
            let name = init.name.clone().unwrap_or_default();
            if !seen.insert(name.clone()) {
                self.g.warnings.push(format!(
                    "initializer '{name}' is listed more than once (invalid ONNX: every value \
                     is assigned once); the last one is used, as onnxruntime does"
                ));
            }
            let what = format!("initializer '{name}'");
            let t = match self.taken.remove(&i) {
                Some(raw) => tensor::tensor_from_proto_with(init, Some(raw), self.dir, &what)?,
                None => tensor_from_proto(init, self.dir, &what)?,
            };
            let origin = Origin::value("initializer", &name);
            self.bind_constant(name, t, origin);
        }
        self.sparse_initializers(gp, "sparse initializer")?;
        // Bind symbols from --dim, then --shape.
        let mut binding: HashMap<String, i64> = HashMap::new();
        for (name, v) in &self.opts.dim_values {
            if let Some(prev) = binding.insert(name.clone(), *v)
                && prev != *v
            {
                return Err(Error::Usage(format!(
                    "--dim: symbol '{name}' given both {prev} and {v}"
                )));
            }
        }
        let mut runtime_inputs = Vec::new();
        let standalone = io_types::standalone_symbols(gp);
        // The symbols the runtime inputs declare (before --shape replaces any).
        let mut symbols: Vec<String> = Vec::new();
        let mut groups: Vec<IoGroup> = Vec::new();
        for vi in &gp.input {
            let name = vi.name.clone().unwrap_or_default();
            if self.env.contains_key(&name) {
                continue;
            }
            let first = runtime_inputs.len();
            let (optional, ty) = io_types::unwrap_optional(vi);
            if optional && self.opts.absent.contains(&name) {
                self.absent.insert(name.clone());
                groups.push(IoGroup {
                    name,
                    kind: IoKind::Absent,
                    optional,
                    first,
                    len: 0,
                });
                continue;
            }
            if let Some((dtype, declared)) = io_types::sequence_type(&name, ty, "graph input")? {
                let shapes = self.sequence_shapes(&name, &declared)?;
                for (k, dims) in shapes.iter().enumerate() {
                    let element = IoGroup::element_name(&name, k);
                    // Its ABI name must not be a name the model gives another value.
                    if self.env.contains_key(&element)
                        || gp.input.iter().any(|i| i.name.as_deref() == Some(&element))
                    {
                        return Err(Error::Model(format!(
                            "graph input '{name}' is a sequence, whose tensor {k} is the ABI \
                             input '{element}', but the model names another value '{element}'; \
                             rename that value"
                        )));
                    }
                    let shape = dims.iter().map(|&d| Dim::Known(d)).collect();
                    runtime_inputs.push((element, dtype, shape, None));
                }
                groups.push(IoGroup {
                    name,
                    kind: IoKind::Sequence(dtype),
                    optional,
                    first,
                    len: shapes.len(),
                });
                continue;
            }
            groups.push(IoGroup {
                name: name.clone(),
                kind: IoKind::Tensor,
                optional,
                first,
                len: 1,
            });
            if let Some(m) = map_type(vi)? {
                runtime_inputs.push((name, DType::I64, vec![Dim::Known(3)], Some(m)));
                continue;
            }
            let (dtype, shape) = io_types::tensor_type_of(&name, ty, "graph input")?;
            let mut shape = io_types::with_sums(shape, &standalone);
            for d in &shape {
                d.symbols(&mut symbols);
            }
            if let Some((_, dims)) = self.opts.input_shapes.iter().find(|(n, _)| *n == name) {
                if dims.len() != shape.len() {
                    return Err(Error::Usage(format!(
                        "--shape {name}: the model declares rank {} ({}), got {} dims",
                        shape.len(),
                        crate::ir::dim::fmt_shape(&shape),
                        dims.len()
                    )));
                }
                for (k, (d, &v)) in shape.iter().zip(dims).enumerate() {
                    match d {
                        Dim::Known(x) if *x != v => {
                            return Err(Error::Usage(format!(
                                "--shape {name}: dim {k} is fixed to {x} by the model, got {v}"
                            )));
                        }
                        Dim::Sym(_) => {
                            let mut syms = Vec::new();
                            d.symbols(&mut syms);
                            // The --shape binds this input's dim whatever its name; other
                            // inputs that use the name keep the value bound first.
                            if let [s] = syms.as_slice() {
                                match binding.get(s) {
                                    Some(&prev) if prev != v => {
                                        self.g.warnings.push(format!(
                                            "--shape {name}: dim {k} is {v}, but symbol '{s}' \
                                             is {prev} (by --dim or another --shape); '{name}' \
                                             takes {v}, other inputs that use '{s}' take {prev}"
                                        ));
                                    }
                                    Some(_) => {}
                                    None => {
                                        binding.insert(s.clone(), v);
                                    }
                                }
                            }
                        }
                        _ => {}
                    }
                }
                shape = dims.iter().map(|&d| Dim::Known(d)).collect();
            }
            runtime_inputs.push((name, dtype, shape, None));
        }
        for (name, _) in &self.opts.sequences {
            if !groups
                .iter()
                .any(|g| &g.name == name && matches!(g.kind, IoKind::Sequence(_)))
            {
                return Err(Error::Usage(format!(
                    "--sequence {name}: the model has no sequence input of that name"
                )));
            }
        }
        for name in &self.opts.absent {
            if !groups.iter().any(|g| &g.name == name && g.optional) {
                return Err(Error::Usage(format!(
                    "--absent {name}: the model has no optional input of that name"
                )));
            }
        }
        for (name, _) in &self.opts.input_shapes {
            if !runtime_inputs.iter().any(|(n, ..)| n == name) {
                let names: Vec<&str> = runtime_inputs.iter().map(|(n, ..)| n.as_str()).collect();
                return Err(Error::Usage(format!(
                    "--shape {name}: the model has no runtime input of that name (inputs: {})",
                    names.join(", ")
                )));
            }
        }
        // Every --dim must name a symbol some runtime input uses.
        symbols.sort();
        symbols.dedup();
        for (name, _) in &self.opts.dim_values {
            if !symbols.contains(name) {
                return Err(Error::Usage(format!(
                    "--dim {name}: no graph input has a symbolic dim of that name (symbols: {})",
                    if symbols.is_empty() {
                        "none".to_string()
                    } else {
                        symbols.join(", ")
                    }
                )));
            }
        }
        for (name, dtype, shape, map) in runtime_inputs {
            if let Some(m) = map {
                let id = self.g.add_node(
                    name.clone(),
                    Op::Input,
                    vec![],
                    vec![TypeInfo::new(DType::I64, shape)],
                    Origin::value("graph input", &name),
                );
                self.g.map_inputs.insert(id.out(0), m);
                self.g.inputs.push(crate::ir::graph::GraphIo {
                    name: name.clone(),
                    value: id.out(0),
                    keys: None,
                    packed: None,
                    dims_at: None,
                    hidden: false,
                    map: Some(m),
                });
                self.define(name, id.out(0));
                continue;
            }
            let shape: Vec<Dim> = shape.iter().map(|d| d.substitute(&binding)).collect();
            crate::ir::dim::check_shape(&shape)
                .map_err(|m| Error::Model(format!("graph input '{name}': {m}")))?;
            // A 4- or 2-bit input arrives packed: its bytes, unpacked on entry.
            let packed = match dtype.packed_bits() {
                None => None,
                Some(_) => Some((dtype, packed_dims(&name, "input", &shape)?)),
            };
            let abi_type = match &packed {
                None => TypeInfo::new(dtype, shape.clone()),
                Some((_, dims)) => TypeInfo::new(
                    DType::U8,
                    vec![Dim::Known(dtype.abi_bytes(dims.iter().product()))],
                ),
            };
            let id = self.g.add_node(
                name.clone(),
                Op::Input,
                vec![],
                vec![abi_type],
                Origin::value("graph input", &name),
            );
            let value = if packed.is_some() {
                self.g
                    .add_node(
                        name.clone(),
                        Op::kernel(crate::kernels::Unpack { dtype }),
                        vec![id.out(0)],
                        vec![TypeInfo::new(dtype, shape)],
                        Origin::value("packed graph input", &name),
                    )
                    .out(0)
            } else {
                id.out(0)
            };
            self.g.inputs.push(crate::ir::graph::GraphIo {
                name: name.clone(),
                value: id.out(0),
                keys: None,
                packed,
                dims_at: None,
                hidden: false,
                map: None,
            });
            self.define(name, value);
        }
        for g in &groups {
            if let IoKind::Sequence(elem) = g.kind {
                let items = (0..g.len)
                    .map(|k| self.env[&IoGroup::element_name(&g.name, k)])
                    .collect();
                self.seqs
                    .insert(g.name.clone(), sequence::Seq { elem, items });
            }
        }
        self.g.input_groups = groups;
        // The shapes the graph declares, with the symbols the inputs bind (a dynamic axis
        // that --dim, --shape or a run-time batch's probe fixes) taken at their values.
        for vi in gp.value_info.iter().chain(&gp.output) {
            if let Ok((dt, shape)) = tensor_type(vi, "value") {
                let shape: Vec<Dim> = shape.iter().map(|d| d.substitute(&binding)).collect();
                if let Some(dims) = crate::ir::dim::known_dims(&shape) {
                    self.declared
                        .insert(vi.name.clone().unwrap_or_default(), (dt, dims));
                }
            }
        }
        declare_backwards(gp, &mut self.declared, &mut self.guessed);
        self.check_single_assignment(gp)?;
        self.nodes(&gp.node)?;
        for vo in &gp.output {
            if let Some(u) = self.unbuilt.remove(vo.name.as_deref().unwrap_or_default()) {
                self.unsupported.push(u);
            }
        }
        if !self.unsupported.is_empty() {
            return Err(Error::Unsupported(std::mem::take(&mut self.unsupported)));
        }
        let mut groups: Vec<IoGroup> = Vec::new();
        for vo in &gp.output {
            let name = vo.name.clone().unwrap_or_default();
            let (optional, _) = io_types::unwrap_optional(vo);
            let first = self.g.outputs.len();
            if let Some(seq) = self.seqs.get(&name) {
                // A sequence leaves as its tensors, each an output of its own.
                for (k, &v) in seq.items.iter().enumerate() {
                    self.g.outputs.push(crate::ir::graph::GraphIo {
                        name: IoGroup::element_name(&name, k),
                        value: v,
                        keys: None,
                        packed: None,
                        dims_at: None,
                        hidden: false,
                        map: None,
                    });
                }
                groups.push(IoGroup {
                    kind: IoKind::Sequence(seq.elem),
                    len: seq.items.len(),
                    name,
                    optional,
                    first,
                });
                continue;
            }
            if self.absent.contains(&name) && !self.env.contains_key(&name) {
                groups.push(IoGroup {
                    name,
                    kind: IoKind::Absent,
                    optional,
                    first,
                    len: 0,
                });
                continue;
            }
            groups.push(IoGroup {
                name: name.clone(),
                kind: IoKind::Tensor,
                optional,
                first,
                len: 1,
            });
            let v = *self.env.get(&name).ok_or_else(|| {
                Error::Model(format!(
                    "graph output '{name}' is not produced by any node, initializer or input"
                ))
            })?;
            if self.g.map_inputs.contains_key(&v) {
                return Err(Error::Unsupported(vec![Unsupported {
                    node: name.clone(),
                    op_type: "graph output of type a map".into(),
                    domain: String::new(),
                    opset: 0,
                    reason: format!(
                        "graph output '{name}' is a map input passed through; onnxc's outputs \
                         are tensors"
                    ),
                }]));
            }
            // A ZipMap's output is declared a sequence of maps; it is exposed as its tensor.
            let keys = self.g.zipmaps.get(&v).cloned();
            // Check the declared type against what we inferred, when the model declares one.
            // The element type is checked whether or not a shape is declared (onnxruntime
            // refuses a model whose output's declared type differs from the computed one).
            if keys.is_none()
                && let Some(dtype) = io_types::declared_elem_type(vo)
                && self.g.value_type(v).dtype != dtype
            {
                let origin = &self.g.node(v.node).origin;
                return Err(Error::Model(format!(
                    "graph output '{name}' is declared {dtype} but computes {computed} (from \
                     {origin}); the model is invalid (onnxruntime refuses it too): declare \
                     '{name}' as {computed}, or cast it to {dtype} with a Cast node",
                    computed = self.g.value_type(v).dtype
                )));
            }
            if keys.is_none()
                && !self.data_dependent.contains(&v)
                && let Ok((_, declared)) = tensor_type(vo, "graph output")
            {
                let ty = self.g.value_type(v);
                if declared.len() == ty.shape.len() {
                    for (d, e) in declared.iter().zip(&ty.shape) {
                        if let (Dim::Known(a), Dim::Known(b)) = (d, e)
                            && a != b
                        {
                            let origin = &self.g.node(v.node).origin;
                            let by = if origin.op_type.is_empty() {
                                String::new()
                            } else {
                                format!(" ({origin})")
                            };
                            // onnx.shape_inference (1.23) keeps the last window of a
                            // ceil_mode pool even when it starts in the end padding, which
                            // the operator's spec drops (onnxruntime and onnx's reference
                            // evaluator drop it too).
                            let hint = if origin.op_type.ends_with("Pool") {
                                "; onnx.shape_inference declares one window too many for \
                                 ceil_mode pools whose last window would start in the padding"
                            } else {
                                ""
                            };
                            // onnxruntime runs such models (a lenient merge); so does onnxc,
                            // with the shape the operators give, which the header documents.
                            self.g.warnings.push(format!(
                                "graph output '{name}' is declared {} but computes {} by the \
                                 operator's shape rules{by}; the header gives the computed shape \
                                 (correct or remove the shape the model declares for \
                                 '{name}'{hint})",
                                crate::ir::dim::fmt_shape(&declared),
                                crate::ir::dim::fmt_shape(&ty.shape)
                            ));
                            break;
                        }
                    }
                }
            }
            // A 4- or 2-bit output leaves packed.
            let ty = self.g.value_type(v).clone();
            let (v, packed) = match ty.dtype.packed_bits() {
                None => (v, None),
                Some(_) => {
                    let dims = packed_dims(&name, "output", &ty.shape)?;
                    let bytes = ty.dtype.abi_bytes(dims.iter().product());
                    let p = self.g.add_node(
                        name.clone(),
                        Op::kernel(crate::kernels::Pack { dtype: ty.dtype }),
                        vec![v],
                        vec![TypeInfo::new(DType::U8, vec![Dim::Known(bytes)])],
                        Origin::value("packed graph output", &name),
                    );
                    (p.out(0), Some((ty.dtype, dims)))
                }
            };
            self.g.outputs.push(crate::ir::graph::GraphIo {
                name,
                value: v,
                keys,
                packed,
                dims_at: None,
                hidden: false,
                map: None,
            });
        }
        self.g.output_groups = groups;
        if !self.g.data_dims.is_empty() {
            crate::passes::data_dims::expose(&mut self.g).map_err(Error::Model)?;
        }
        Ok(())
    }

    /// Binds `gp`'s sparse initializers, made dense (`tensor::sparse_from_proto`), as
    /// constants named by their values tensor; `what` names them in messages.
    fn sparse_initializers(&mut self, gp: &GraphProto, what: &str) -> Result<()> {
        for (k, sp) in gp.sparse_initializer.iter().enumerate() {
            let name = sp
                .values
                .as_ref()
                .and_then(|v| v.name.clone())
                .unwrap_or_default();
            let label = format!("{what} '{name}'");
            if name.is_empty() {
                return Err(Error::Model(format!(
                    "{what} #{k} has no name: a sparse initializer is named by its values \
                     tensor's name"
                )));
            }
            if gp
                .initializer
                .iter()
                .any(|t| t.name.as_deref() == Some(&name))
                || gp.sparse_initializer[..k]
                    .iter()
                    .any(|s| s.values.as_ref().and_then(|v| v.name.as_deref()) == Some(&name))
            {
                return Err(Error::Model(format!(
                    "{label}: another initializer has the name '{name}'; initializer and \
                     sparse initializer names are unique"
                )));
            }
            let t = tensor::sparse_from_proto(sp, self.dir, &label)?;
            self.bind_constant(name.clone(), t, Origin::value("sparse initializer", &name));
        }
        Ok(())
    }

    /// Every value of `gp` is assigned once (the IR's single static assignment): a node
    /// output may not name a graph input, an initializer or another node's output.
    fn check_single_assignment(&mut self, gp: &GraphProto) -> Result<()> {
        // Who defines each name: a graph input, an initializer or node k.
        enum Def {
            Input,
            Initializer,
            Node(usize),
        }
        let mut defined: HashMap<&str, Def> = HashMap::new();
        for vi in &gp.input {
            defined.insert(vi.name.as_deref().unwrap_or_default(), Def::Input);
        }
        let sparse = gp
            .sparse_initializer
            .iter()
            .filter_map(|s| s.values.as_ref());
        for t in gp.initializer.iter().chain(sparse) {
            defined
                .entry(t.name.as_deref().unwrap_or_default())
                .or_insert(Def::Initializer);
        }
        for (k, n) in gp.node.iter().enumerate() {
            for o in n.output.iter().filter(|o| !o.is_empty()) {
                let Some(def) = defined.get(o.as_str()) else {
                    defined.insert(o, Def::Node(k));
                    continue;
                };
                let position = self.position;
                let what = match *def {
                    Def::Input => "is a graph input".to_string(),
                    Def::Initializer => "is an initializer".to_string(),
                    Def::Node(p) => {
                        self.position = p;
                        format!("{} writes too", self.node_origin(&gp.node[p]).0)
                    }
                };
                self.position = k;
                let origin = self.node_origin(n).0;
                self.position = position;
                return Err(Error::Model(format!(
                    "{origin} writes '{o}', which {what}; every ONNX value is assigned once \
                     (rename the node's output and what reads it)"
                )));
            }
        }
        Ok(())
    }

    fn nodes(&mut self, nodes: &[NodeProto]) -> Result<()> {
        // ONNX requires topological order, but be lenient: nodes are imported in a
        // topological order that keeps the file's order wherever it is one (always the
        // lowest-numbered node whose inputs are all produced), in time linear in the graph
        // (retrying pending nodes pass after pass was quadratic: 20,000 nodes in reverse
        // order took 12 s).
        let mut producer: HashMap<&str, usize> = HashMap::new();
        for (k, n) in nodes.iter().enumerate() {
            for o in n.output.iter().filter(|o| !o.is_empty()) {
                producer.entry(o.as_str()).or_insert(k);
            }
        }
        // Per node, how many of its inputs another node of this graph has yet to produce,
        // and who reads each node's outputs.
        let mut waiting = vec![0usize; nodes.len()];
        let mut readers: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
        for (k, n) in nodes.iter().enumerate() {
            for i in n.input.iter().filter(|i| !i.is_empty()) {
                if let Some(&p) = producer.get(i.as_str())
                    && p != k
                {
                    waiting[k] += 1;
                    readers[p].push(k);
                }
            }
        }
        let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<usize>> = (0..nodes.len())
            .filter(|&k| waiting[k] == 0)
            .map(std::cmp::Reverse)
            .collect();
        let mut done = vec![false; nodes.len()];
        while let Some(std::cmp::Reverse(k)) = ready.pop() {
            let n = &nodes[k];
            let defined = n.input.iter().all(|i| {
                i.is_empty()
                    || self.env.contains_key(i)
                    || self.seqs.contains_key(i)
                    || self.absent.contains(i)
                    || self.poisoned.contains(i)
            });
            if !defined {
                // An input nothing defines: reported below, with every node it blocks.
                continue;
            }
            done[k] = true;
            self.position = k;
            self.import_ready(n)?;
            for &r in &readers[k] {
                waiting[r] -= 1;
                if waiting[r] == 0 {
                    ready.push(std::cmp::Reverse(r));
                }
            }
        }
        if done.iter().all(|d| *d) {
            return Ok(());
        }
        let label = |k: usize| {
            let n = &nodes[k];
            let name = match n.name.as_deref() {
                Some(s) if !s.is_empty() => format!("'{s}'"),
                _ => format!(
                    "#{k} '{}_{}'",
                    n.op_type.as_deref().unwrap_or_default(),
                    n.output.first().map_or("", String::as_str)
                ),
            };
            format!("node {name} ({})", n.op_type.as_deref().unwrap_or_default())
        };
        let undefined = |i: &String| {
            !i.is_empty()
                && !self.env.contains_key(i)
                && !self.seqs.contains_key(i)
                && !self.absent.contains(i)
                && !self.poisoned.contains(i)
        };
        // A node reading a name nothing defines; else every node left waits for another
        // one left, and following what they wait for leads into a cycle.
        let unproduced = (0..nodes.len()).filter(|&k| !done[k]).find_map(|k| {
            let missing: Vec<&String> = nodes[k]
                .input
                .iter()
                .filter(|i| undefined(i) && !producer.contains_key(i.as_str()))
                .collect();
            (!missing.is_empty()).then_some((k, missing))
        });
        if let Some((k, missing)) = unproduced {
            return Err(Error::Model(format!(
                "{} reads {missing:?}, which no node, initializer or graph input defines",
                label(k)
            )));
        }
        let waits_for = |k: usize| {
            nodes[k].input.iter().find_map(|i| {
                let p = *producer.get(i.as_str())?;
                (undefined(i) && !done[p]).then_some((i, p))
            })
        };
        let mut path: Vec<(usize, &String)> = Vec::new();
        let mut at = done.iter().position(|d| !*d).unwrap_or(0);
        while let Some((i, p)) = waits_for(at) {
            if let Some(start) = path.iter().position(|(k, _)| *k == at) {
                path.drain(..start);
                break;
            }
            path.push((at, i));
            at = p;
        }
        let Some(&(k0, i0)) = path.first() else {
            return Err(Error::Internal(format!(
                "{} was never imported, but reads nothing undefined",
                label(at)
            )));
        };
        let mut chain = format!("{} reads '{i0}'", label(k0));
        for (k, i) in &path[1..] {
            chain += &format!(", which {} writes from '{i}'", label(*k));
        }
        Err(Error::Model(format!(
            "the graph has a cycle: {chain}, which {} writes; an ONNX graph is acyclic \
             (each value is computed from values computed before it)",
            label(k0)
        )))
    }

    /// Imports one node whose inputs are all defined (or poisoned).
    fn import_ready(&mut self, n: &NodeProto) -> Result<()> {
        for i in &n.input {
            if let Some(u) = self.unbuilt.remove(i) {
                self.unsupported.push(u);
            }
        }
        if n.input.iter().any(|i| self.poisoned.contains(i)) {
            // An upstream node failed; still check that this op type is known so the
            // report lists every unsupported op at once.
            self.check_known(n);
            self.poisoned.extend(n.output.iter().cloned());
            return Ok(());
        }
        let reads_data_dependent = n.input.iter().find(|i| {
            self.env
                .get(*i)
                .is_some_and(|v| self.data_dependent.contains(v))
        });
        let reads_data_dependent = reads_data_dependent.cloned();
        let mark = self.g.added_count();
        match self.node(n) {
            Ok(()) => self.note_data_dependent(n, reads_data_dependent, mark)?,
            Err(Error::Unsupported(mut u)) => {
                self.unsupported.append(&mut u);
                self.poisoned.extend(n.output.iter().cloned());
            }
            Err(e) => return Err(e),
        }
        self.poisoned.extend(
            n.output
                .iter()
                .filter(|o| self.unbuilt.contains_key(*o))
                .cloned(),
        );
        Ok(())
    }

    /// Marks the outputs of `n`, just imported (its graph nodes added after `mark`), that
    /// depend on values whose rows depend on the data (`read`: the input that does, else
    /// such values the node made itself); refuses one that folded to a constant.
    fn note_data_dependent(
        &mut self,
        n: &NodeProto,
        read: Option<String>,
        mark: usize,
    ) -> Result<()> {
        let made = || {
            self.g.added_since(mark).iter().any(|id| {
                (0..self.g.node(*id).outputs.len())
                    .any(|k| self.g.data_dims.contains_key(&id.out(k as u32)))
            })
        };
        if read.is_none() && !made() {
            return Ok(());
        }
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            let Some(&v) = self.env.get(o) else { continue };
            if self.g.data_dims.contains_key(&v) {
                self.data_dependent.insert(v);
                continue;
            }
            let Some(input) = &read else {
                if !matches!(self.g.node(v.node).op, Op::Const(_)) {
                    self.data_dependent.insert(v);
                }
                continue;
            };
            if matches!(self.g.node(v.node).op, Op::Const(_)) {
                let (origin, _, _) = self.node_origin(n);
                return Err(Error::Model(format!(
                    "{origin} computes '{o}' from the dims of '{input}', whose row count \
                     depends on the data (rows a NonZero, NonMaxSuppression or Unique \
                     selects, a TopK, Slice or Loop sized at run time); onnxc knows only their bound when it compiles, so it cannot \
                     compute Shape, Size or other dims of such values: return the rows as an \
                     output and compute their dims in the application"
                )));
            }
            self.data_dependent.insert(v);
        }
        Ok(())
    }

    fn node_origin(&self, n: &NodeProto) -> (Origin, String, i64) {
        let domain = n.domain.clone().unwrap_or_default();
        let domain = if domain == "ai.onnx" {
            String::new()
        } else {
            domain
        };
        let opset = self.opsets.get(&domain).copied().unwrap_or(0);
        let op_type = n.op_type.clone().unwrap_or_default();
        let (name, position) = match &n.name {
            Some(s) if !s.is_empty() => (s.clone(), None),
            _ => (
                format!(
                    "{}_{}",
                    op_type,
                    n.output.first().cloned().unwrap_or_default()
                ),
                Some(self.position),
            ),
        };
        (
            Origin {
                name,
                op_type,
                opset,
                position,
            },
            domain,
            opset,
        )
    }

    /// Adds an initializer's tensor as a constant named `name` in scope. A string tensor
    /// becomes its table's strings taken at constant positions (`ops::ml::encode`): pointers
    /// into the object's read-only data, made when the model runs; one holding a NUL byte
    /// is an error if a node reads it.
    fn bind_constant(&mut self, name: String, t: crate::ir::Tensor, origin: Origin) {
        let strings = (t.dtype == DType::Str).then(|| t.to_strings());
        if let Some(table) = strings
            .as_deref()
            .and_then(|s| ops::ml::encode::string_table(s).ok())
        {
            let shape: Vec<Dim> = t.shape.iter().map(|&d| Dim::Known(d)).collect();
            let n: i64 = t.shape.iter().product();
            let positions =
                crate::ir::Tensor::from_i64s(t.shape.clone(), &(0..n).collect::<Vec<_>>());
            let pos = self.g.add_node(
                format!("{name}.positions"),
                Op::Const(positions),
                vec![],
                vec![TypeInfo::new(DType::I64, shape.clone())],
                origin.clone(),
            );
            let id = self.g.add_node(
                name.clone(),
                Op::kernel(crate::kernels::StrTable(table)),
                vec![pos.out(0)],
                vec![TypeInfo::new(DType::Str, shape)],
                origin,
            );
            self.define(name, id.out(0));
            return;
        }
        if t.dtype == DType::Str {
            self.poisoned.insert(name.clone());
            self.unbuilt.insert(
                name.clone(),
                Unsupported {
                    node: name,
                    op_type: "initializer of type STRING".into(),
                    domain: String::new(),
                    opset: 0,
                    reason: "one of its strings holds a NUL byte, which a C string cannot".into(),
                },
            );
            return;
        }
        let ty = TypeInfo::new(t.dtype, t.shape.iter().map(|&d| Dim::Known(d)).collect());
        let id = self
            .g
            .add_node(name.clone(), Op::Const(t), vec![], vec![ty], origin);
        self.define(name, id.out(0));
    }

    /// Binds `name` in the current scope; false if the current graph already defines it.
    fn define(&mut self, name: String, v: ValueId) -> bool {
        let fresh = self.bind_local(&name);
        self.env.insert(name, v);
        fresh
    }

    fn check_known(&mut self, n: &NodeProto) {
        let (origin, domain, opset) = self.node_origin(n);
        if registry::lookup(&domain, &origin.op_type).is_none()
            && self.function_of(n, &domain).is_none()
        {
            self.unsupported.push(Unsupported {
                node: origin.node_id(),
                op_type: origin.op_type,
                reason: registry::missing_reason(&domain),
                domain,
                opset,
            });
        }
    }

    fn node(&mut self, n: &NodeProto) -> Result<()> {
        let (origin, domain, opset) = self.node_origin(n);
        if n.input.len().max(n.output.len()) > MAX_NODE_ARITY {
            return Err(Error::Model(format!(
                "{origin} has {} inputs and {} outputs; onnxc takes at most {MAX_NODE_ARITY} \
                 (2^17) of each per node",
                n.input.len(),
                n.output.len()
            )));
        }
        // More outputs than the op's schema has is an invalid model, not a missing feature
        // (an optional output onnxc does not compute is reported as unsupported below).
        // Trailing empty names are omitted outputs and do not count.
        let declared = n
            .output
            .iter()
            .rposition(|o| !o.is_empty())
            .map_or(0, |i| i + 1);
        if let Some(max) = registry::schema_outputs(&domain, &origin.op_type, opset)
            && declared > max
            && self.function_of(n, &domain).is_none()
        {
            let extra: Vec<&str> = n.output[max..declared].iter().map(String::as_str).collect();
            return Err(Error::Model(format!(
                "{origin} declares {declared} outputs, but {} has {max} at opset {opset} \
                 (extra: {extra:?}); the model is invalid: remove the extra outputs",
                origin.op_type
            )));
        }
        if domain.is_empty() {
            match origin.op_type.as_str() {
                "If" if self.if_condition(n).is_some() => return self.inline_if(n, &origin),
                "If" => return self.if_convert(n, &origin),
                "Loop" => return self.unroll_loop(n, &origin),
                "Scan" => return self.unroll_scan(n, &origin),
                op if sequence::SEQUENCE_OPS.contains(&op) => return self.sequence_op(n, &origin),
                _ => {}
            }
        }
        if let Some(f) = self.function_of(n, &domain) {
            return self.call_function(n, &origin, &f);
        }
        if domain == "ai.onnx.preview" && origin.op_type == "FlexAttention" {
            return self.flex_attention(n, &origin);
        }
        // An empty optional (Optional without input, or of an empty one): its output reads
        // as an omitted input, as an optional graph input compiled empty does.
        let empty = match (origin.op_type.as_str(), n.input.first()) {
            ("Optional", None) => true,
            ("Optional", Some(i)) => i.is_empty() || self.absent.contains(i),
            ("Identity", Some(i)) => self.absent.contains(i),
            _ => false,
        };
        if domain.is_empty() && empty && n.output.first().is_some_and(|o| !o.is_empty()) {
            return self.define_absent(n, &origin, 0);
        }
        if domain.is_empty()
            && let Some(seq) = n.input.first().and_then(|i| self.seqs.get(i)).cloned()
            && matches!(
                origin.op_type.as_str(),
                "Identity" | "Optional" | "OptionalGetElement" | "OptionalHasElement"
            )
        {
            return self.sequence_passthrough(n, &origin, seq);
        }
        if let Some(name) = n.input.iter().find(|i| self.seqs.contains_key(*i)) {
            return Err(Error::Model(format!(
                "{origin}: input '{name}' is a sequence; this op takes tensors"
            )));
        }
        let Some(builder) = registry::lookup(&domain, &origin.op_type) else {
            let reason = if !domain.is_empty() && !self.opsets.contains_key(&domain) {
                format!("domain '{domain}' is not imported by the model")
            } else {
                registry::missing_reason(&domain)
            };
            return Err(Error::Unsupported(vec![Unsupported {
                node: origin.node_id(),
                op_type: origin.op_type,
                domain,
                opset,
                reason,
            }]));
        };
        let inputs: Vec<Option<ValueId>> = n
            .input
            .iter()
            .map(|i| {
                if i.is_empty() {
                    None
                } else {
                    self.env.get(i).copied()
                }
            })
            .collect();
        // Values only some ops may read: ZipMap's sequences of maps (graph outputs only) and
        // map inputs (DictVectorizer and CastMap).
        let reads_maps = domain == "ai.onnx.ml"
            && matches!(origin.op_type.as_str(), "DictVectorizer" | "CastMap");
        let misread = inputs.iter().enumerate().find_map(|(k, v)| {
            let v = (*v)?;
            if self.g.zipmaps.contains_key(&v) {
                Some((
                    k,
                    "is a ZipMap's sequence of maps; onnxc exposes such a sequence only as a \
                     graph output (its [N, C] tensor and keys)",
                ))
            } else if !reads_maps && self.g.map_inputs.contains_key(&v) {
                Some((
                    k,
                    "is a map (a graph input of type map); onnxc reads maps only with \
                     ai.onnx.ml's DictVectorizer and CastMap",
                ))
            } else {
                None
            }
        });
        if let Some((k, why)) = misread {
            return Err(Error::Unsupported(vec![Unsupported {
                node: origin.node_id(),
                op_type: origin.op_type,
                domain,
                opset,
                reason: format!("input {k} ('{}') {why}", n.input[k]),
            }]));
        }
        let declared: Vec<Option<(DType, Vec<i64>)>> = n
            .output
            .iter()
            .map(|o| self.declared.get(o).cloned())
            .collect();
        let mut ctx = Ctx::new(
            &mut self.g,
            n,
            origin.clone(),
            opset,
            inputs,
            self.dir,
            self.opts.fold_limit,
        );
        ctx.declared = declared;
        ctx.guessed = n
            .output
            .iter()
            .map(|o| self.guessed.get(o).cloned())
            .collect();
        ctx.qdq = Some(&mut self.qdq);
        ctx.string_bytes = self.opts.string_bytes;
        let outs = match ops::qdq::on_quantized_values(&mut ctx, &domain, builder)? {
            Some(outs) => outs,
            None => builder(&mut ctx)?,
        };
        for (k, name) in n.output.iter().enumerate() {
            if name.is_empty() {
                continue;
            }
            match outs.get(k) {
                Some(v) => {
                    if !self.define(name.clone(), *v) {
                        return Err(Error::Model(format!(
                            "{origin} writes '{name}', which an earlier node, an initializer \
                             or a graph input already defines; every ONNX value is assigned \
                             once (rename one of them)"
                        )));
                    }
                }
                None => {
                    self.unbuilt.insert(
                        name.clone(),
                        Unsupported {
                            node: origin.node_id(),
                            op_type: origin.op_type.clone(),
                            domain: domain.clone(),
                            opset,
                            reason: format!("output {k} ('{name}') is not implemented"),
                        },
                    );
                }
            }
        }
        Ok(())
    }
}
