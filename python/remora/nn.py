# SPDX-License-Identifier: BSD-3-Clause
"""remora.nn: modules.

The layers (Linear, LayerNorm, Embedding, Dropout, FeedForward, RNN, LSTM),
attention (RSAAttention, MultiHeadAttention) and the reference models are
Remora's C++ modules, each built from its config object:

    TransformerXL(XLConfig(...))          Transformer-XL and RSA-XL
    BertForMaskedLM(BertConfig(...))      BERT / RSA-BERT; from_pretrained(dir)
    SRUppLM(SRUppConfig(...))             SRU++
    StarSaber(StarSaberConfig(...))       StarSaber (StarSaberLM when causal)
    RecurrentLM(RecurrentConfig(...))     rnn, lstm, relrnn, rellstm

Module is the base for models written in Python:
attributes that are modules or tensors requiring grad are registered as
children and parameters, so parameters(), state_dict(), train() and the
Trainer see them.

    class Net(remora.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = remora.nn.Linear(4, 16)
            self.fc2 = remora.nn.Linear(16, 1)

        def forward(self, x):
            return self.fc2(self.fc1(x).relu())
"""
from . import _C

_CModule = _C.nn.Module
Linear = _C.nn.Linear
LayerNorm = _C.nn.LayerNorm
Embedding = _C.nn.Embedding
Dropout = _C.nn.Dropout
FeedForward = _C.nn.FeedForward
RSAAttention = _C.nn.RSAAttention
MultiHeadAttention = _C.nn.MultiHeadAttention
RemInit = _C.nn.RemInit
RemParameters = _C.nn.RemParameters
TransformerXL = _C.nn.TransformerXL
XLConfig = _C.nn.XLConfig
XLOutput = _C.nn.XLOutput
SequenceState = _C.nn.SequenceState
SequenceModel = _C.nn.SequenceModel
SequenceOutput = _C.nn.SequenceOutput
ScoredSequenceOutput = _C.nn.ScoredSequenceOutput
EncoderModel = _C.nn.EncoderModel
RNN = _C.nn.RNN
LSTM = _C.nn.LSTM
RelRNNCell = _C.nn.RelRNNCell
RelLSTMCell = _C.nn.RelLSTMCell
BertConfig = _C.nn.BertConfig
BertForMaskedLM = _C.nn.BertForMaskedLM
BertOutput = _C.nn.BertOutput
load_hf_bert = _C.nn.load_hf_bert
canonical_hf_name = _C.nn.canonical_hf_name
mlm_mask = _C.nn.mlm_mask
SRUppConfig = _C.nn.SRUppConfig
SRUppLM = _C.nn.SRUppLM
SRUppOutput = _C.nn.SRUppOutput
StarSaberConfig = _C.nn.StarSaberConfig
StarSaber = _C.nn.StarSaber
StarSaberLM = _C.nn.StarSaberLM
StarSaberOutput = _C.nn.StarSaberOutput
RecurrentConfig = _C.nn.RecurrentConfig
RecurrentLM = _C.nn.RecurrentLM
RecurrentOutput = _C.nn.RecurrentOutput
RemSpec = _C.RemSpec


def _config_repr(self):
    names = [n for n, v in vars(type(self)).items() if isinstance(v, property) and not n.startswith("_")]
    return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % (n, getattr(self, n)) for n in names))


for _cfg in (XLConfig, BertConfig, SRUppConfig, StarSaberConfig, RecurrentConfig, RemInit):
    _cfg.__repr__ = _config_repr
del _cfg

_c_train = _CModule.train
_c_eval = _CModule.eval


def _train(self, mode=True):
    """Training mode (dropout on) for this module and its children; returns self."""
    _c_train(self, mode)
    return self


def _eval(self):
    """Evaluation mode (train(False)); returns self."""
    _c_eval(self)
    return self


_CModule.train = _train
_CModule.eval = _eval


class Module(_CModule):
    """The base of models written in Python (a subclass of Remora's C++ Module).

    Assigning a module to an attribute registers it as a child; assigning a
    tensor that requires grad registers it as a parameter (under the
    attribute's name). Calling the module calls forward().
    """

    def __init__(self):
        _CModule.__init__(self)

    def __setattr__(self, name, value):
        if not name.startswith("_"):
            if isinstance(value, _CModule):
                self.register_module(name, value)
            elif isinstance(value, _C.Tensor) and value.requires_grad and value.is_leaf:
                value = self.register_parameter(name, value)
        object.__setattr__(self, name, value)

    def type_name(self):
        """The class name, used in printing."""
        return type(self).__name__

    def extra_repr(self):
        """Extra text in the printed parentheses (empty by default)."""
        return ""

    def forward(self, *args, **kwargs):
        """The computation; subclasses define it."""
        raise NotImplementedError(type(self).__name__ + ".forward is not defined")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)


class Sequential(Module):
    """Modules applied in order; children are named "0", "1", ..."""

    def __init__(self, *modules):
        super().__init__()
        self._items = []
        for i, m in enumerate(modules):
            self.register_module(str(i), m)
            self._items.append(m)

    def forward(self, x):
        """Each module's output is the next one's input."""
        for m in self._items:
            x = m(x)
        return x

    def __getitem__(self, i):
        return self._items[i]

    def __len__(self):
        return len(self._items)


class ModuleList(Module):
    """A list of modules, registered as children "0", "1", ..."""

    def __init__(self, modules=()):
        super().__init__()
        self._items = []
        for m in modules:
            self.append(m)

    def append(self, m):
        """Adds m as the next child."""
        self.register_module(str(len(self._items)), m)
        self._items.append(m)
        return self

    def __getitem__(self, i):
        return self._items[i]

    def __len__(self):
        return len(self._items)

    def __iter__(self):
        return iter(self._items)


def Parameter(t):
    """t as a leaf that requires grad (assign it to a Module attribute to register it)."""
    return t.detach().requires_grad_(True)
