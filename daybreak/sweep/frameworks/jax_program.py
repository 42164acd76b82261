"""ResNet-50 v1.5 and BERT-base (masked-LM head) training steps in JAX / Flax (linen) + optax, timed by daybreak's
throughput protocol (throughput_log). Written the way Flax's own examples write them: modules with
``@nn.compact`` and ``functools.partial`` for the conv / norm defaults (examples/imagenet/models.py), a
``TrainState`` carrying the batch statistics, ``jax.value_and_grad`` with the mutable ``batch_stats`` as aux, and
one ``jax.jit``-compiled step with the state donated (examples/imagenet/train.py). BERT's layer layout follows the
Flax BERT of the Hugging Face port (Dense query/key/value, the decoder tied to the word embeddings through
``Embed.attend``).

XLA always, over the whole step (JAX has no eager training path worth timing: `--compile off` is reported
unsupported). AMP bf16 is Flax's ``dtype=bfloat16`` (computation) with float32 parameters; fp32 is true fp32
(``jax_default_matmul_precision`` "highest": on Ampere and later GPUs XLA's default runs fp32 matmuls in TF32).
The dropout key of each step is folded from the step counter inside the compiled step (no per-step host work).
Several devices: the batch is sharded over a 1-D mesh and the state replicated (on a CPU, XLA's host platform is
split into that many devices).

The device is JAX's platform, chosen before JAX starts (``JAX_PLATFORMS``: cpu, or cuda; a jaxlib without CUDA
fails the configuration with one line). Threads: XLA's CPU runtime has no thread-count option; it sizes its
thread pool from the process's CPU affinity (tsl::port::MaxParallelism), so the program restricts its affinity to
``--threads`` cores before JAX starts, and at one thread also turns off Eigen's multi-threading
(``--xla_cpu_multi_thread_eigen=false``); it reports the pool size it leaves XLA.
"""

import os
import sys
from functools import partial
from typing import Any

import reference as ref

OPTS = ref.options()


def _setup_before_jax(opts: Any) -> str | None:
    """The platform and threads, which JAX reads when it starts; a reason when the threads cannot be applied."""
    os.environ["JAX_PLATFORMS"] = "cuda" if opts.device == "cuda" else "cpu"
    flags = os.environ.get("XLA_FLAGS", "")
    if opts.devices > 1:  # a CPU becomes OPTS.devices host devices (ignored by GPU platforms)
        flags += f" --xla_force_host_platform_device_count={opts.devices}"
    if opts.device == "cpu" and opts.threads == 1:
        flags += " --xla_cpu_multi_thread_eigen=false"
    os.environ["XLA_FLAGS"] = flags.strip()
    if opts.device != "cpu" or not hasattr(os, "sched_setaffinity"):
        return None
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < opts.threads:
        return f"asked for {opts.threads} threads, this process may run on {len(cores)} core(s)"
    os.sched_setaffinity(0, cores[:opts.threads])
    return None


THREADS_PROBLEM = _setup_before_jax(OPTS)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpy.typing as npt  # noqa: E402
import optax  # noqa: E402
from flax import linen as nn  # noqa: E402
from flax.training import train_state  # noqa: E402

STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))
PyTree = Any  # nested dicts of arrays: Flax variables, parameters, gradients


class Bottleneck(nn.Module):
    width: int
    stride: int
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        conv = partial(nn.Conv, use_bias=False, dtype=self.dtype,
                       kernel_init=nn.initializers.variance_scaling(2.0, "fan_out", "normal"))
        norm = partial(nn.BatchNorm, use_running_average=not train, momentum=1 - ref.BN["momentum"],
                       epsilon=ref.BN["eps"], dtype=self.dtype, use_fast_variance=False)
        s = (self.stride, self.stride)
        y = nn.relu(norm(name="bn1")(conv(self.width, (1, 1), padding="VALID", name="conv1")(x)))
        y = nn.relu(norm(name="bn2")(conv(self.width, (3, 3), s, padding=((1, 1), (1, 1)), name="conv2")(y)))  # v1.5
        y = norm(name="bn3", scale_init=nn.initializers.zeros)(conv(self.width * 4, (1, 1), padding="VALID",
                                                                    name="conv3")(y))
        residual = x
        if x.shape[-1] != self.width * 4 or self.stride != 1:
            residual = norm(name="downsample_1")(conv(self.width * 4, (1, 1), s, padding="VALID",
                                                      name="downsample_0")(x))
        return nn.relu(y + residual)


class ResNet50(nn.Module):
    num_classes: int = ref.NUM_CLASSES
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True, dropout: bool = False,
                 positions: jax.Array | None = None) -> jax.Array:
        x = nn.Conv(64, (7, 7), (2, 2), padding=((3, 3), (3, 3)), use_bias=False, dtype=self.dtype,
                    kernel_init=nn.initializers.variance_scaling(2.0, "fan_out", "normal"), name="conv1")(x)
        x = nn.BatchNorm(use_running_average=not train, momentum=1 - ref.BN["momentum"], epsilon=ref.BN["eps"],
                         dtype=self.dtype, use_fast_variance=False, name="bn1")(x)
        x = nn.max_pool(nn.relu(x), (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))
        for i, (width, blocks, stride) in enumerate(STAGES, 1):
            for j in range(blocks):
                x = Bottleneck(width, stride if j == 0 else 1, self.dtype, name=f"layer{i}_{j}")(x, train)
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.num_classes, dtype=self.dtype, name="fc")(x)


class BertLayer(nn.Module):
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, dropout: bool) -> jax.Array:
        c = ref.BERT
        dense = partial(nn.Dense, dtype=self.dtype, kernel_init=nn.initializers.normal(0.02))
        norm = partial(nn.LayerNorm, epsilon=c["ln_eps"], dtype=self.dtype)
        drop = partial(nn.Dropout, rate=c["dropout"], deterministic=not dropout)
        b, length, hidden = x.shape
        heads, dim = c["heads"], hidden // c["heads"]

        def split(t: jax.Array) -> jax.Array:
            return t.reshape(b, length, heads, dim)

        q, k, v = (split(dense(hidden, name=n)(x)) for n in ("query", "key", "value"))
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(dim).astype(self.dtype)
        probs = drop()(jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(self.dtype))
        context = jnp.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, length, hidden)
        x = norm(name="attention_LayerNorm")(x + drop()(dense(hidden, name="attention_dense")(context)))
        h = nn.gelu(dense(c["intermediate"], name="intermediate")(x), approximate=False)
        return norm(name="output_LayerNorm")(x + drop()(dense(hidden, name="output")(h)))


class BertForMaskedLM(nn.Module):
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, ids: jax.Array, train: bool = True, dropout: bool = True,
                 positions: jax.Array | None = None) -> jax.Array:
        c = ref.BERT
        init = nn.initializers.normal(0.02)
        embed = nn.Embed(ref.VOCAB, c["hidden"], embedding_init=init, dtype=self.dtype, name="word_embeddings")
        position_table = self.param("position_embeddings", init, (c["positions"], c["hidden"]))
        types = self.param("token_type_embeddings", init, (c["types"], c["hidden"]))
        x = embed(ids) + position_table[: ids.shape[1]].astype(self.dtype) + types[0].astype(self.dtype)
        x = nn.LayerNorm(epsilon=c["ln_eps"], dtype=self.dtype, name="embeddings_LayerNorm")(x)
        x = nn.Dropout(c["dropout"], deterministic=not dropout)(x)
        for i in range(c["layers"]):
            x = BertLayer(self.dtype, name=f"layer_{i}")(x, dropout)
        if positions is not None:  # the masked positions only, as BERT's pre-training (gather_indexes)
            x = jnp.take_along_axis(x, positions[..., None], axis=1)
        h = nn.gelu(nn.Dense(c["hidden"], dtype=self.dtype, kernel_init=init, name="transform_dense")(x),
                    approximate=False)
        h = nn.LayerNorm(epsilon=c["ln_eps"], dtype=self.dtype, name="transform_LayerNorm")(h)
        bias = self.param("decoder_bias", nn.initializers.zeros, (ref.VOCAB,))
        return embed.attend(h) + bias.astype(self.dtype)  # the decoder is the word-embedding matrix (tied)


# --- daybreak's PyTorch weights -> Flax variables ----------------------------------------------------------------


def _torch_to_flax_resnet(w: dict[str, npt.NDArray[Any]]) -> PyTree:
    params: dict[str, Any] = {}
    stats: dict[str, Any] = {}

    def put(tree: dict[str, Any], path: list[str], value: npt.NDArray[Any]) -> None:
        for key in path[:-1]:
            tree = tree.setdefault(key, {})
        tree[path[-1]] = jnp.asarray(value)

    for name, value in w.items():
        parts = name.split(".")
        if parts[-1] == "num_batches_tracked":
            continue
        if parts[0].startswith("layer"):  # layer1.0.conv1.weight -> layer1_0 / conv1; downsample.0 -> downsample_0
            parts = [f"{parts[0]}_{parts[1]}", "_".join(parts[2:-1]), parts[-1]]
        module, leaf = parts[:-1], parts[-1]
        if leaf == "weight" and value.ndim == 4:
            put(params, module + ["kernel"], value.transpose(2, 3, 1, 0))  # OIHW -> HWIO
        elif leaf == "weight" and value.ndim == 2:
            put(params, module + ["kernel"], value.T)
        elif leaf == "weight":
            put(params, module + ["scale"], value)
        elif leaf == "bias":
            put(params, module + ["bias"], value)
        elif leaf == "running_mean":
            put(stats, module + ["mean"], value)
        elif leaf == "running_var":
            put(stats, module + ["var"], value)
    return {"params": params, "batch_stats": stats}


def _torch_to_flax_bert(w: dict[str, npt.NDArray[Any]]) -> PyTree:
    def dense(p: str) -> dict[str, jax.Array]:
        return {"kernel": jnp.asarray(w[p + ".weight"].T), "bias": jnp.asarray(w[p + ".bias"])}

    def norm(p: str) -> dict[str, jax.Array]:
        return {"scale": jnp.asarray(w[p + ".weight"]), "bias": jnp.asarray(w[p + ".bias"])}

    e = "bert.embeddings."
    params: dict[str, Any] = {"word_embeddings": {"embedding": jnp.asarray(w[e + "word_embeddings.weight"])},
                              "position_embeddings": jnp.asarray(w[e + "position_embeddings.weight"]),
                              "token_type_embeddings": jnp.asarray(w[e + "token_type_embeddings.weight"]),
                              "embeddings_LayerNorm": norm(e + "LayerNorm"),
                              "transform_dense": dense("cls.predictions.transform.dense"),
                              "transform_LayerNorm": norm("cls.predictions.transform.LayerNorm"),
                              "decoder_bias": jnp.asarray(w["cls.predictions.bias"])}
    for i in range(ref.BERT["layers"]):
        t = f"bert.encoder.layer.{i}."
        params[f"layer_{i}"] = {
            "query": dense(t + "attention.self.query"), "key": dense(t + "attention.self.key"),
            "value": dense(t + "attention.self.value"), "attention_dense": dense(t + "attention.output.dense"),
            "attention_LayerNorm": norm(t + "attention.output.LayerNorm"),
            "intermediate": dense(t + "intermediate.dense"), "output": dense(t + "output.dense"),
            "output_LayerNorm": norm(t + "output.LayerNorm")}
    return {"params": params}


# --- the training step -------------------------------------------------------------------------------------------

class TrainState(train_state.TrainState):
    batch_stats: PyTree


def step_flops(lowered: Any, compiled: Any, n_devices: int) -> int | None:
    """One device's FLOPs per step: the larger of XLA's two estimates. The compiled program's (one device's, after
    XLA's passes) is the closer one on a CPU (within 2% of PyTorch's count for both models), but on a GPU its
    convolutions and matmuls become cuDNN/cuBLAS custom calls that XLA's cost analysis counts as 0 FLOPs (an H200
    showed a ResNet-50 step at 1/59 of its FLOPs); the lowered program's (the whole step as written, before the
    passes and the partitioning, so divided by the devices) counts them wherever it runs (2.5% under PyTorch's
    for ResNet-50 on a CPU)."""
    counts = []
    for stage, share in ((lowered, n_devices), (compiled, 1)):
        try:
            cost = stage.cost_analysis()
        except Exception:  # noqa: BLE001 - a backend without cost analysis: the other stage, else unknown
            continue
        cost = cost[0] if isinstance(cost, (list, tuple)) else cost
        if cost and cost.get("flops"):
            counts.append(int(cost["flops"] / share))
    return max(counts) if counts else None


def loss_of(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """The mean cross-entropy: over the images, or over the masked tokens (the only ones BERT's head scores)."""
    return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), labels).mean()


def main() -> int:
    opts = OPTS
    if not ref.check(opts, "jax", compiler_off_ok=False, several_devices=True, why={
            "compile_off": "JAX always compiles with XLA (jax.jit): there is no compiler-off JAX to time",
            "amp": f"JAX: AMP {opts.amp} is not supported by this program (bf16 only)"}):
        return 0
    if THREADS_PROBLEM:
        return int(ref.fail(opts, f"jax: {THREADS_PROBLEM}"))
    try:
        devices = jax.devices()[: opts.devices]
    except Exception as e:  # noqa: BLE001 - JAX_PLATFORMS names a platform this jaxlib does not have (JAX raises
        # a RuntimeError or, for a platform it has never heard of, an AssertionError)
        why = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}" if str(e) else type(e).__name__
        return int(ref.fail(opts, f"asked for {opts.device}: jax {jax.__version__} has no such backend here ({why}; "
                                  "a CUDA jaxlib: pip install 'jax[cuda12]')"))
    platform = devices[0].platform
    if len(devices) < opts.devices:
        ref.tl.unsupported(f"JAX sees {len(jax.devices())} {platform} device(s), {opts.devices} asked")
        return 0
    if opts.amp == "off":
        jax.config.update("jax_default_matmul_precision", "highest")  # true fp32, not TF32
    dtype = jnp.bfloat16 if opts.amp == "bf16" else jnp.float32
    model = ResNet50(dtype=dtype) if opts.model == "resnet50" else BertForMaskedLM(dtype=dtype)
    batch = ref.synthetic_batch(opts)
    x_np = batch.x.transpose(0, 2, 3, 1) if opts.model == "resnet50" else batch.x  # NCHW -> NHWC, Flax's layout
    rng = jax.random.PRNGKey(0)
    weights = ref.torch_weights(opts)
    if weights is not None:
        variables = (_torch_to_flax_resnet if opts.model == "resnet50" else _torch_to_flax_bert)(weights)
    else:
        variables = jax.jit(partial(model.init, train=False, dropout=False))(rng, jnp.asarray(x_np[:1]))
    if opts.model == "resnet50":
        tx = optax.chain(optax.add_decayed_weights(ref.SGD["weight_decay"]),  # L2 in the gradient, as torch's SGD
                         optax.sgd(ref.SGD["lr"], momentum=ref.SGD["momentum"]))
    else:
        a = ref.ADAMW
        tx = optax.adamw(a["lr"], b1=a["b1"], b2=a["b2"], eps=a["eps"], weight_decay=a["weight_decay"])
    state = TrainState.create(apply_fn=model.apply, params=variables["params"], tx=tx,
                              batch_stats=variables.get("batch_stats", {}))
    has_stats = bool(state.batch_stats)

    def forward(params: PyTree, batch_stats: PyTree, x: jax.Array, positions: jax.Array | None, key: jax.Array,
                dropout: bool) -> tuple[jax.Array, PyTree]:
        v = {"params": params, **({"batch_stats": batch_stats} if has_stats else {})}
        if has_stats:
            logits, updates = model.apply(v, x, train=True, dropout=dropout, positions=positions,
                                          mutable=["batch_stats"], rngs={"dropout": key})
            return logits, updates
        return model.apply(v, x, train=True, dropout=dropout, positions=positions, rngs={"dropout": key}), {}

    def train_step(state: TrainState, x: jax.Array, y: jax.Array, positions: jax.Array | None,
                   dropout: bool) -> tuple[TrainState, jax.Array]:
        key = jax.random.fold_in(rng, state.step)  # a new dropout key every step, on the device

        def loss_fn(params: PyTree) -> tuple[jax.Array, PyTree]:
            logits, updates = forward(params, state.batch_stats, x, positions, key, dropout)
            return loss_of(logits, y), updates

        (loss, updates), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        state = state.apply_gradients(grads=grads, batch_stats=updates.get("batch_stats", state.batch_stats))
        return state, loss

    mesh = jax.sharding.Mesh(np.array(devices), ("data",))
    batch_sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    state = jax.device_put(state, replicated)
    x, y = jax.device_put(jnp.asarray(x_np), batch_sharding), jax.device_put(jnp.asarray(batch.y), batch_sharding)
    positions = None if batch.positions is None else jax.device_put(jnp.asarray(batch.positions), batch_sharding)
    dropout = not opts.describe  # the equivalence figures: dropout off
    lowered = jax.jit(partial(train_step, dropout=dropout), donate_argnums=0).lower(state, x, y, positions)
    compiled = lowered.compile()
    flops = step_flops(lowered, compiled, len(devices))

    if opts.describe:
        params = sum(p.size for p in jax.tree_util.tree_leaves(state.params))
        losses = []
        for _ in range(opts.check_steps + 1):
            state, loss = compiled(state, x, y, positions)
            losses.append(float(loss))
        ref.describe(params, flops, losses, framework="jax", version=jax.__version__)
        return 0

    holder: dict[str, Any] = {"state": state, "loss": None}

    def step() -> None:
        holder["state"], holder["loss"] = compiled(holder["state"], x, y, positions)

    def sync() -> float | None:
        jax.block_until_ready(holder["state"])
        return None if holder["loss"] is None else float(holder["loss"])

    threads = len(os.sched_getaffinity(0)) if platform == "cpu" and hasattr(os, "sched_getaffinity") else opts.threads
    ref.run(opts, step, sync, framework="jax", version=jax.__version__, compiler="XLA", flops_per_step=flops,
            device=platform, device_name=devices[0].device_kind, threads=threads,
            math_precision="bf16" if opts.amp == "bf16" else "fp32", layout="NHWC")
    return 0


if __name__ == "__main__":
    sys.exit(main())
