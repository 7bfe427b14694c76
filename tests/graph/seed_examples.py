"""The NNTile 2.0 plan's two Python examples (seed 003 §4.1.1 "Approach E" and §5.2), as
text copied from the seed, and what the tests need to run them with only the import
lines changed (`nntile` -> `nntile_spmd`):

- the names the seed's text uses without defining them (sizes, input_tensor,
  output_grad, seq_tile, ..., TileDistribution and DistributionPreset, which its import
  lines omit) come from a prelude;
- "checkpoint.pt" is written first (a PyTorch state dict of every parameter);
- the seed's node count, the literal 8, stays: its PhysicalGraph(logical, num_nodes=8)
  plans 8 nodes, folded onto the world's 1, 2 or 4 ranks (node n on rank n % size,
  docs/seed_api.md), so embed_dim is 16: the TP graph's embed_tile // 8 makes the
  [1, 8] grid its block_along_dim(grid_shape=[1, 8], ...) states.

For references only, run_example can also run Approach E in fp64 or with its
PhysicalGraphs on another world (nt.SimulatedWorld(8): the unfolded 8-node run). Also a
reference of the example's layer in NumPy and the same layer built by code
(`layer_graph`) for the cross-rank-count and cross-preset tests.
"""

import math

import numpy as np

APPROACH_E = '''\
import nntile
from nntile.graph import LogicalGraph, PhysicalGraph, ExecutableGraph
from nntile.graph import TensorSpec, OpSpec, DistributionStrategy, TilingStrategy

nntile.init(mpi=True)

# ═══════════════════════════════════════════════════════════════
# Stage 1: Logical Graph (what to compute)
# ═══════════════════════════════════════════════════════════════
logical = LogicalGraph("transformer_layer")

# Declare logical tensors (shapes only, no tiling/distribution)
x = logical.input(
    TensorSpec(shape=[seq_len, batch_size, embed_dim], dtype="fp32"),
    name="input"
)
wq = logical.parameter(
    TensorSpec(shape=[embed_dim, embed_dim], dtype="fp32"),
    name="W_query"
)
wk = logical.parameter(
    TensorSpec(shape=[embed_dim, embed_dim], dtype="fp32"),
    name="W_key"
)
wv = logical.parameter(
    TensorSpec(shape=[embed_dim, embed_dim], dtype="fp32"),
    name="W_value"
)
wo = logical.parameter(
    TensorSpec(shape=[embed_dim, embed_dim], dtype="fp32"),
    name="W_out"
)

# Define operations (logical, no tiling decisions)
q = logical.matmul(x, wq, name="query_proj")
k = logical.matmul(x, wk, name="key_proj")
v = logical.matmul(x, wv, name="value_proj")
attn = logical.scaled_dot_product_attention(q, k, v, name="attention")
out = logical.matmul(attn, wo, name="output_proj")
out = logical.add(out, x, name="residual")  # Residual connection

output = logical.output(out, name="output")

# Graph analysis available
print(f"Operations: {logical.num_operations()}")
print(f"Parameters: {logical.num_parameters()}")
print(f"FLOPs: {logical.estimate_flops()}")

# ═══════════════════════════════════════════════════════════════
# Stage 2: Physical Graph (how to tile and distribute)
# ═══════════════════════════════════════════════════════════════

# Option A: FSDP - shard parameters across all nodes
physical_fsdp = PhysicalGraph(logical, num_nodes=8)
physical_fsdp.set_tiling(TilingStrategy.auto_tiling(target_tile_bytes=64*1024*1024))
# Distribute parameter tiles round-robin across nodes
for param_name in ["W_query", "W_key", "W_value", "W_out"]:
    physical_fsdp.set_tensor_distribution(
        param_name,
        TileDistribution.round_robin(8)
    )
physical_fsdp.compile()

# Option B: DDP style - parameters distributed by batch dimension
physical_ddp = PhysicalGraph(logical, num_nodes=8)
physical_ddp.set_tiling(TilingStrategy.auto_tiling(target_tile_bytes=64*1024*1024))
# Each node owns tiles for its portion of the batch
DistributionPreset.apply_ddp(physical_ddp, num_nodes=8)
physical_ddp.compile()

# Option C: Tensor Parallel - shard hidden dimension across nodes
physical_tp = PhysicalGraph(logical, num_nodes=8)
physical_tp.set_tiling(TilingStrategy.manual({
    "input": [seq_tile, batch_tile, embed_tile],
    "W_query": [embed_tile, embed_tile // 8],  # 8 tiles along output dim
    "W_key": [embed_tile, embed_tile // 8],
    "W_value": [embed_tile, embed_tile // 8],
    "W_out": [embed_tile // 8, embed_tile],
}))
# Distribute weight tiles: each node owns one column/row slice
for param_name in ["W_query", "W_key", "W_value"]:
    physical_tp.set_tensor_distribution(
        param_name,
        TileDistribution.block_along_dim(grid_shape=[1, 8], dim=1, num_nodes=8)
    )
physical_tp.compile()

# Compare memory usage
print(f"FSDP memory per node: {physical_fsdp.memory_on_node(0) / 1e9:.2f} GB")
print(f"DDP memory per node: {physical_ddp.memory_on_node(0) / 1e9:.2f} GB")
print(f"TP memory per node: {physical_tp.memory_on_node(0) / 1e9:.2f} GB")

# ═══════════════════════════════════════════════════════════════
# Stage 3: Executable Graph (bind to runtime and execute)
# ═══════════════════════════════════════════════════════════════

# Create executable from physical graph
exe = ExecutableGraph(physical_fsdp)

# Load parameters (distributed according to physical graph)
exe.load_parameters("checkpoint.pt")

# Or initialize randomly
exe.init_parameters("xavier_uniform")

# Bind input data
exe.bind_input("input", input_tensor)

# Execute forward pass
exe.execute()

# Get output
output = exe.get_output("output")

# Execute backward pass (if gradients needed)
exe.bind_output_grad("output", output_grad)
exe.backward()

# Access gradients
w_query_grad = exe.get_parameter_grad("W_query")
'''

SECTION_5_2 = '''\
import nntile
from nntile.graph import ComputeGraph, DistributionStrategy, ExecutionPolicy

# Initialize NNTile with MPI
nntile.init(mpi=True)

# Define computation graph
graph = ComputeGraph("transformer_block")

# Declare tensors
x = graph.input([seq_len, batch_size, embed_dim], name="input")
wq = graph.parameter([embed_dim, embed_dim], name="W_query")
wk = graph.parameter([embed_dim, embed_dim], name="W_key")
wv = graph.parameter([embed_dim, embed_dim], name="W_value")
wo = graph.parameter([embed_dim, embed_dim], name="W_out")
gamma = graph.parameter([embed_dim], name="ln_gamma")
beta = graph.parameter([embed_dim], name="ln_beta")

# Define computation
q = graph.matmul(x, wq)
k = graph.matmul(x, wk)
v = graph.matmul(x, wv)
attn = graph.scaled_dot_product_attention(q, k, v)
out = graph.matmul(attn, wo)
out = graph.add(out, x)  # Residual
out = graph.layer_norm(out, gamma, beta)

# Configure for 8 nodes
# (distribution configured at PhysicalGraph level, not LogicalGraph)

policy = ExecutionPolicy()
policy.placement = "owner_computes"
policy.enable_offloading = True
graph.set_execution_policy(policy)

# Instantiate - creates actual tensors with proper tiling
instance = graph.instantiate()

# Load weights
instance.load_parameters("checkpoint.pt")

# Execute
instance.execute()

# Get outputs
output = instance.get_tensor("output")

nntile.shutdown()
'''

SIZES = {"seq_len": 5, "batch_size": 3, "embed_dim": 16}   # 16: the seed's 8 TP slices of 2
EMBED = SIZES["embed_dim"]
PARAMETERS = {"W_query": (EMBED, EMBED), "W_key": (EMBED, EMBED), "W_value": (EMBED, EMBED),
              "W_out": (EMBED, EMBED), "ln_gamma": (EMBED,), "ln_beta": (EMBED,)}
SEED_NODES = 8                                    # the seed's num_nodes
PHYSICAL_GRAPH_CALL = "PhysicalGraph(logical, num_nodes=8)"   # three in Approach E


def with_our_imports(text: str) -> str:
    """The seed's text with its import lines naming this package."""
    return (text.replace("import nntile\n", "import nntile_spmd as nntile\n")
            .replace("from nntile.graph import", "from nntile_spmd.graph import"))


def example_inputs(dtype=np.float32, seed=0) -> dict:
    rng = np.random.default_rng(seed)
    shape = (SIZES["seq_len"], SIZES["batch_size"], SIZES["embed_dim"])
    return {"input_tensor": rng.standard_normal(shape).astype(dtype),
            "output_grad": rng.standard_normal(shape).astype(dtype)}


def write_checkpoint(path, dtype="float32", seed=1) -> dict:
    """A PyTorch state dict of every parameter of both examples; the arrays written."""
    import torch
    rng = np.random.default_rng(seed)
    arrays = {name: (rng.standard_normal(shape) * 0.3).astype(dtype)
              for name, shape in PARAMETERS.items()}
    torch.save({name: torch.from_numpy(array) for name, array in arrays.items()}, path)
    return arrays


def run_example(text: str, dtype=None, world=None) -> dict:
    """Execute an example (cwd must hold checkpoint.pt) as written but for its import
    lines; its namespace after the run. For references only: `dtype="fp64"` replaces
    the example's fp32, `world` (e.g. nt.SimulatedWorld(8)) is passed as comm= to
    Approach E's three PhysicalGraphs (instead of MPI.COMM_WORLD)."""
    import nntile_spmd as nt
    array_dtype = np.float64 if dtype == "fp64" else np.float32
    namespace = {**SIZES, **example_inputs(array_dtype), "seq_tile": 3, "batch_tile": 2,
                 "embed_tile": EMBED, "TileDistribution": nt.TileDistribution,
                 "DistributionPreset": nt.DistributionPreset, "REFERENCE_WORLD": world}
    source = with_our_imports(text)
    if dtype is not None:
        source = source.replace('"fp32"', f'"{dtype}"')
    if world is not None:
        assert source.count(PHYSICAL_GRAPH_CALL) == 3, "Approach E's PhysicalGraphs moved"
        source = source.replace(PHYSICAL_GRAPH_CALL,
                                PHYSICAL_GRAPH_CALL[:-1] + ", comm=REFERENCE_WORLD)")
    exec(compile(source, "<seed example>", "exec"), namespace)
    return namespace


# -- a NumPy reference of the example's layer (the seed's [seq, batch, dim] layout) ----
def softmax0(s):
    e = np.exp(s - s.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def attention(q, k, v):
    """One head: scores[key, query, batch], softmax over the keys, scale 1/sqrt(dim)."""
    scores = np.einsum("qbd,kbd->kqb", q, k) / math.sqrt(q.shape[-1])
    return np.einsum("kqb,kbd->qbd", softmax0(scores), v)


def layer(x, p):
    """The Approach E layer: attention of x's projections, projected, plus x."""
    q, k, v = (np.tensordot(x, p[name], axes=1) for name in ("W_query", "W_key", "W_value"))
    return np.tensordot(attention(q, k, v), p["W_out"], axes=1) + x


def layer_norm_last(y, gamma, beta, eps=1e-5):
    mean = y.mean(axis=-1, keepdims=True)
    var = ((y - mean) ** 2).mean(axis=-1, keepdims=True)
    return (y - mean) / np.sqrt(var + eps) * gamma + beta


def layer_graph(dtype="fp64"):
    """The Approach E layer built by code (same names), for preset sweeps."""
    import nntile_spmd as nt
    g = nt.LogicalGraph("layer")
    shape = [SIZES["seq_len"], SIZES["batch_size"], SIZES["embed_dim"]]
    x = g.input(nt.TensorSpec(shape, dtype), "input")
    weights = [g.parameter(nt.TensorSpec(PARAMETERS[name], dtype), name)
               for name in ("W_query", "W_key", "W_value", "W_out")]
    q, k, v = (g.matmul(x, w) for w in weights[:3])
    out = g.add(g.matmul(g.scaled_dot_product_attention(q, k, v), weights[3]), x)
    g.output(out, "output")
    return g
