"""ResNet-50 v1.5 and BERT-base (masked-LM head) training steps in TensorFlow 2 / Keras, timed by daybreak's
throughput protocol (throughput_log). Written the way TensorFlow's official models write them: a Keras functional
ResNet with explicit ``ZeroPadding2D`` before the strided convolutions and BatchNormalization(momentum 0.9,
epsilon 1e-5) (tensorflow/models, official/legacy/image_classification/resnet), Keras layers for BERT, and the
custom training loop of official/vision: a step with a ``GradientTape`` and ``optimizer.apply_gradients``.
``--compile on`` is that step as one ``tf.function(jit_compile=True)`` (XLA over the whole step); ``off`` runs it
eagerly, op by op (not a graph: a ``tf.function`` without XLA would be a third configuration, graph mode). AMP bf16 is
Keras' ``mixed_bfloat16`` policy (float32 variables, the loss in float32); fp32 is true fp32 (TF32 off: TensorFlow
runs fp32 matmuls and convolutions in TF32 on Ampere and later GPUs by default). Threads:
``tf.config.threading`` intra-op and inter-op; the device: the GPUs hidden for a CPU run, required for a CUDA one.

The FLOPs of a step are 3x those of its forward pass's matmuls and convolutions by TensorFlow's own profiler
(``tf.compat.v1.profiler``'s float-operation statistics, on the graph of a ``tf.function``): a matmul's or
convolution's backward is twice its forward. The profiler's count of the whole step's graph is recorded too
(``profiler_step_flops``): it counts a strided convolution's two backward ops at the input's resolution (stride 2:
4x the multiply-adds that run) and input gradients nothing uses, so it is about 10% above PyTorch's count for
ResNet-50. Keras 3's SGD and AdamW apply the weight decay decoupled from the gradient (PyTorch's SGD adds it to the
gradient before the momentum: the same first update, then a difference of the order of lr x weight decay); the
step's work is the same. One device per process here: TensorFlow's several-device training (MirroredStrategy) is
not in this program.
"""

from __future__ import annotations

import os
import sys
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import reference as ref  # noqa: E402

OPTS = ref.options()

import keras  # noqa: E402
import numpy as np  # noqa: E402
import numpy.typing as npt  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import layers  # noqa: E402

STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))
CONV_INIT = keras.initializers.VarianceScaling(2.0, "fan_out", "untruncated_normal")
BN_ARGS = dict(momentum=1 - ref.BN["momentum"], epsilon=ref.BN["eps"])
TORCH: dict[str, str] = {}  # Keras layer -> the PyTorch module name whose weights it takes


def named(layer: layers.Layer, torch_name: str) -> layers.Layer:
    TORCH[layer.name] = torch_name
    return layer


def conv_bn(x: keras.KerasTensor, filters: int, kernel: int, stride: int, torch_conv: str, torch_bn: str,
            relu: bool = True, zero_gamma: bool = False) -> keras.KerasTensor:
    if kernel > 1:  # explicit padding: Keras "same" pads a strided convolution asymmetrically, PyTorch does not
        x = layers.ZeroPadding2D(kernel // 2)(x)
    x = named(layers.Conv2D(filters, kernel, stride, use_bias=False, kernel_initializer=CONV_INIT,
                            name=torch_conv.replace(".", "_")), torch_conv)(x)
    x = named(layers.BatchNormalization(gamma_initializer="zeros" if zero_gamma else "ones", **BN_ARGS,
                                        name=torch_bn.replace(".", "_")), torch_bn)(x)
    return layers.ReLU()(x) if relu else x


def resnet50(image_size: int) -> keras.Model:
    inputs = keras.Input((image_size, image_size, 3))
    x = conv_bn(inputs, 64, 7, 2, "conv1", "bn1")
    x = layers.ZeroPadding2D(1)(x)  # after a ReLU, zero padding is max-pooling's -inf padding
    x = layers.MaxPooling2D(3, 2)(x)
    for i, (width, blocks, stride) in enumerate(STAGES, 1):
        for j in range(blocks):
            s, p = (stride if j == 0 else 1), f"layer{i}.{j}."
            y = conv_bn(x, width, 1, 1, p + "conv1", p + "bn1")
            y = conv_bn(y, width, 3, s, p + "conv2", p + "bn2")  # v1.5: the stride in the 3x3
            y = conv_bn(y, width * 4, 1, 1, p + "conv3", p + "bn3", relu=False, zero_gamma=True)
            shortcut = x
            if j == 0:
                shortcut = conv_bn(x, width * 4, 1, s, p + "downsample.0", p + "downsample.1", relu=False)
            x = layers.ReLU()(layers.Add()([y, shortcut]))
    x = layers.GlobalAveragePooling2D()(x)
    outputs = named(layers.Dense(ref.NUM_CLASSES, name="fc"), "fc")(x)
    return keras.Model(inputs, outputs, name="resnet50")


class BertLayer(layers.Layer):
    def __init__(self, index: int, **kwargs: Any) -> None:
        super().__init__(name=f"layer_{index}", **kwargs)
        c, init = ref.BERT, keras.initializers.TruncatedNormal(stddev=0.02)
        self.heads, self.dim = c["heads"], c["hidden"] // c["heads"]
        prefix = f"bert.encoder.layer.{index}."

        def dense(units: int, torch_name: str) -> layers.Layer:
            return named(layers.Dense(units, kernel_initializer=init, name=f"l{index}_{torch_name}"),
                         prefix + torch_name)

        def norm(torch_name: str) -> layers.Layer:
            return named(layers.LayerNormalization(epsilon=c["ln_eps"], name=f"l{index}_{torch_name}"),
                         prefix + torch_name)

        self.query, self.key, self.value = (dense(c["hidden"], f"attention.self.{n}") for n in ("query", "key",
                                                                                                 "value"))
        self.attention_dense = dense(c["hidden"], "attention.output.dense")
        self.intermediate = dense(c["intermediate"], "intermediate.dense")
        self.output_dense = dense(c["hidden"], "output.dense")
        self.attention_norm, self.output_norm = norm("attention.output.LayerNorm"), norm("output.LayerNorm")
        self.drop = layers.Dropout(c["dropout"])

    def call(self, x: tf.Tensor, training: bool = False) -> tf.Tensor:
        shape = tf.shape(x)

        def split(t: tf.Tensor) -> tf.Tensor:  # (B, L, H) -> (B, heads, L, dim)
            return tf.transpose(tf.reshape(t, [shape[0], shape[1], self.heads, self.dim]), [0, 2, 1, 3])

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = tf.matmul(q, k, transpose_b=True) / tf.cast(tf.math.sqrt(float(self.dim)), q.dtype)
        probs = self.drop(tf.cast(tf.nn.softmax(tf.cast(scores, tf.float32), axis=-1), q.dtype), training=training)
        context = tf.reshape(tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3]), shape)
        x = self.attention_norm(x + self.drop(self.attention_dense(context), training=training))
        h = keras.activations.gelu(self.intermediate(x), approximate=False)
        return self.output_norm(x + self.drop(self.output_dense(h), training=training))


class BertForMaskedLM(keras.Model):
    def __init__(self) -> None:
        super().__init__(name="bert_mlm")
        c, init = ref.BERT, keras.initializers.TruncatedNormal(stddev=0.02)
        self.word_embeddings = named(layers.Embedding(ref.VOCAB, c["hidden"], embeddings_initializer=init,
                                                      name="word_embeddings"), "bert.embeddings.word_embeddings")
        self.embeddings_norm = named(layers.LayerNormalization(epsilon=c["ln_eps"], name="embeddings_LayerNorm"),
                                     "bert.embeddings.LayerNorm")
        self.encoder = [BertLayer(i) for i in range(c["layers"])]
        self.transform = named(layers.Dense(c["hidden"], kernel_initializer=init, name="transform_dense"),
                               "cls.predictions.transform.dense")
        self.transform_norm = named(layers.LayerNormalization(epsilon=c["ln_eps"], name="transform_LayerNorm"),
                                    "cls.predictions.transform.LayerNorm")
        self.drop = layers.Dropout(c["dropout"])

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        c, init = ref.BERT, keras.initializers.TruncatedNormal(stddev=0.02)
        self.position_embeddings = self.add_weight(shape=(c["positions"], c["hidden"]), initializer=init,
                                                   name="position_embeddings")
        self.token_type_embeddings = self.add_weight(shape=(c["types"], c["hidden"]), initializer=init,
                                                     name="token_type_embeddings")
        self.decoder_bias = self.add_weight(shape=(ref.VOCAB,), initializer="zeros", name="decoder_bias")
        super().build(input_shape)

    def call(self, ids: tf.Tensor, training: bool = False, positions: tf.Tensor | None = None) -> tf.Tensor:
        x = self.word_embeddings(ids)
        dtype = x.dtype
        x = x + tf.cast(self.position_embeddings[: tf.shape(ids)[1]], dtype) + tf.cast(self.token_type_embeddings[0],
                                                                                      dtype)
        x = self.drop(self.embeddings_norm(x), training=training)
        for layer in self.encoder:
            x = layer(x, training=training)
        if positions is not None:  # the masked positions only, as BERT's pre-training (gather_indexes)
            x = tf.gather(x, positions, batch_dims=1)
        h = self.transform_norm(keras.activations.gelu(self.transform(x), approximate=False))
        decoder = tf.cast(self.word_embeddings.embeddings, h.dtype)  # tied to the word embeddings
        return tf.matmul(h, decoder, transpose_b=True) + tf.cast(self.decoder_bias, h.dtype)


def load_torch_weights(model: keras.Model, w: dict[str, npt.NDArray[Any]]) -> None:
    """daybreak's PyTorch state dict into the Keras model, layer by layer (layouts transposed)."""
    for layer in model._flatten_layers(include_self=False, recursive=True):
        name = TORCH.get(layer.name)
        if name is None:
            continue
        if isinstance(layer, layers.Conv2D):
            layer.set_weights([w[name + ".weight"].transpose(2, 3, 1, 0)])  # OIHW -> HWIO
        elif isinstance(layer, layers.Dense):
            layer.set_weights([w[name + ".weight"].T, w[name + ".bias"]])
        elif isinstance(layer, layers.BatchNormalization):
            layer.set_weights([w[name + s] for s in (".weight", ".bias", ".running_mean", ".running_var")])
        elif isinstance(layer, layers.LayerNormalization):
            layer.set_weights([w[name + ".weight"], w[name + ".bias"]])
        elif isinstance(layer, layers.Embedding):
            layer.set_weights([w[name + ".weight"]])
    if isinstance(model, BertForMaskedLM):
        e = "bert.embeddings."
        model.position_embeddings.assign(w[e + "position_embeddings.weight"])
        model.token_type_embeddings.assign(w[e + "token_type_embeddings.weight"])
        model.decoder_bias.assign(w["cls.predictions.bias"])


def loss_of(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """The mean cross-entropy: over the images, or over the masked tokens (the only ones BERT's head scores)."""
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, tf.cast(logits, tf.float32)))


CONTRACTIONS = ("Conv2D", "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum")


def profiler_flops(function: tf.types.experimental.PolymorphicFunction, *args: tf.Tensor,
                   ops: tuple[str, ...] | None = None) -> int:
    """TensorFlow's profiler: the float operations of the function's graph (of the ``ops`` types only: PyTorch's
    counter, the reference, counts matmuls and convolutions, not elementwise ops)."""
    graph = function.get_concrete_function(*args).graph
    if ops is None:
        options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
        options["output"] = "none"
        return int(tf.compat.v1.profiler.profile(graph=graph, options=options).total_float_ops)
    from tensorflow.python.framework import ops as graph_ops  # the per-node statistics the profiler adds up

    return int(sum(graph_ops.get_stats_for_node_def(graph, op.node_def, "flops").value or 0
                   for op in graph.get_operations() if op.type in ops))


def setup(opts: Any) -> str | None:
    """Threads, device and precision, before TensorFlow starts its runtime; a reason when the device is missing."""
    tf.config.threading.set_intra_op_parallelism_threads(opts.threads)
    tf.config.threading.set_inter_op_parallelism_threads(opts.threads)
    gpus = tf.config.list_physical_devices("GPU")
    if opts.device == "cuda" and not gpus:
        return (f"asked for cuda: TensorFlow {tf.__version__} sees no GPU (tensorflow-cpu, or no CUDA libraries: "
                "pip install 'tensorflow[and-cuda]')")
    if opts.device == "cpu" and gpus:
        tf.config.set_visible_devices([], "GPU")
    tf.config.experimental.enable_tensor_float_32_execution(False)  # fp32 is fp32, as in every reference program
    return None


def device_name(opts: Any) -> str:
    if opts.device != "cuda":
        return "cpu"
    details = tf.config.experimental.get_device_details(tf.config.list_physical_devices("GPU")[0])
    return str(details.get("device_name") or "GPU")


def main() -> int:
    opts = OPTS
    if not ref.check(opts, "tensorflow", supported_amp=("off", "bf16"), why={
            "amp": f"TensorFlow: AMP {opts.amp} is not supported by this program (mixed_bfloat16 only)",
            "devices": "TensorFlow: this program trains on one device (several need tf.distribute.MirroredStrategy, "
                       "not in the reference program)"}):
        return 0
    problem = setup(opts)
    if problem:
        return int(ref.fail(opts, problem))
    if opts.amp == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    keras.utils.set_random_seed(0)
    batch = ref.synthetic_batch(opts)
    if opts.model == "resnet50":
        model = resnet50(opts.image_size)
        x_np = batch.x.transpose(0, 2, 3, 1)  # NCHW -> NHWC, TensorFlow's CPU layout
        optimizer = keras.optimizers.SGD(ref.SGD["lr"], momentum=ref.SGD["momentum"],
                                         weight_decay=ref.SGD["weight_decay"])
    else:
        model = BertForMaskedLM()
        x_np = batch.x
        model(x_np[:1])  # build
        a = ref.ADAMW
        optimizer = keras.optimizers.AdamW(a["lr"], weight_decay=a["weight_decay"], beta_1=a["b1"], beta_2=a["b2"],
                                           epsilon=a["eps"])
    weights = ref.torch_weights(opts)
    if weights is not None:
        load_torch_weights(model, weights)
    x, y = tf.constant(x_np), tf.constant(batch.y)
    extra = {} if batch.positions is None else {"positions": tf.constant(batch.positions)}
    optimizer.build(model.trainable_variables)
    # BatchNorm in training mode; BERT's dropout on when timing, off for the equivalence figures
    training = opts.model == "resnet50" or not opts.describe

    def forward_loss(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        return loss_of(model(x, training=training, **extra), y)

    def train_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = forward_loss(x, y)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    compiled = opts.compile == "on"
    run_step = tf.function(train_step, jit_compile=True) if compiled else train_step
    forward_flops = profiler_flops(tf.function(forward_loss), x, y, ops=CONTRACTIONS)
    flops, step_flops = 3 * forward_flops, profiler_flops(tf.function(train_step), x, y)
    if opts.describe:
        params = sum(int(np.prod(v.shape)) for v in model.trainable_variables)
        losses = [float(run_step(x, y)) for _ in range(opts.check_steps + 1)]
        ref.describe(params, flops, losses, framework="tensorflow", version=tf.__version__,
                     profiler_step_flops=step_flops)
        return 0
    holder: dict[str, tf.Tensor | None] = {"loss": None}

    def step() -> None:
        holder["loss"] = run_step(x, y)

    def sync() -> float | None:
        loss = holder["loss"]
        return None if loss is None else float(loss.numpy())  # reading the loss waits for the device

    ref.run(opts, step, sync, framework="tensorflow", version=tf.__version__, compiler="XLA" if compiled else "none",
            flops_per_step=flops, device="cuda" if opts.device == "cuda" else "cpu", device_name=device_name(opts),
            threads=tf.config.threading.get_intra_op_parallelism_threads(),
            inter_op_threads=tf.config.threading.get_inter_op_parallelism_threads(),
            math_precision="bf16" if opts.amp == "bf16" else "fp32", layout="NHWC")
    return 0


if __name__ == "__main__":
    sys.exit(main())
