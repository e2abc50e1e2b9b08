//! The graph IR: a petgraph DAG of core ops with typed values.
//!
//! A value is `(node, output slot)`. Each node keeps its operand list in order; edges mirror
//! the operands so petgraph can answer "who uses this" and sort topologically.
//! **Invariant:** node operands and DAG edges change only through `Graph`'s methods.

use super::dim::{Shape, fmt_shape};
use super::dtype::DType;
use super::expr::{self, E};
use super::tensor::Tensor;
use petgraph::Direction;
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use petgraph::visit::EdgeRef;
use std::fmt::Write;

#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct NodeId(pub NodeIndex);

#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct ValueId {
    pub node: NodeId,
    pub slot: u32,
}

impl NodeId {
    pub fn out(self, slot: u32) -> ValueId {
        ValueId { node: self, slot }
    }
    pub fn index(self) -> usize {
        self.0.index()
    }
}

#[derive(Clone, PartialEq, Debug)]
pub struct TypeInfo {
    pub dtype: DType,
    pub shape: Shape,
}

impl TypeInfo {
    pub fn new(dtype: DType, shape: Shape) -> TypeInfo {
        TypeInfo { dtype, shape }
    }
    pub fn rank(&self) -> usize {
        self.shape.len()
    }
}

impl std::fmt::Display for TypeInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", self.dtype, fmt_shape(&self.shape))
    }
}

/// Where a node came from in the ONNX model, for error messages and dumps.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Origin {
    /// The node's name, or for a node without one `OP_OUTPUT` (its op type and first output).
    pub name: String,
    pub op_type: String,
    pub opset: i64,
    /// For a node without a name: its position in its graph's node list, which errors give.
    pub position: Option<usize>,
}

impl Origin {
    /// `Origin::opset` of what is no node of the model: a graph input or output, an
    /// initializer, a value the compiler adds.
    const NOT_A_NODE: i64 = -1;

    /// The origin of a graph value that no node makes: `kind` says what it is ("graph
    /// input", "initializer"), `name` its name. Errors name it as `KIND 'NAME'`.
    pub fn value(kind: &str, name: &str) -> Origin {
        Origin {
            name: name.to_string(),
            op_type: kind.to_string(),
            opset: Self::NOT_A_NODE,
            position: None,
        }
    }

    /// Whether a node of the model is the origin (not `Origin::value`).
    pub fn is_node(&self) -> bool {
        self.opset != Self::NOT_A_NODE
    }

    /// The node as lists of unsupported nodes name it: `NAME`, or `#POSITION OP_OUTPUT`
    /// when it has no name.
    pub fn node_id(&self) -> String {
        match self.position {
            Some(k) => format!("#{k} {}", self.name),
            None => self.name.clone(),
        }
    }

    /// How errors name the node: `'NAME'`, or `#POSITION 'OP_OUTPUT'` when it has no name.
    pub fn label(&self) -> String {
        match self.position {
            Some(k) => format!("#{k} '{}'", self.name),
            None => format!("'{}'", self.name),
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.opset {
            Self::NOT_A_NODE => write!(f, "{} '{}'", self.op_type, self.name),
            // A node of a domain the model does not import.
            0 => write!(f, "node {} ({})", self.label(), self.op_type),
            v => write!(f, "node {} ({}, opset {v})", self.label(), self.op_type),
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    Sum,
    Prod,
    Max,
    Min,
    /// Index (i64) of the first (or last) maximum along the single reduction variable.
    ArgMax {
        select_last: bool,
    },
    ArgMin {
        select_last: bool,
    },
}

/// Elementwise/injective computation: `out[v0..vr] = body`.
#[derive(Clone, Debug, PartialEq)]
pub struct MapOp {
    pub body: E,
}

/// `out[v0..vr] = fold(kind, body over v_r.. in extents)`.
#[derive(Clone, Debug, PartialEq)]
pub struct ReduceOp {
    pub kind: ReduceKind,
    pub extents: Vec<i64>,
    pub body: E,
}

/// Batched matrix product `A[..., M, K] · B[..., K, N]` with broadcast batch dims.
/// `trans_a`/`trans_b` read the operand's last two dims swapped. The element type of the
/// output may be wider than the operands' (integer matmul accumulates in i32).
#[derive(Clone, Debug, PartialEq)]
pub struct MatMulOp {
    pub trans_a: bool,
    pub trans_b: bool,
}

/// N-d convolution, NC[spatial] layout, weights M × C/group × kernel; optional bias operand.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvOp {
    pub group: i64,
    pub strides: Vec<i64>,
    pub dilations: Vec<i64>,
    pub pads_begin: Vec<i64>,
    pub pads_end: Vec<i64>,
    /// The operands hold integers whose products and sums are exact in float32 (the
    /// frontend proved the bound): the kernel must sum them as they are — no Winograd
    /// transforms, no scales folded into the weights (quantized convolutions).
    pub exact: bool,
}

#[derive(Copy, Clone, Debug, PartialEq)]
pub enum PoolKind {
    Max,
    Avg { count_include_pad: bool },
    Lp { p: i64 },
}

/// 2-D pooling over NCHW (float32), run by a runtime kernel; other cases are built as
/// `Reduce` expressions by the frontend.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolOp {
    pub kind: PoolKind,
    pub kernel: Vec<i64>,
    pub strides: Vec<i64>,
    pub dilations: Vec<i64>,
    pub pads_begin: Vec<i64>,
    pub pads_end: Vec<i64>,
}

/// `out = base; for u in extents: out[index(u)] = combine(out[index(u)], value(u))`.
/// Operand 0 is `base`; `index` and `value` load the other operands over the update variables.
/// `kind: None` replaces (the last write wins).
#[derive(Clone, Debug, PartialEq)]
pub struct ScatterOp {
    pub kind: Option<ReduceKind>,
    pub extents: Vec<i64>,
    pub index: Vec<E>,
    pub value: E,
}

/// The core op set. ONNX ops decompose into these in the frontend.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// The graph input with this position in `Graph::inputs`.
    Input,
    Const(Tensor),
    Map(MapOp),
    Reduce(ReduceOp),
    /// Same elements, new shape (row-major order preserved). Lowered as an alias, no copy.
    Reshape,
    MatMul(MatMulOp),
    Conv(ConvOp),
    /// Concatenation of all operands along `axis`.
    Concat {
        axis: usize,
    },
    Scatter(ScatterOp),
    Pool(PoolOp),
    /// An op run by one runtime kernel (`crate::kernels`: softmax, GELU, resize, transposed
    /// convolution, top-k, gather-sum), compared by its attributes.
    Kernel(std::sync::Arc<dyn crate::kernels::KernelOp>),
    /// Fails the run with `code` unless every element of the (bool) operand is true. Its
    /// 0-d output is passed as an extra operand to the ops it guards, to order them after it.
    Assert {
        code: i32,
    },
}

impl PoolOp {
    /// The runtime kernel's geometry for an input `[n, c, h, w]` and output `[.., oh, ow]`.
    pub fn geometry(&self, input: &[i64], output: &[i64]) -> onnxc_runtime::pool::PoolGeometry {
        let two = |v: &[i64]| [v[0], v[1]];
        let (kind, count_include_pad, p) = match self.kind {
            PoolKind::Max => (0, false, 0),
            PoolKind::Avg { count_include_pad } => (1, count_include_pad, 0),
            PoolKind::Lp { p } => (2, false, p),
        };
        onnxc_runtime::pool::PoolGeometry {
            kind,
            count_include_pad,
            p,
            planes: input[0] * input[1],
            input: two(&input[2..]),
            output: two(&output[2..]),
            kernel: two(&self.kernel),
            strides: two(&self.strides),
            dilations: two(&self.dilations),
            pads_begin: two(&self.pads_begin),
            pads_end: two(&self.pads_end),
        }
    }
}

impl Op {
    /// Whether running the op can make the run fail (return an error code): an assertion,
    /// or a data-dependent index checked at run time. Every other op computes its output
    /// from any operand values.
    pub fn can_fail(&self) -> bool {
        match self {
            Op::Assert { .. } => true,
            Op::Map(m) => super::expr::can_fail(&m.body),
            Op::Reduce(r) => super::expr::can_fail(&r.body),
            Op::Scatter(s) => {
                super::expr::can_fail(&s.value) || s.index.iter().any(super::expr::can_fail)
            }
            _ => false,
        }
    }

    /// A kernel op (`crate::kernels`).
    pub fn kernel(k: impl crate::kernels::KernelOp) -> Op {
        Op::Kernel(std::sync::Arc::new(k))
    }

    pub fn name(&self) -> &'static str {
        match self {
            Op::Input => "input",
            Op::Const(_) => "const",
            Op::Map(_) => "map",
            Op::Reduce(_) => "reduce",
            Op::Reshape => "reshape",
            Op::MatMul(_) => "matmul",
            Op::Conv(_) => "conv",
            Op::Concat { .. } => "concat",
            Op::Scatter(_) => "scatter",
            Op::Pool(_) => "pool",
            Op::Kernel(k) => k.name(),
            Op::Assert { .. } => "assert",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Node {
    pub name: String,
    pub op: Op,
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<TypeInfo>,
    pub origin: Origin,
}

#[derive(Clone, Copy, Debug)]
pub struct Edge {
    pub out_slot: u32,
    pub in_index: u32,
}

#[derive(Clone, Debug)]
pub struct GraphIo {
    pub name: String,
    pub value: ValueId,
    /// For an output ONNX-ML's ZipMap makes (a sequence of maps): the maps' keys; the value
    /// is the `[n, keys]` float32 tensor, row i being the map {keys[j]: value[i, j]}.
    pub keys: Option<std::sync::Arc<MapKeys>>,
    /// For a tensor of a 4- or 2-bit type (`DType::packed_bits`): its type and shape, the
    /// value being its packed bytes (`uint8 [abi_bytes]`), as the ABI passes them
    /// (`kernels::Unpack`/`Pack` convert).
    pub packed: Option<(DType, Vec<i64>)>,
    /// For an output whose dims depend on the data (`DataDim`): the index in
    /// `Graph::outputs` of the int64 `[rank]` output holding its dims; its own shape gives
    /// upper bounds.
    pub dims_at: Option<usize>,
    /// A graph output the ABI does not expose: another output's dims (they come last).
    pub hidden: bool,
    /// For a map input: the types of its keys and values (`MapInput`); the value is the
    /// int64 `[3]` descriptor the caller passes (`onnxc_runtime::map::Map`).
    pub map: Option<MapInput>,
}

/// A graph input of type map(key, value), which only DictVectorizer and CastMap read
/// (`frontend::Ctx::map_input`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MapInput {
    /// `DType::I64` or `DType::Str`.
    pub key: DType,
    /// `DType::F32`, `F64`, `I64` or `Str`.
    pub value: DType,
}

/// An axis of a value whose extent depends on the data: only `count · per` of its `bound ·
/// per` slices are the value, the rest padding (computed, but no output exposes it). A
/// data-dependent kernel (`kernels::NonZero`, `kernels::Nms`) writes the count, a scalar
/// int64 value; the builders register the rows they slice from its result (`Graph::mark_rows`,
/// into `Graph::data_dims`), and `passes::data_dims` follows the axis to the outputs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DataDim {
    /// The scalar int64 count of rows.
    pub count: ValueId,
    /// The most rows there can be.
    pub bound: i64,
    pub axis: usize,
    /// Slices of `axis` per row (a reshape may merge a row with a dim of `per`).
    pub per: i64,
}

/// The keys of the maps a ZipMap output holds.
#[derive(Clone, Debug, PartialEq)]
pub enum MapKeys {
    Ints(Vec<i64>),
    Strings(Vec<String>),
}

impl MapKeys {
    pub fn len(&self) -> usize {
        match self {
            MapKeys::Ints(v) => v.len(),
            MapKeys::Strings(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The ONNX element type of the keys (7 int64, 8 string).
    pub fn onnx_code(&self) -> i32 {
        match self {
            MapKeys::Ints(_) => 7,
            MapKeys::Strings(_) => 8,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub name: String,
    /// Maps that make more elements than their constant operands hold are not folded
    /// (`frontend::ImportOptions::keep_expanding`).
    pub keep_expanding: bool,
    /// Maps selecting from a larger float constant by other operands are not folded either
    /// (`frontend::ImportOptions::keep_selections`).
    pub keep_selections: bool,
    /// Products of two quantized run-time operands never take the direct float32 plan
    /// (`frontend::ImportOptions::split_products`).
    pub split_products: bool,
    /// Tables chosen without sizes take rows over one dim at most
    /// (`frontend::ImportOptions::narrow_tables`).
    pub narrow_tables: bool,
    dag: StableDiGraph<Node, Edge>,
    pub inputs: Vec<GraphIo>,
    pub outputs: Vec<GraphIo>,
    /// `Assert` nodes: side effects that stay live without consumers.
    pub asserts: Vec<NodeId>,
    /// What the import noticed but compiled anyway (the driver prints them).
    pub warnings: Vec<String>,
    /// Map inputs' descriptors, with their types: only map readers may take them.
    pub map_inputs: std::collections::HashMap<ValueId, MapInput>,
    /// Values ZipMap made, with their maps' keys: they may only be graph outputs.
    pub zipmaps: std::collections::HashMap<ValueId, std::sync::Arc<MapKeys>>,
    /// Values whose extent along an axis depends on the data, as the builders of
    /// data-dependent ops registered them (`DataDim`).
    pub data_dims: std::collections::HashMap<ValueId, DataDim>,
    /// How `inputs` and `outputs` make up the model's ONNX inputs and outputs, when some
    /// are sequences or optionals (`IoGroup`); empty when each is one tensor.
    pub input_groups: Vec<IoGroup>,
    pub output_groups: Vec<IoGroup>,
    /// Every node in the order it was added (`added_since`).
    added: Vec<NodeId>,
}

/// One ONNX graph input or output as the ABI passes it: a tensor is one ABI tensor, a
/// sequence (its length fixed at compile time) one per element, in order, and an empty
/// optional none. A present optional is passed as what it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoGroup {
    pub name: String,
    pub kind: IoKind,
    /// Declared `optional(...)` in the model.
    pub optional: bool,
    /// Its ABI tensors: `first..first + len` of the inputs (or public outputs).
    pub first: usize,
    pub len: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoKind {
    Tensor,
    /// A sequence of tensors of this element type.
    Sequence(DType),
    /// An empty optional.
    Absent,
}

impl IoGroup {
    /// One tensor group per ABI tensor: the grouping of a model with tensor I/O only.
    pub fn tensors(names: impl IntoIterator<Item = String>) -> Vec<IoGroup> {
        names
            .into_iter()
            .enumerate()
            .map(|(k, name)| IoGroup {
                name,
                kind: IoKind::Tensor,
                optional: false,
                first: k,
                len: 1,
            })
            .collect()
    }

    /// The ABI name of element `k` of a sequence `name`.
    pub fn element_name(name: &str, k: usize) -> String {
        format!("{name}[{k}]")
    }
}

impl Graph {
    pub fn new(name: impl Into<String>) -> Graph {
        Graph {
            name: name.into(),
            ..Default::default()
        }
    }

    /// Registers `v` as rows of a data-dependent op: along `axis`, only the first `count`
    /// (a scalar int64 value) of its `bound` slices are the result (`DataDim`, one slice
    /// per row).
    pub fn mark_rows(&mut self, v: ValueId, count: ValueId, bound: i64, axis: usize) {
        self.data_dims.insert(
            v,
            DataDim {
                count,
                bound,
                axis,
                per: 1,
            },
        );
    }

    /// Nodes in the graph (removed ones not counted).
    pub fn node_count(&self) -> usize {
        self.dag.node_count()
    }

    pub fn add_node(
        &mut self,
        name: String,
        op: Op,
        inputs: Vec<ValueId>,
        outputs: Vec<TypeInfo>,
        origin: Origin,
    ) -> NodeId {
        let id = NodeId(self.dag.add_node(Node {
            name,
            op,
            inputs,
            outputs,
            origin,
        }));
        self.added.push(id);
        self.link_inputs(id);
        id
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.dag[id.0]
    }

    /// Mutable access to a node's op, name and types; operands change via `set_inputs`.
    pub fn op_mut(&mut self, id: NodeId) -> &mut Op {
        &mut self.dag[id.0].op
    }

    pub fn contains(&self, id: NodeId) -> bool {
        self.dag.contains_node(id.0)
    }

    pub fn value_type(&self, v: ValueId) -> &TypeInfo {
        &self.dag[v.node.0].outputs[v.slot as usize]
    }

    pub fn const_value(&self, v: ValueId) -> Option<&Tensor> {
        match &self.node(v.node).op {
            Op::Const(t) => Some(t),
            _ => None,
        }
    }

    pub fn set_inputs(&mut self, id: NodeId, inputs: Vec<ValueId>) {
        let old: Vec<_> = self
            .dag
            .edges_directed(id.0, Direction::Incoming)
            .map(|e| e.id())
            .collect();
        for e in old {
            self.dag.remove_edge(e);
        }
        self.dag[id.0].inputs = inputs;
        self.link_inputs(id);
    }

    /// Adds the edges from node `id`'s operands (`Node::inputs`) to it.
    fn link_inputs(&mut self, id: NodeId) {
        for k in 0..self.dag[id.0].inputs.len() {
            let v = self.dag[id.0].inputs[k];
            self.dag.add_edge(
                v.node.0,
                id.0,
                Edge {
                    out_slot: v.slot,
                    in_index: k as u32,
                },
            );
        }
    }

    /// Replaces node `id`'s op and operands in place (types unchanged).
    pub fn replace_op(&mut self, id: NodeId, op: Op, inputs: Vec<ValueId>) {
        self.dag[id.0].op = op;
        self.set_inputs(id, inputs);
    }

    /// Consumers of any output of `id`: (consumer, operand index, producer slot).
    pub fn users(&self, id: NodeId) -> Vec<(NodeId, u32, u32)> {
        let mut u: Vec<_> = self
            .dag
            .edges_directed(id.0, Direction::Outgoing)
            .map(|e| (NodeId(e.target()), e.weight().in_index, e.weight().out_slot))
            .collect();
        u.sort();
        u
    }

    pub fn value_users(&self, v: ValueId) -> Vec<(NodeId, u32)> {
        self.users(v.node)
            .into_iter()
            .filter(|u| u.2 == v.slot)
            .map(|u| (u.0, u.1))
            .collect()
    }

    pub fn is_graph_output(&self, v: ValueId) -> bool {
        self.outputs.iter().any(|o| o.value == v)
    }

    /// Redirects every use of `old` (operands and graph outputs) to `new`.
    pub fn replace_uses(&mut self, old: ValueId, new: ValueId) {
        for (user, _) in self.value_users(old) {
            let inputs: Vec<ValueId> = self
                .node(user)
                .inputs
                .iter()
                .map(|&v| if v == old { new } else { v })
                .collect();
            self.set_inputs(user, inputs);
        }
        for o in &mut self.outputs {
            if o.value == old {
                o.value = new;
            }
        }
    }

    pub fn remove_node(&mut self, id: NodeId) {
        self.dag.remove_node(id.0);
    }

    /// Removes the nodes `dead`, which no remaining node reads, in time linear in the graph.
    ///
    /// Removing a node unlinks each of its edges from the other end's edge list, walked
    /// from its newest edge: a value read by N nodes among others cost O(N) per removed
    /// reader, O(N^2) for all (the select chain of If nested 18 deep: 82% of the compile
    /// time). Instead every edge is dropped at once and the remaining nodes' edges added
    /// again from their operands; the nodes, edge-less, are then removed in the given order,
    /// so that their slots are reused as `remove_node` one by one would leave them. Edge
    /// order means nothing: `users` sorts, `topo_order` orders by node.
    pub fn remove_nodes(&mut self, dead: &[NodeId]) {
        if dead.is_empty() {
            return;
        }
        self.dag.clear_edges();
        let dead_set: std::collections::HashSet<NodeId> = dead.iter().copied().collect();
        for id in self.node_ids() {
            if !dead_set.contains(&id) {
                self.link_inputs(id);
            }
        }
        for &id in dead {
            self.dag.remove_node(id.0);
        }
    }

    /// How many nodes have been added so far: a mark for `added_since`.
    pub fn added_count(&self) -> usize {
        self.added.len()
    }

    /// The nodes added after `mark` (an `added_count`) that still exist, in order.
    pub fn added_since(&self, mark: usize) -> Vec<NodeId> {
        self.added[mark.min(self.added.len())..]
            .iter()
            .copied()
            .filter(|&id| self.contains(id))
            .collect()
    }

    pub fn node_ids(&self) -> Vec<NodeId> {
        self.dag.node_indices().map(NodeId).collect()
    }

    pub fn len(&self) -> usize {
        self.dag.node_count()
    }

    pub fn is_empty(&self) -> bool {
        self.dag.node_count() == 0
    }

    /// Nodes in a topological order that is stable: among ready nodes, lowest id first.
    pub fn topo_order(&self) -> Vec<NodeId> {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut indeg: std::collections::HashMap<NodeIndex, usize> = self
            .dag
            .node_indices()
            .map(|n| (n, self.dag.edges_directed(n, Direction::Incoming).count()))
            .collect();
        let mut ready: BinaryHeap<Reverse<NodeIndex>> = indeg
            .iter()
            .filter(|(_, d)| **d == 0)
            .map(|(n, _)| Reverse(*n))
            .collect();
        let mut order = Vec::with_capacity(indeg.len());
        while let Some(Reverse(n)) = ready.pop() {
            order.push(NodeId(n));
            for e in self.dag.edges_directed(n, Direction::Outgoing) {
                let d = indeg.get_mut(&e.target()).expect("edge target is a node");
                *d -= 1;
                if *d == 0 {
                    ready.push(Reverse(e.target()));
                }
            }
        }
        order
    }

    /// Human-readable dump (`--emit graph`).
    pub fn dump(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "graph \"{}\" {{", self.name);
        let vname = |v: ValueId| {
            if v.slot == 0 {
                format!("%{}", v.node.index())
            } else {
                format!("%{}.{}", v.node.index(), v.slot)
            }
        };
        for id in self.topo_order() {
            let n = self.node(id);
            let args: Vec<String> = n.inputs.iter().map(|&v| vname(v)).collect();
            let tys: Vec<String> = n.outputs.iter().map(|t| t.to_string()).collect();
            let detail = match &n.op {
                Op::Input => format!("\"{}\"", n.name),
                Op::Const(t) => match t.splat_value() {
                    Some(v) if t.len() > 1 => format!("splat {v}"),
                    _ if t.len() <= 8 => format!(
                        "{:?}",
                        t.scalars()
                            .iter()
                            .map(|x| x.to_string())
                            .collect::<Vec<_>>()
                    ),
                    _ => format!("{} elements", t.len()),
                },
                Op::Map(m) => expr::display(&m.body),
                Op::Reduce(r) => format!(
                    "{:?} over {:?}: {}",
                    r.kind,
                    r.extents,
                    expr::display(&r.body)
                ),
                Op::Reshape => String::new(),
                Op::Concat { axis } => format!("axis={axis}"),
                Op::Scatter(sc) => format!(
                    "{:?} over {:?}: [{}] <- {}",
                    sc.kind,
                    sc.extents,
                    sc.index
                        .iter()
                        .map(expr::display)
                        .collect::<Vec<_>>()
                        .join(", "),
                    expr::display(&sc.value)
                ),
                Op::Assert { code } => format!("code {code}"),
                Op::Kernel(k) => k.attrs(),
                Op::Pool(p) => format!(
                    "{:?} kernel={:?} strides={:?} pads={:?}/{:?}",
                    p.kind, p.kernel, p.strides, p.pads_begin, p.pads_end
                ),
                Op::MatMul(m) => format!("trans_a={} trans_b={}", m.trans_a, m.trans_b),
                Op::Conv(c) => format!(
                    "group={} strides={:?} dilations={:?} pads={:?}/{:?}",
                    c.group, c.strides, c.dilations, c.pads_begin, c.pads_end
                ),
            };
            let origin = if n.origin.op_type.is_empty() || !n.origin.is_node() {
                String::new()
            } else {
                format!("  ; '{}' ({})", n.origin.name, n.origin.op_type)
            };
            let _ = writeln!(
                s,
                "  %{} = {}({}) : {} {{ {} }}{}",
                id.index(),
                n.op.name(),
                args.join(", "),
                tys.join(", "),
                detail,
                origin
            );
        }
        for o in &self.outputs {
            let _ = writeln!(s, "  output \"{}\" = {}", o.name, vname(o.value));
        }
        for a in &self.asserts {
            let _ = writeln!(s, "  assert %{}", a.index());
        }
        s.push_str("}\n");
        s
    }
}
