"""ResNet-50 v1.5 and BERT-base (masked-LM head) training steps in Apache MXNet 1.9 Gluon, timed by daybreak's
throughput protocol (throughput_log). Written the way GluonCV and GluonNLP write them: ``HybridBlock`` models in NCHW
with ``Conv2D(use_bias=False)`` + ``BatchNorm``, the masked-LM decoder sharing the word-embedding parameter
(``prefix=..., params=...``), ``gluon.Trainer`` with MXNet's SGD (momentum, weight decay in the gradient, as
torch.optim.SGD) for ResNet and AdamW for BERT, and the step ``with autograd.record(): loss = net(...)``,
``loss.backward()``, ``trainer.step(1)`` (the loss is already the batch mean).

MXNet 1.9 needs NumPy < 1.24, so this program runs in its own interpreter (scripts/mxnet-venv.sh makes it;
``daybreak throughput --frameworks mxnet`` runs this file with ``DAYBREAK_MXNET_PYTHON``, default
``.venv-mxnet/bin/python``).

The compiler: ``--compile on`` is Gluon's ``hybridize(static_alloc=True, static_shape=True)`` over the model AND the
loss (one block): forward, loss and backward run as one cached graph (CachedOp) with its memory planned once;
Gluon 1.x has no graph for the trainer, so the optimizer's updates run as MXNet's fused update operators
(multi_sgd_mom_update over 4 parameters at a time; adamw_update per parameter) outside it - the row says so.
``off`` is imperative Gluon (every operator dispatched from Python, MXNet's engine running them asynchronously).

AdamW: Gluon 1.x has no AdamW optimizer, only the operator ``adamw_update`` (w -= eta (lr m / (sqrt(v) + eps) +
wd w), no bias correction); the optimizer here calls it with torch.optim.AdamW's bias correction folded in (lr x
sqrt(1 - b2^t) / (1 - b1^t), eps x sqrt(1 - b2^t)), which is exactly PyTorch's update.

Precision: fp32 is fp32 (on a CPU oneDNN's and OpenBLAS' fp32 kernels; on a GPU ``NVIDIA_TF32_OVERRIDE=0``, as in
every reference program). AMP is MXNet's own (``mxnet.contrib.amp``): bf16 on a CPU (its lists cast Convolution and
FullyConnected to bfloat16 and keep BatchNorm, softmax and the rest fp32; oneDNN's bf16 kernels), fp16 on a GPU
(with its dynamic loss scaler); fp16 on a CPU and bf16 on a GPU are not MXNet AMP's (its CPU types are bfloat16 and
float32; bfloat16 is oneDNN's): unsupported.

Threads: MXNet reads them when it starts, so they are set before the import: ``OMP_NUM_THREADS`` and
``MXNET_OMP_MAX_THREADS`` (the OpenMP threads of one operator: oneDNN's and MXNet's own kernels), and
``MXNET_CPU_WORKER_NTHREADS`` (the engine's CPU workers, how many operators run at once: its inter-op threads);
then ``MXSetNumOMPThreads``. The start record reports OpenMP's ``omp_get_max_threads()`` read back from the libgomp
MXNet runs with, and daybreak checks the process's CPU time against it. The device: ``mx.cpu()`` or ``mx.gpu()``;
a CUDA run needs a GPU build (``pip install mxnet-cu117==1.9.1`` in the MXNet environment), else it fails with one
line.

The FLOPs of a step are 3x those of its forward pass's Convolution, FullyConnected and batch_dot operators, counted on
MXNet's own symbolic graph of the model with the shapes MXNet infers (``infer_shape``): a matmul's or convolution's
backward is twice its forward.
"""

import ctypes
import json
import math
import os
import subprocess
import sys
from typing import Any

import reference as ref

OPTS = ref.options()
if OPTS.device == "cpu":  # before MXNet starts: it sizes its OpenMP and engine threads from these
    for name in ("OMP_NUM_THREADS", "MXNET_OMP_MAX_THREADS", "OPENBLAS_NUM_THREADS", "MXNET_CPU_WORKER_NTHREADS"):
        os.environ[name] = str(OPTS.threads)
    os.environ["MXNET_CPU_PRIORITY_NTHREADS"] = "1"  # the engine's priority workers (kvstore traffic): idle here
if OPTS.amp == "off":  # before cuBLAS and cuDNN load: fp32 is fp32, as in every reference program
    os.environ["NVIDIA_TF32_OVERRIDE"] = "0"

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402
import numpy.typing as npt  # noqa: E402
from mxnet import autograd, gluon  # noqa: E402
from mxnet.gluon import nn  # noqa: E402

STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))
COUNTED_OPS = ("Convolution", "FullyConnected", "batch_dot")


# --- ResNet-50 v1.5 (GluonCV's layout; PyTorch's names, so daybreak's weights load by name) ------------------

def conv(c_in: int, c_out: int, k: int, stride: int = 1) -> nn.Conv2D:
    return nn.Conv2D(c_out, k, strides=stride, padding=k // 2, use_bias=False, in_channels=c_in,
                     weight_initializer=mx.init.MSRAPrelu(factor_type="out", slope=0.0))  # Kaiming normal, fan out


def bn(c: int, zero: bool = False) -> nn.BatchNorm:
    return nn.BatchNorm(momentum=1 - ref.BN["momentum"], epsilon=ref.BN["eps"], in_channels=c,
                        gamma_initializer="zeros" if zero else "ones")


class Bottleneck(gluon.HybridBlock):
    def __init__(self, c_in: int, width: int, stride: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.conv1, self.bn1 = conv(c_in, width, 1), bn(width)
            self.conv2, self.bn2 = conv(width, width, 3, stride), bn(width)  # v1.5: the stride in the 3x3
            self.conv3, self.bn3 = conv(width, width * 4, 1), bn(width * 4, zero=True)
            self.downsample = None
            if stride != 1 or c_in != width * 4:
                self.downsample = nn.HybridSequential()
                self.downsample.add(conv(c_in, width * 4, 1, stride), bn(width * 4))

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        shortcut = x if self.downsample is None else self.downsample(x)
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        return F.relu(self.bn3(self.conv3(y)) + shortcut)


class ResNet50(gluon.HybridBlock):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.conv1, self.bn1 = conv(3, 64, 7, 2), bn(64)
            self.maxpool = nn.MaxPool2D(3, strides=2, padding=1)
            c_in = 64
            for i, (width, blocks, stride) in enumerate(STAGES, 1):
                stage = nn.HybridSequential()
                for j in range(blocks):
                    stage.add(Bottleneck(c_in if j == 0 else width * 4, width, stride if j == 0 else 1))
                setattr(self, f"layer{i}", stage)
                c_in = width * 4
            self.avgpool = nn.GlobalAvgPool2D()
            bound = 1 / math.sqrt(c_in)  # torch.nn.Linear's default initialization
            self.fc = nn.Dense(ref.NUM_CLASSES, in_units=c_in, weight_initializer=mx.init.Uniform(bound),
                               bias_initializer=mx.init.Uniform(bound))

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(F.flatten(self.avgpool(x)))


# --- BERT-base with the masked-LM head (GluonNLP's layout; PyTorch's names) ------------------------------------

def dense(n_in: int, n_out: int) -> nn.Dense:
    return nn.Dense(n_out, in_units=n_in, flatten=False, weight_initializer=mx.init.Normal(0.02))


def layer_norm(c: dict[str, Any]) -> nn.LayerNorm:
    return nn.LayerNorm(epsilon=c["ln_eps"], in_channels=c["hidden"])


def embedding(rows: int, c: dict[str, Any]) -> nn.Embedding:
    return nn.Embedding(rows, c["hidden"], weight_initializer=mx.init.Normal(0.02))


class Embeddings(gluon.HybridBlock):
    def __init__(self, c: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.word_embeddings = embedding(ref.VOCAB, c)
            self.position_embeddings = embedding(c["positions"], c)
            self.token_type_embeddings = embedding(c["types"], c)
            self.LayerNorm = layer_norm(c)
            self.dropout = nn.Dropout(c["dropout"])

    def hybrid_forward(self, F: Any, ids: Any) -> Any:
        positions = F.contrib.arange_like(ids, axis=1)  # 0 .. L-1
        x = F.broadcast_add(self.word_embeddings(ids), F.expand_dims(self.position_embeddings(positions), 0))
        x = F.broadcast_add(x, F.expand_dims(self.token_type_embeddings(positions * 0), 0))  # every token segment 0
        return self.dropout(self.LayerNorm(x))


class SelfAttention(gluon.HybridBlock):
    def __init__(self, c: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.heads, self.dim = c["heads"], c["hidden"] // c["heads"]
        with self.name_scope():
            self.query, self.key, self.value = (dense(c["hidden"], c["hidden"]) for _ in range(3))
            self.dropout = nn.Dropout(c["dropout"])

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        def split(t: Any) -> Any:  # (B, L, H) -> (B x heads, L, dim)
            t = F.transpose(F.reshape(t, shape=(0, 0, self.heads, -1)), axes=(0, 2, 1, 3))
            return F.reshape(t, shape=(-3, 0, 0))

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        probs = self.dropout(F.softmax(F.batch_dot(q, k, transpose_b=True) / math.sqrt(self.dim), axis=-1))
        context = F.reshape(F.batch_dot(probs, v), shape=(-4, -1, self.heads, 0, 0))  # (B, heads, L, dim)
        return F.reshape(F.transpose(context, axes=(0, 2, 1, 3)), shape=(0, 0, -3))


class DenseNorm(gluon.HybridBlock):
    def __init__(self, n_in: int, c: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.dense = dense(n_in, c["hidden"])
            self.LayerNorm = layer_norm(c)
            self.dropout = nn.Dropout(c["dropout"])

    def hybrid_forward(self, F: Any, h: Any, residual: Any) -> Any:
        return self.LayerNorm(self.dropout(self.dense(h)) + residual)


class Attention(gluon.HybridBlock):
    def __init__(self, c: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.self, self.output = SelfAttention(c), DenseNorm(c["hidden"], c)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.output(self.self(x), x)


class Intermediate(gluon.HybridBlock):
    def __init__(self, c: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.dense = dense(c["hidden"], c["intermediate"])

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.LeakyReLU(self.dense(x), act_type="gelu")  # the exact (erf) GELU


class Layer(gluon.HybridBlock):
    def __init__(self, c: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.attention, self.intermediate = Attention(c), Intermediate(c)
            self.output = DenseNorm(c["intermediate"], c)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        x = self.attention(x)
        return self.output(self.intermediate(x), x)


class Encoder(gluon.HybridBlock):
    def __init__(self, c: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.layer = nn.HybridSequential()
            for _ in range(c["layers"]):
                self.layer.add(Layer(c))

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.layer(x)


class Bert(gluon.HybridBlock):
    def __init__(self, c: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.embeddings, self.encoder = Embeddings(c), Encoder(c)

    def hybrid_forward(self, F: Any, ids: Any) -> Any:
        return self.encoder(self.embeddings(ids))


class Transform(gluon.HybridBlock):
    def __init__(self, c: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.dense = dense(c["hidden"], c["hidden"])
            self.LayerNorm = layer_norm(c)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.LayerNorm(F.LeakyReLU(self.dense(x), act_type="gelu"))


class TiedDecoder(gluon.HybridBlock):
    """The output projection onto the vocabulary with the word-embedding matrix: built with the embedding's prefix
    and parameters, its ``weight`` IS that parameter (Gluon 1.x's sharing)."""

    def __init__(self, c: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.units = ref.VOCAB
        self.weight = self.params.get("weight", shape=(ref.VOCAB, c["hidden"]))

    def hybrid_forward(self, F: Any, x: Any, weight: Any) -> Any:
        return F.FullyConnected(x, weight, no_bias=True, num_hidden=self.units, flatten=False)


class Predictions(gluon.HybridBlock):
    def __init__(self, c: dict[str, Any], word_embeddings: nn.Embedding, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.transform = Transform(c)
            self.bias = self.params.get("bias", shape=(ref.VOCAB,), init="zeros")
        self.decoder = TiedDecoder(c, prefix=word_embeddings.prefix, params=word_embeddings.params)

    def hybrid_forward(self, F: Any, x: Any, bias: Any) -> Any:
        return F.broadcast_add(self.decoder(self.transform(x)), bias)


class Head(gluon.HybridBlock):
    def __init__(self, c: dict[str, Any], word_embeddings: nn.Embedding, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.predictions = Predictions(c, word_embeddings)

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return self.predictions(x)


class BertForMaskedLM(gluon.HybridBlock):
    def __init__(self, c: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.bert = Bert(c)
            self.cls = Head(c, self.bert.embeddings.word_embeddings)

    def hybrid_forward(self, F: Any, ids: Any, positions: Any) -> Any:
        x = self.bert(ids)  # (B, L, H)
        # the masked positions only, as BERT's pre-training (gather_indexes): x[b, positions[b, p]]
        rows = F.broadcast_like(F.expand_dims(F.contrib.arange_like(positions, axis=0), 1), positions)
        return self.cls(F.gather_nd(x, F.stack(rows, positions, axis=0)))  # (B, P, H) -> (B, P, vocab)


class TrainingLoss(gluon.HybridBlock):
    """The model and its loss as one block (hybridized together: the loss is in the compiled graph): the mean
    cross-entropy over the images, or over the masked tokens (the only ones BERT's head scores)."""

    def __init__(self, model: gluon.HybridBlock, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with self.name_scope():
            self.model = model
            self.loss = gluon.loss.SoftmaxCrossEntropyLoss(axis=-1, sparse_label=True)

    def hybrid_forward(self, F: Any, x: Any, y: Any, *positions: Any) -> Any:
        logits = self.model(x, *positions)
        return F.mean(self.loss(F.cast(logits, "float32"), y))


# --- the optimizer ---------------------------------------------------------------------------------------------

@mx.optimizer.register
class TorchAdamW(mx.optimizer.Optimizer):
    """torch.optim.AdamW's update through MXNet's ``adamw_update`` operator (its bias correction folded into the
    operator's lr and epsilon: see the module's docstring)."""

    def __init__(self, learning_rate: float, beta1: float, beta2: float, epsilon: float, wd: float,
                 **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, wd=wd, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon

    def create_state(self, index: int, weight: Any) -> Any:
        return (mx.nd.zeros(weight.shape, weight.context, dtype=weight.dtype),
                mx.nd.zeros(weight.shape, weight.context, dtype=weight.dtype))

    def update(self, index: int, weight: Any, grad: Any, state: Any) -> None:
        self._update_count(index)
        t = self._index_update_count[index]
        lr, wd = self._get_lr(index), self._get_wd(index)
        corrected = math.sqrt(1 - self.beta2 ** t)
        mean, var = state
        mx.nd.contrib.adamw_update(weight, grad, mean, var, rescale_grad=self.rescale_grad, lr=corrected / (
            1 - self.beta1 ** t), eta=lr, beta1=self.beta1, beta2=self.beta2, epsilon=self.epsilon * corrected,
            wd=wd, out=weight)


def make_trainer(opts: Any, params: Any) -> gluon.Trainer:
    if opts.model == "resnet50":
        s = ref.SGD
        return gluon.Trainer(params, "sgd", {"learning_rate": s["lr"], "momentum": s["momentum"],
                                             "wd": s["weight_decay"]}, kvstore=None)
    a = ref.ADAMW
    return gluon.Trainer(params, "torchadamw", {"learning_rate": a["lr"], "beta1": a["b1"], "beta2": a["b2"],
                                                "epsilon": a["eps"], "wd": a["weight_decay"]}, kvstore=None)


# --- weights, FLOPs, threads -------------------------------------------------------------------------------------

def torch_name(gluon_name: str) -> str:
    """A parameter's structural Gluon name as daybreak's PyTorch state dict names it."""
    head, _, leaf = gluon_name.rpartition(".")
    return f"{head}.{ {'gamma': 'weight', 'beta': 'bias'}.get(leaf, leaf)}"


def load_torch_weights(model: gluon.Block, w: dict[str, npt.NDArray[Any]], ctx: Any) -> None:
    """daybreak's PyTorch state dict into the model by name (Gluon's Conv2D, Dense and Embedding weights are laid out
    as PyTorch's: OIHW, (out, in), (rows, hidden)); every parameter of the model must be there."""
    for name, param in model._collect_params_with_prefix().items():
        array = w[torch_name(name)]
        if tuple(array.shape) != tuple(param.shape):
            raise SystemExit(f"mxnet: {name}: PyTorch's {torch_name(name)} is {array.shape}, not {param.shape}")
        param.set_data(mx.nd.array(array, ctx=ctx))


def unique_params(model: gluon.Block) -> list[Any]:
    seen: dict[int, Any] = {}
    for p in model.collect_params().values():
        seen.setdefault(id(p), p)
    return list(seen.values())


def forward_flops(model: gluon.HybridBlock, shapes: dict[str, tuple[int, ...]]) -> int:
    """The forward pass's multiply-adds x 2 of its Convolution, FullyConnected and batch_dot operators, on MXNet's
    symbolic graph of the model with the shapes MXNet infers."""
    inputs = [mx.sym.var(name) for name in shapes]
    graph = model(*inputs)
    internals = graph.get_internals()
    _, out_shapes, _ = internals.infer_shape(**shapes)
    shape_of: dict[str, tuple[int, ...]] = {name: tuple(shape) for name, shape in zip(internals.list_outputs(),
                                                                                         out_shapes)}
    nodes = json.loads(graph.tojson())["nodes"]

    def entry(spec: list[int]) -> tuple[int, ...]:
        node = nodes[spec[0]]
        if node["op"] == "null":
            return shape_of[node["name"]]
        key = f"{node['name']}_output"  # an operator's output; several outputs: _output0, _output1 ...
        return shape_of[key] if key in shape_of else shape_of[f"{key}{spec[1]}"]

    total = 0
    for index, node in enumerate(nodes):
        if node["op"] not in COUNTED_OPS:
            continue
        attrs = node.get("attrs", {})
        out = entry([index, 0])
        if node["op"] == "Convolution":
            weight = entry(node["inputs"][1])  # (O, I / groups, kh, kw)
            total += 2 * int(np.prod(out)) * int(np.prod(weight[1:]))
        elif node["op"] == "FullyConnected":
            weight = entry(node["inputs"][1])  # (out, in)
            total += 2 * int(np.prod(out)) * int(weight[1])
        else:
            a = entry(node["inputs"][0])
            k = a[-2] if attrs.get("transpose_a") in ("True", "true", "1") else a[-1]
            total += 2 * int(np.prod(out)) * int(k)
    return total


def omp_threads() -> int | None:
    """OpenMP's thread count (omp_get_max_threads) in the libgomp MXNet runs with, None when it cannot be read."""
    try:
        return int(ctypes.CDLL("libgomp.so.1").omp_get_max_threads())
    except (OSError, AttributeError):
        return None


def gpu_name(index: int) -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", str(index)],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip() or f"gpu {index}"
    except (OSError, subprocess.SubprocessError):
        return f"gpu {index}"


# --- the run -----------------------------------------------------------------------------------------------------

def main() -> int:
    opts = OPTS
    gpu = opts.device == "cuda"
    if opts.device == "mps":
        return int(ref.fail(opts, f"asked for mps: mxnet {mx.__version__} has no Apple GPU backend"))
    if gpu and mx.context.num_gpus() == 0:
        return int(ref.fail(opts, f"asked for cuda: mxnet {mx.__version__} sees no GPU (a CPU build, or no GPU: pip "
                                  "install mxnet-cu117==1.9.1 in the MXNet environment)"))
    if not ref.check(opts, "mxnet", supported_amp=("off", "fp16") if gpu else ("off", "bf16"), why={
            "amp": f"MXNet: AMP {opts.amp} on a {'GPU' if gpu else 'CPU'}: mxnet.contrib.amp casts to bfloat16 on "
                   "CPUs (oneDNN) and to float16 on GPUs only",
            "devices": "MXNet: this program runs one device (several: one Trainer over a list of contexts, not in "
                       "this program)"}):
        return 0
    ctx = mx.gpu(0) if gpu else mx.cpu(0)
    if not gpu:
        mx.base._LIB.MXSetNumOMPThreads(ctypes.c_int(opts.threads))
    if opts.amp != "off":  # MXNet's AMP patches its operators: before the model is built
        from mxnet.contrib import amp

        amp.init(target_dtype="bfloat16" if opts.amp == "bf16" else "float16")
    mx.random.seed(0)
    config = dict(ref.BERT, dropout=0.0 if opts.describe else ref.BERT["dropout"])  # the equivalence: dropout off
    model = ResNet50() if opts.model == "resnet50" else BertForMaskedLM(config)
    model.initialize(ctx=ctx)
    weights = ref.torch_weights(opts)
    if weights is not None:
        load_torch_weights(model, weights, ctx)
    batch = ref.synthetic_batch(opts)
    x = mx.nd.array(batch.x, ctx=ctx, dtype="float32")
    y = mx.nd.array(batch.y, ctx=ctx, dtype="float32")
    inputs = [x, y] + ([] if batch.positions is None else [mx.nd.array(batch.positions, ctx=ctx, dtype="float32")])
    shapes = {"data": batch.x.shape} if batch.positions is None else {"ids": batch.x.shape,
                                                                      "positions": batch.positions.shape}
    flops = 3 * forward_flops(model, shapes)
    net = TrainingLoss(model)
    trainer = make_trainer(opts, model.collect_params())
    if opts.amp == "fp16":
        from mxnet.contrib import amp

        amp.init_trainer(trainer)
    if opts.compile == "on":
        net.hybridize(static_alloc=True, static_shape=True)
    holder: dict[str, Any] = {"loss": None}

    def step() -> None:
        with autograd.record():  # training mode: BatchNorm on the batch's statistics, dropout on (when > 0)
            loss = net(*inputs)
        if opts.amp == "fp16":
            from mxnet.contrib import amp

            with amp.scale_loss(loss, trainer) as scaled:
                autograd.backward(scaled)
        else:
            loss.backward()
        trainer.step(1)  # the loss is the batch's mean already
        holder["loss"] = loss

    def sync() -> float | None:
        mx.nd.waitall()  # every step pushed so far, its update included
        return None if holder["loss"] is None else float(holder["loss"].asscalar())

    if opts.describe:
        params = sum(int(np.prod(p.shape)) for p in unique_params(model) if p.grad_req != "null")  # no BN statistics
        losses = []
        for _ in range(opts.check_steps + 1):
            step()
            loss = sync()
            losses.append(float("nan") if loss is None else loss)
        ref.describe(params, flops, losses, framework="mxnet", version=mx.__version__)
        return 0
    threads = omp_threads() if not gpu else opts.threads
    if threads is None:
        return int(ref.fail(opts, "mxnet: cannot read OpenMP's thread count (libgomp.so.1) to check the threads"))
    compiled = "forward, loss and backward as one cached graph (hybridize, static_alloc + static_shape); the " \
        "optimizer's updates are MXNet's fused update operators outside it (Gluon 1.x has no graph for the trainer)"
    ref.run(opts, step, sync, framework="mxnet", version=mx.__version__,
            compiler="hybridize" if opts.compile == "on" else "none", flops_per_step=flops,
            device="cuda" if gpu else "cpu", device_name=gpu_name(0) if gpu else "cpu", threads=threads,
            inter_op_threads=int(os.environ.get("MXNET_CPU_WORKER_NTHREADS", "1")) if not gpu else None,
            math_precision=opts.amp.replace("off", "fp32"), layout="NCHW",
            notes=[compiled] if opts.compile == "on" else [])
    return 0


if __name__ == "__main__":
    sys.exit(main())
