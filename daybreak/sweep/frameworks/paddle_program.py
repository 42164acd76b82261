"""ResNet-50 v1.5 and BERT-base (masked-LM head) training steps in PaddlePaddle, timed by daybreak's throughput
protocol (throughput_log). Written the way PaddleClas and PaddleNLP write them: ``paddle.nn.Layer`` models in NCHW
with ``Conv2D(bias_attr=False)`` + ``BatchNorm2D``, ``Momentum`` with L2 decay for ResNet and ``AdamW`` for BERT, a
dygraph training step (``loss.backward()``, ``optimizer.step()``, ``optimizer.clear_grad()``), AMP through
``paddle.amp.auto_cast`` and the compiler through ``paddle.jit.to_static`` with CINN (``build_cinn_pass``).

What this Paddle cannot do on a CPU is reported, not timed: CINN is only in wheels built with it
(``paddle.is_compiled_with_cinn()``; PyPI's CPU wheel is not), and ``paddle.amp.auto_cast`` has no effect on a CPU
place (Paddle warns "amp_guard can only be enabled on CUDAPlace ..."), so bf16 there would be fp32 under another
name. Several devices need one process each (``paddle.distributed.launch``), not in this program.

The FLOPs of a step are 3x those of its forward pass's convolutions and matmuls by Paddle's own per-operation
formulas (``paddle.utils.flops``, the profiler's; ``paddle.flops`` itself fails under NumPy 2): a matmul's or
convolution's backward is twice its forward.

Threads: ``paddle.base.core.set_num_threads`` (the CPU math libraries' threads; dygraph runs one operation at a
time, so there is no inter-op pool to size). The device: ``paddle.set_device``; a CUDA run needs a GPU build
(paddlepaddle-gpu), else it fails with one line. fp32 is true fp32 on a GPU: ``NVIDIA_TF32_OVERRIDE=0`` (Paddle's
own advice; cuBLAS and cuDNN otherwise use TF32 on Ampere and later GPUs).
"""

import os
import sys
from typing import Any, TypedDict

os.environ.setdefault("GLOG_minloglevel", "2")

import reference as ref  # noqa: E402

OPTS = ref.options()
if OPTS.amp == "off":  # before Paddle loads cuBLAS and cuDNN: fp32 is fp32, as in every reference program
    os.environ["NVIDIA_TF32_OVERRIDE"] = "0"

import numpy as np  # noqa: E402
import numpy.typing as npt  # noqa: E402
import paddle  # noqa: E402
import paddle.nn.functional as F  # noqa: E402
from paddle import nn  # noqa: E402
from paddle.utils.flops import flops as op_flops  # noqa: E402

STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))


class Count(TypedDict):
    on: bool
    flops: int


COUNT: Count = {"on": False, "flops": 0}  # the forward's FLOPs while counting


def counted_matmul(x: paddle.Tensor, y: paddle.Tensor, transpose_y: bool = False) -> paddle.Tensor:
    if COUNT["on"]:
        COUNT["flops"] += op_flops("matmul_v2", {"X": [list(x.shape)], "Y": [list(y.shape)]}, {"trans_y": transpose_y})
    return paddle.matmul(x, y, transpose_y=transpose_y)


def _count_layer(layer: nn.Layer, inputs: tuple[paddle.Tensor, ...], output: paddle.Tensor) -> None:
    if not COUNT["on"]:
        return
    x = inputs[0]
    if isinstance(layer, nn.Conv2D):
        COUNT["flops"] += op_flops("conv2d", {"Input": [list(x.shape)], "Filter": [list(layer.weight.shape)],
                                              "Bias": []},
                                   {"paddings": list(layer._padding) if isinstance(layer._padding, (list, tuple))
                                    else layer._padding, "strides": list(layer._stride),
                                    "dilations": list(layer._dilation), "groups": layer._groups})
    elif isinstance(layer, nn.Linear):
        COUNT["flops"] += op_flops("matmul_v2", {"X": [list(x.shape)], "Y": [list(layer.weight.shape)]}, {})


def forward_flops(model: nn.Layer, x: paddle.Tensor, extra: dict[str, paddle.Tensor]) -> int:
    hooks = [m.register_forward_post_hook(_count_layer) for m in model.sublayers()
             if isinstance(m, (nn.Conv2D, nn.Linear))]
    COUNT.update({"on": True, "flops": 0})
    try:
        with paddle.no_grad():
            model(x, **extra)
    finally:
        COUNT["on"] = False
        for h in hooks:
            h.remove()
    return COUNT["flops"]


# --- ResNet-50 v1.5 (PaddleClas' layout; PyTorch's names, so daybreak's weights load by name) ------------------

def conv(c_in: int, c_out: int, k: int, stride: int = 1) -> nn.Conv2D:
    return nn.Conv2D(c_in, c_out, k, stride=stride, padding=k // 2, bias_attr=False,
                     weight_attr=paddle.ParamAttr(initializer=nn.initializer.KaimingNormal(nonlinearity="relu")))


def bn(c: int, zero: bool = False) -> nn.BatchNorm2D:
    attr = paddle.ParamAttr(initializer=nn.initializer.Constant(0.0)) if zero else None
    return nn.BatchNorm2D(c, momentum=1 - ref.BN["momentum"], epsilon=ref.BN["eps"], weight_attr=attr)


class Bottleneck(nn.Layer):
    def __init__(self, c_in: int, width: int, stride: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = conv(c_in, width, 1), bn(width)
        self.conv2, self.bn2 = conv(width, width, 3, stride), bn(width)  # v1.5: the stride in the 3x3
        self.conv3, self.bn3 = conv(width, width * 4, 1), bn(width * 4, zero=True)
        self.relu = nn.ReLU()
        self.downsample: nn.Sequential | None = None
        if stride != 1 or c_in != width * 4:
            self.downsample = nn.Sequential(conv(c_in, width * 4, 1, stride), bn(width * 4))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        shortcut = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        return self.relu(self.bn3(self.conv3(y)) + shortcut)


class ResNet50(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn1, self.relu = conv(3, 64, 7, 2), bn(64), nn.ReLU()
        self.maxpool = nn.MaxPool2D(3, stride=2, padding=1)
        c_in = 64
        stages: list[nn.Sequential] = []
        for width, blocks, stride in STAGES:
            stages.append(nn.Sequential(*[Bottleneck(c_in if j == 0 else width * 4, width, stride if j == 0 else 1)
                                          for j in range(blocks)]))
            c_in = width * 4
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2D(1)
        self.fc = nn.Linear(c_in, ref.NUM_CLASSES)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(paddle.flatten(self.avgpool(x), 1))


# --- BERT-base with the masked-LM head (PaddleNLP's layout; PyTorch's names) -----------------------------------

def _normal() -> paddle.ParamAttr:
    return paddle.ParamAttr(initializer=nn.initializer.Normal(std=0.02))


def linear(n_in: int, n_out: int) -> nn.Linear:
    return nn.Linear(n_in, n_out, weight_attr=_normal())


class Embeddings(nn.Layer):
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(ref.VOCAB, c["hidden"], weight_attr=_normal())
        self.position_embeddings = nn.Embedding(c["positions"], c["hidden"], weight_attr=_normal())
        self.token_type_embeddings = nn.Embedding(c["types"], c["hidden"], weight_attr=_normal())
        self.LayerNorm = nn.LayerNorm(c["hidden"], epsilon=c["ln_eps"])
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, ids: paddle.Tensor) -> paddle.Tensor:
        x = self.word_embeddings(ids) + self.position_embeddings.weight[: ids.shape[1]].unsqueeze(0)
        return self.dropout(self.LayerNorm(x + self.token_type_embeddings.weight[0]))


class SelfAttention(nn.Layer):
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.heads, self.dim = c["heads"], c["hidden"] // c["heads"]
        self.query, self.key, self.value = (linear(c["hidden"], c["hidden"]) for _ in range(3))
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        b, length, hidden = x.shape

        def split(t: paddle.Tensor) -> paddle.Tensor:
            return t.reshape([b, length, self.heads, self.dim]).transpose([0, 2, 1, 3])

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        probs = self.dropout(F.softmax(counted_matmul(q, k, transpose_y=True) / float(np.sqrt(self.dim)), axis=-1))
        return counted_matmul(probs, v).transpose([0, 2, 1, 3]).reshape([b, length, hidden])


class DenseNorm(nn.Layer):
    def __init__(self, n_in: int, c: dict[str, Any]) -> None:
        super().__init__()
        self.dense = linear(n_in, c["hidden"])
        self.LayerNorm = nn.LayerNorm(c["hidden"], epsilon=c["ln_eps"])
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, h: paddle.Tensor, residual: paddle.Tensor) -> paddle.Tensor:
        return self.LayerNorm(self.dropout(self.dense(h)) + residual)


class Attention(nn.Layer):
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.self, self.output = SelfAttention(c), DenseNorm(c["hidden"], c)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.output(self.self(x), x)


class Intermediate(nn.Layer):
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.dense = linear(c["hidden"], c["intermediate"])

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return F.gelu(self.dense(x), approximate=False)


class Layer(nn.Layer):
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.attention, self.intermediate, self.output = Attention(c), Intermediate(c), DenseNorm(c["intermediate"], c)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = self.attention(x)
        return self.output(self.intermediate(x), x)


class Encoder(nn.Layer):
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.layer = nn.LayerList([Layer(c) for _ in range(c["layers"])])

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        for layer in self.layer:
            x = layer(x)
        return x


class Bert(nn.Layer):
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.embeddings, self.encoder = Embeddings(c), Encoder(c)

    def forward(self, ids: paddle.Tensor) -> paddle.Tensor:
        return self.encoder(self.embeddings(ids))


class Transform(nn.Layer):
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.dense = linear(c["hidden"], c["hidden"])
        self.LayerNorm = nn.LayerNorm(c["hidden"], epsilon=c["ln_eps"])

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.LayerNorm(F.gelu(self.dense(x), approximate=False))


class Predictions(nn.Layer):
    def __init__(self, c: dict[str, Any], word_embeddings: nn.Embedding) -> None:
        super().__init__()
        self.transform = Transform(c)
        self.decoder_weight = word_embeddings.weight  # tied: not a parameter of its own
        self.bias = self.create_parameter([ref.VOCAB], is_bias=True)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return counted_matmul(self.transform(x), self.decoder_weight, transpose_y=True) + self.bias


class Head(nn.Layer):
    def __init__(self, c: dict[str, Any], word_embeddings: nn.Embedding) -> None:
        super().__init__()
        self.predictions = Predictions(c, word_embeddings)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.predictions(x)


class BertForMaskedLM(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.bert = Bert(ref.BERT)
        self.cls = Head(ref.BERT, self.bert.embeddings.word_embeddings)

    def forward(self, ids: paddle.Tensor, positions: paddle.Tensor | None = None) -> paddle.Tensor:
        x = self.bert(ids)
        if positions is not None:  # the masked positions only, as BERT's pre-training (gather_indexes)
            index = positions.unsqueeze(-1).expand([positions.shape[0], positions.shape[1], x.shape[-1]])
            x = paddle.take_along_axis(x, index, axis=1)
        return self.cls(x)


def load_torch_weights(model: nn.Layer, w: dict[str, npt.NDArray[Any]]) -> None:
    """daybreak's PyTorch state dict into the model by name (Linear weights are (in, out) in Paddle)."""
    linear_weights = {f"{name}.weight" for name, m in model.named_sublayers() if isinstance(m, nn.Linear)}
    state = {}
    for name, value in model.state_dict().items():
        if name.endswith("decoder_weight"):
            continue  # the word embeddings, tied
        torch_name = name.replace("._mean", ".running_mean").replace("._variance", ".running_var")
        array = w[torch_name]
        state[name] = array.T if name in linear_weights else array
    model.set_state_dict(state)


def loss_of(logits: paddle.Tensor, labels: paddle.Tensor) -> paddle.Tensor:
    """The mean cross-entropy: over the images, or over the masked tokens (the only ones BERT's head scores)."""
    logits = paddle.cast(logits, "float32")
    return F.cross_entropy(logits.reshape([-1, logits.shape[-1]]), labels.reshape([-1, 1]))


def main() -> int:
    opts = OPTS
    gpu = opts.device == "cuda"
    if gpu and not (paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0):
        return int(ref.fail(opts, f"asked for cuda: paddle {paddle.__version__} has no GPU to run on (a CPU build, "
                                  "or no GPU: pip install paddlepaddle-gpu from Paddle's index)"))
    paddle.set_device("gpu" if gpu else "cpu")
    if not ref.check(opts, "paddle", supported_amp=("off", "bf16") if gpu else ("off",),
                     compiler_on_ok=paddle.is_compiled_with_cinn(), why={
                         "amp": f"Paddle: AMP {opts.amp} on a CPU: paddle.amp.auto_cast has no effect on a CPU place "
                                "(it would run fp32)" if not gpu else f"Paddle: AMP {opts.amp} is not in this program",
                         "compile_on": "Paddle: CINN is not in this paddlepaddle build (paddle.is_compiled_with_cinn() "
                                       "is False; PyPI's CPU wheel has no CINN)",
                         "devices": "Paddle: several devices need one process each (paddle.distributed.launch), not "
                                    "in this program"}):
        return 0
    paddle.base.core.set_num_threads(opts.threads)
    paddle.seed(0)
    model = ResNet50() if opts.model == "resnet50" else BertForMaskedLM()
    weights = ref.torch_weights(opts)
    if weights is not None:
        load_torch_weights(model, weights)
    batch = ref.synthetic_batch(opts)
    x, y = paddle.to_tensor(batch.x), paddle.to_tensor(batch.y.astype(np.int64))
    positions = None if batch.positions is None else paddle.to_tensor(batch.positions.astype(np.int64))
    extra = {} if positions is None else {"positions": positions}
    model.train()
    if opts.describe and opts.model == "bert_base":
        model.eval()  # dropout off for the equivalence figures (BERT has no BatchNorm)
    flops = 3 * forward_flops(model, x, extra)
    if opts.model == "resnet50":
        optimizer = paddle.optimizer.Momentum(ref.SGD["lr"], momentum=ref.SGD["momentum"],
                                              weight_decay=paddle.regularizer.L2Decay(ref.SGD["weight_decay"]),
                                              parameters=model.parameters())
    else:
        a = ref.ADAMW
        optimizer = paddle.optimizer.AdamW(a["lr"], beta1=a["b1"], beta2=a["b2"], epsilon=a["eps"],
                                           weight_decay=a["weight_decay"], parameters=model.parameters())
    if opts.compile == "on":  # CINN (only where the build has it)
        strategy = paddle.static.BuildStrategy()
        strategy.build_cinn_pass = True
        model = paddle.jit.to_static(model, build_strategy=strategy, full_graph=True)
    holder: dict[str, paddle.Tensor | None] = {"loss": None}

    def step() -> None:
        with paddle.amp.auto_cast(enable=opts.amp == "bf16", dtype="bfloat16", level="O1"):
            loss = loss_of(model(x, **extra), y)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        holder["loss"] = loss

    def sync() -> float | None:
        if gpu:
            paddle.device.synchronize()
        return None if holder["loss"] is None else float(holder["loss"])  # reading the loss waits for the device

    if opts.describe:
        params = sum(int(np.prod(p.shape)) for p in model.parameters() if not p.stop_gradient)  # not BN statistics
        losses = []
        for _ in range(opts.check_steps + 1):
            step()
            losses.append(float(holder["loss"] if holder["loss"] is not None else "nan"))
        ref.describe(params, flops, losses, framework="paddle", version=paddle.__version__)
        return 0
    ref.run(opts, step, sync, framework="paddle", version=paddle.__version__,
            compiler="CINN" if opts.compile == "on" else "none", flops_per_step=flops,
            device="cuda" if gpu else "cpu", device_name=paddle.device.cuda.get_device_name() if gpu else "cpu",
            threads=opts.threads, math_precision="bf16" if opts.amp == "bf16" else "fp32", layout="NCHW")
    return 0


if __name__ == "__main__":
    sys.exit(main())
