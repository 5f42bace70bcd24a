"""What gradfix knows of the PyTorch API: which calls make modules, losses and optimizers,
which tensor operations keep a value in the graph, and which take it out.

Names are fully qualified (`torch.nn.functional.mse_loss`); `imports.py` maps a file's own
spellings (`F.mse_loss`, `nn.MSELoss`) onto them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from codemods.analysis.saved_ops import tensor_methods

# Contexts and decorators that turn graph recording off, and the one that turns it back on.
GRAD_DISABLING = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad"})
# The training-step boundary (`training.py`): receivers whose `.step()` updates parameters
# (optimizers, AMP grad scalers; not `scheduler.step()`, not `env.step(action)`), iterables of
# an epoch over a data set, and the methods that run a module's forward computation.
STEPPER_NAME = re.compile(r"opt|scaler", re.IGNORECASE)
SCHEDULER_NAME = re.compile(r"sched", re.IGNORECASE)
BATCHES_TEXT = re.compile(r"loader|batches|dataset|tqdm", re.IGNORECASE)
FORWARD_METHODS = frozenset({"forward", "__call__"})
# A LightningModule's `training_step`: by the library's contract its trainer runs it once per
# training step (and backpropagates what it returns).
LIGHTNING_MODULES = frozenset(
    {
        "pytorch_lightning.LightningModule",
        "pytorch_lightning.core.LightningModule",
        "pytorch_lightning.core.module.LightningModule",
        "lightning.LightningModule",
        "lightning.pytorch.LightningModule",
        "lightning.pytorch.core.LightningModule",
        "lightning.pytorch.core.module.LightningModule",
    }
)
TRAINER_RUN_STEP = "training_step"
# ...and runs these under `torch.no_grad()` / `torch.inference_mode()`.
TRAINER_EVALUATION_STEPS = frozenset({"validation_step", "test_step", "predict_step"})
# nn.Module methods that return the module itself (`model = Net().to(device)`); not
# `requires_grad_`, after which its parameters may stop requiring grad.
MODULE_RETURNS_SELF = frozenset(
    {
        "to",
        "cuda",
        "cpu",
        "train",
        "eval",
        "float",
        "double",
        "half",
        "bfloat16",
        "type",
        "share_memory",
        "apply",
        "to_empty",
        "xpu",
        "ipu",
    }
)
# Calls that draw a random sample or order of a data set: batches made with them (or read from
# a `DataLoader(..., shuffle=True)`) do not continue one another.
RANDOM_DRAWS = frozenset(
    {
        "torch.randperm",
        "torch.multinomial",
        "random.shuffle",
        "random.sample",
        "numpy.random.permutation",
        "numpy.random.shuffle",
        "numpy.random.choice",
    }
)
# Functions named for inference (`generate`, `sample`, `predict`), and for inference or
# evaluation (also `evaluate`, `validate`).
_INFERENCE_WORDS = "generate|sample|predict|infer|inference"
INFERENCE_NAME = re.compile(rf"^_*(?:{_INFERENCE_WORDS})", re.IGNORECASE)
EVALUATION_NAME = re.compile(rf"^_*(?:{_INFERENCE_WORDS}|eval|validat)", re.IGNORECASE)
# Wrappers of those that projects define for themselves (`smart_inference_mode()`,
# `@torch_no_grad`): by name only, which can only make gradfix report less.
GRAD_DISABLING_NAME = re.compile(r"(?:^|[._])(?:no_grad|inference_mode)$")


def disables_grad(qualified: str | None) -> bool:
    """Whether a context manager or decorator of this name turns grad mode off."""
    return qualified is not None and (
        qualified in GRAD_DISABLING or bool(GRAD_DISABLING_NAME.search(qualified))
    )


GRAD_ENABLING = frozenset({"torch.enable_grad", "torch.autograd.enable_grad"})
SET_GRAD_ENABLED = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"})

# Functional losses: their result is graph-attached whenever an input is.
FUNCTIONAL_LOSSES = frozenset(
    "torch.nn.functional." + name
    for name in [
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "cosine_embedding_loss",
        "cross_entropy",
        "ctc_loss",
        "gaussian_nll_loss",
        "hinge_embedding_loss",
        "huber_loss",
        "kl_div",
        "l1_loss",
        "margin_ranking_loss",
        "mse_loss",
        "multi_margin_loss",
        "multilabel_margin_loss",
        "multilabel_soft_margin_loss",
        "nll_loss",
        "poisson_nll_loss",
        "smooth_l1_loss",
        "soft_margin_loss",
        "triplet_margin_loss",
        "triplet_margin_with_distance_loss",
    ]
)

# nn modules without parameters: their output is attached only when their input is.
PARAMETERLESS_MODULES = frozenset(
    "torch.nn." + name
    for name in [
        "ReLU",
        "ReLU6",
        "LeakyReLU",
        "ELU",
        "SELU",
        "CELU",
        "GELU",
        "SiLU",
        "Mish",
        "Sigmoid",
        "Tanh",
        "Softmax",
        "LogSoftmax",
        "Softplus",
        "Hardtanh",
        "Hardswish",
        "Hardsigmoid",
        "Dropout",
        "Dropout1d",
        "Dropout2d",
        "Dropout3d",
        "AlphaDropout",
        "Identity",
        "Flatten",
        "Unflatten",
        "MaxPool1d",
        "MaxPool2d",
        "MaxPool3d",
        "AvgPool1d",
        "AvgPool2d",
        "AvgPool3d",
        "AdaptiveAvgPool1d",
        "AdaptiveAvgPool2d",
        "AdaptiveAvgPool3d",
        "AdaptiveMaxPool1d",
        "AdaptiveMaxPool2d",
        "Upsample",
        "PixelShuffle",
    ]
)

# Recurrent modules return `(output, state)`; the state is one tensor, or `(h, c)` for LSTM:
# the number of tensors in the state.
RECURRENT_MODULES = {"torch.nn.GRU": 1, "torch.nn.RNN": 1, "torch.nn.LSTM": 2}

# Tensor methods whose result stays in the graph of the tensor they are called on.
GRAPH_KEEPING_METHODS = frozenset(
    [
        "abs",
        "add",
        "addmm",
        "bmm",
        "clamp",
        "clamp_min",
        "clamp_max",
        "clone",
        "contiguous",
        "cos",
        "cpu",
        "cuda",
        "cumsum",
        "div",
        "double",
        "exp",
        "expand",
        "expand_as",
        "flatten",
        "float",
        "gather",
        "half",
        "index_select",
        "log",
        "log_softmax",
        "masked_fill",
        "matmul",
        "max",
        "mean",
        "min",
        "mm",
        "mul",
        "narrow",
        "neg",
        "norm",
        "permute",
        "pow",
        "prod",
        "relu",
        "repeat",
        "reshape",
        "reshape_as",
        "roll",
        "sigmoid",
        "sin",
        "softmax",
        "sqrt",
        "square",
        "squeeze",
        "std",
        "sub",
        "sum",
        "t",
        "tanh",
        "to",
        "transpose",
        "type_as",
        "unsqueeze",
        "var",
        "view",
        "view_as",
        "chunk",
        "split",
        "unbind",
        "select",
    ]
)
# ...of those, the ones that reduce to one element when called without arguments.
REDUCING_METHODS = frozenset({"mean", "sum", "norm", "prod", "std", "var", "max", "min"})

# Methods that leave the graph: the result carries no history.
GRAPH_LEAVING_METHODS = frozenset(
    {
        "detach",
        "item",
        "tolist",
        "numpy",
        "long",
        "int",
        "bool",
        "argmax",
        "argmin",
        "size",
        "dim",
        "numel",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "nonzero",
        "isnan",
        "isinf",
        "isfinite",
        "any",
        "all",
        "equal",
        "argsort",
        "new_zeros",
        "new_ones",
        "new_full",
        "new_empty",
        "new_tensor",
        "bernoulli",
        "multinomial",
        "logical_and",
        "logical_or",
        "logical_not",
        "is_contiguous",
        "is_floating_point",
        "data_ptr",
        "stride",
        "element_size",
    }
)
# ...of those, the ones that return Python values.
TO_PYTHON_METHODS = frozenset(
    {
        "item",
        "tolist",
        "size",
        "dim",
        "numel",
        "equal",
        "is_contiguous",
        "is_floating_point",
        "data_ptr",
        "stride",
        "element_size",
    }
)

# torch.* factories: fresh tensors with no history (unless requires_grad=True is passed).
TENSOR_FACTORIES = frozenset(
    "torch." + name
    for name in [
        "zeros",
        "ones",
        "empty",
        "full",
        "tensor",
        "as_tensor",
        "randn",
        "rand",
        "randint",
        "arange",
        "linspace",
        "eye",
        "zeros_like",
        "ones_like",
        "empty_like",
        "full_like",
        "randn_like",
        "rand_like",
        "from_numpy",
    ]
)
# torch.* functions whose result carries no history whatever their inputs.
GRAPH_LEAVING_FUNCTIONS = frozenset(
    "torch." + name
    for name in [
        "argmax",
        "argmin",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "isnan",
        "isfinite",
        "numel",
    ]
)

# Where a Python number and a tensor behave alike: printing, formatting, Python-side maths.
NUMERIC_CONSUMERS = frozenset(
    {
        "print",
        "str",
        "repr",
        "format",
        "float",
        "int",
        "round",
        "abs",
        "bool",
        "len",
        "isinstance",
        "math",
        "numpy",
        "np",
        "statistics",
    }
)
# Reducers over Python iterables: their result is what the elements are.
ITERABLE_REDUCERS = frozenset({"sum", "min", "max", "sorted", "list", "tuple"})
# Copies: the result is what went in.
COPIES = frozenset({"copy.copy", "copy.deepcopy"})
# Methods of loggers, progress bars and writers that record a number.
LOGGING_METHODS = frozenset(
    {
        "info",
        "debug",
        "warning",
        "warn",
        "error",
        "log",
        "log_dict",
        "add_scalar",
        "add_scalars",
        "set_postfix",
        "set_description",
        "write",
        "print",
    }
)

# Calls that differentiate their root arguments.
AUTOGRAD_FUNCTIONS = frozenset({"torch.autograd.backward", "torch.autograd.grad"})

# In-place tensor methods (GF004) whose name without the trailing underscore is the
# out-of-place method taking the same arguments: `x.add_(y)` -> `x.add(y)`.
INPLACE_METHODS_WITH_TWIN = frozenset(
    name + "_"
    for name in [
        "abs",
        "add",
        "addcdiv",
        "addcmul",
        "addmm",
        "baddbmm",
        "ceil",
        "clamp",
        "clamp_max",
        "clamp_min",
        "clip",
        "cos",
        "div",
        "exp",
        "expm1",
        "floor",
        "floor_divide",
        "fmod",
        "frac",
        "index_add",
        "index_copy",
        "index_fill",
        "lerp",
        "log",
        "log10",
        "log1p",
        "log2",
        "masked_fill",
        "masked_scatter",
        "mul",
        "nan_to_num",
        "neg",
        "pow",
        "reciprocal",
        "relu",
        "remainder",
        "round",
        "rsqrt",
        "scatter",
        "scatter_add",
        "sigmoid",
        "sign",
        "sin",
        "sqrt",
        "square",
        "sub",
        "tan",
        "tanh",
        "true_divide",
        "trunc",
    ]
)
# Methods ending in `_` that write no tensor data: flags, sharing, shape-only changes.
NON_WRITING_UNDERSCORE_METHODS = frozenset(
    {
        "requires_grad_",
        "detach_",
        "share_memory_",
        "set_",
        "resize_",
        "resize_as_",
        "as_strided_",
        "t_",
        "transpose_",
        "squeeze_",
        "unsqueeze_",
        "swapdims_",
        "swapaxes_",
    }
)
# Modules whose call rescales the rows of their `weight` it looks up in place (under no_grad,
# which still bumps the version) when built with a `max_norm` that is not None, with the
# constructor position of `max_norm`: the nn.Embedding documentation's note.
RENORMALISING_MODULES = {"torch.nn.Embedding": 3, "torch.nn.EmbeddingBag": 2}
# Where modules and functionals take their `inplace` flag positionally (`nn.ReLU(True)`,
# `F.leaky_relu(x, 0.2, True)`); the keyword form is recognised everywhere.
INPLACE_FLAG_POSITION = {
    "torch.nn.ReLU": 0,
    "torch.nn.ReLU6": 0,
    "torch.nn.SELU": 0,
    "torch.nn.SiLU": 0,
    "torch.nn.Mish": 0,
    "torch.nn.Hardswish": 0,
    "torch.nn.Hardsigmoid": 0,
    "torch.nn.LeakyReLU": 1,
    "torch.nn.ELU": 1,
    "torch.nn.CELU": 1,
    "torch.nn.Dropout": 1,
    "torch.nn.Dropout1d": 1,
    "torch.nn.Dropout2d": 1,
    "torch.nn.Dropout3d": 1,
    "torch.nn.AlphaDropout": 1,
    "torch.nn.Hardtanh": 2,
    "torch.nn.functional.relu": 1,
    "torch.nn.functional.relu6": 1,
    "torch.nn.functional.selu": 1,
    "torch.nn.functional.silu": 1,
    "torch.nn.functional.mish": 1,
    "torch.nn.functional.hardswish": 1,
    "torch.nn.functional.hardsigmoid": 1,
    "torch.nn.functional.leaky_relu": 2,
    "torch.nn.functional.elu": 2,
    "torch.nn.functional.celu": 2,
    "torch.nn.functional.threshold": 3,
    "torch.nn.functional.hardtanh": 3,
    "torch.nn.functional.dropout": 3,
    "torch.nn.functional.alpha_dropout": 3,
}

# Text without any of these cannot hold a value the analysis proves graph-attached (a module
# constructed or defined here, a loss, a backward, a tensor requiring grad): every rule needs
# one, so a file that matches none is never parsed.
GRAPH_EVIDENCE = re.compile(
    r"\.backward\(|autograd\.(?:grad|backward)\(|_loss\(|entropy\(|_with_logits\(|kl_div\("
    r"|Loss\(|criterion\(|loss_f\w*\(|nn\.[A-Z]\w*\(|from torch\.nn import|Module\s*\)"
    r"|requires_grad\s*=\s*True|Parameter\("
)


def at_word_starts(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """The matches of `pattern` (which begins with a word character) that begin a word: what
    `\\b` before the pattern finds, without its cost (`re` tries a pattern that begins with
    `\\b` at every position, and scans quickly for one that begins with a letter)."""
    for match in pattern.finditer(text):
        start = match.start()
        if not start or not (text[start - 1].isalnum() or text[start - 1] == "_"):
            yield match


# Tensor methods the op table does not list that keep the graph of any input that has one:
# scatter and index updates, blends, fused arithmetic.
_MORE_TENSOR_METHODS = frozenset(
    [
        "scatter",
        "scatter_add",
        "scatter_reduce",
        "index_add",
        "index_copy",
        "index_fill",
        "index_put",
        "masked_scatter",
        "masked_select",
        "lerp",
        "addcmul",
        "addcdiv",
        "addmv",
        "baddbmm",
        "diff",
        "kron",
        "tril",
        "triu",
        "diag",
        "diagonal",
        "trace",
        "cross",
        "logcumsumexp",
        "renorm",
        "fmod",
        "remainder",
        "hypot",
        "sinc",
        "tile",
        "repeat_interleave",
        "unfold",
        "fliplr",
        "flipud",
        "rot90",
        "take",
        "take_along_dim",
        "nan_to_num",
        "log_sigmoid",
        "softplus",
        "erfinv",
    ]
)


def is_tensor_method(name: str) -> bool:
    """A method of `torch.Tensor` gradfix knows (the table's `Tensor.*`, the graph-keeping
    list, and the ones above): a method of another name on a value taken for a tensor may
    be an object's own (`loss.get_loss()` on a library's loss object)."""
    return name in GRAPH_KEEPING_METHODS or name in _MORE_TENSOR_METHODS or name in tensor_methods()


def writes_data(method: str) -> bool:
    """`x.add_(...)`, `x.copy_(...)`: a tensor method that writes its receiver's data in place
    (not `requires_grad_`, `detach_` or the view-changing ones)."""
    return (
        method.endswith("_")
        and not method.startswith("_")
        and method not in NON_WRITING_UNDERSCORE_METHODS
    )
