# SPDX-License-Identifier: BSD-3-Clause
"""The reference models of remora.nn from Python: BERT (and its Hugging Face
loader), SRU++, StarSaber, the recurrent language models and the RNN / LSTM
layers. Each builds from its config, runs forward and backward, and exposes
parameters() and state_dict()."""
import os

import numpy as np
import pytest

import remora
from remora import nn


def ids_of(b, l, vocab, seed=0):
    g = remora.Generator(seed)
    return (remora.rand(b, l, generator=g) * vocab).to(remora.int64).clamp(0, vocab - 1)


def backward_reaches_every_parameter(model, loss):
    model.zero_grad()
    loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    assert missing == []


def tiny_bert(**kw):
    args = dict(vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                max_position_embeddings=16)
    args.update(kw)
    return nn.BertConfig(**args)


# ---- BERT ----
def test_bert_config_keywords():
    c = tiny_bert(hidden_dropout_prob=0.0)
    assert c.hidden_size == 16 and c.hidden_dropout_prob == 0.0 and c.hidden_act == "gelu"
    assert "BertConfig(vocab_size=30" in repr(c)
    with pytest.raises(AttributeError):
        nn.BertConfig(no_such_key=1)
    c.num_attention_heads = 3
    with pytest.raises(remora.Error):
        c.validate()
    again = nn.BertConfig.from_hf_config(tiny_bert().to_hf_config())
    assert again.vocab_size == 30 and again.intermediate_size == 32


def test_bert_masked_lm_forward_backward():
    remora.manual_seed(0)
    cfg = tiny_bert()
    model = nn.BertForMaskedLM(cfg)
    assert isinstance(model, nn.EncoderModel) and isinstance(model, remora.nn._CModule)
    assert model.num_parameters() == int(cfg.parameter_count())
    ids = ids_of(2, 7, 30)
    mask = remora.ones(2, 7, dtype=remora.int64)
    out = model(ids, attention_mask=mask)
    assert out.mlm_logits.shape == (2, 7, 30) and out.nsp_logits.shape == (2, 2)
    assert out.pooled.shape == (2, 16) and out.class_logits is None and len(out.hidden_states) == 3
    masked, labels = nn.mlm_mask(ids, vocab_size=30, mask_token_id=1, generator=remora.Generator(3))
    assert masked.shape == ids.shape and labels.shape == ids.shape
    out = model(masked, mask)
    loss = (nn.BertForMaskedLM.mlm_loss(out.mlm_logits, ids)
            + nn.BertForMaskedLM.nsp_loss(out.nsp_logits, remora.tensor([0, 1])))
    backward_reaches_every_parameter(model, loss)
    sd = model.state_dict()
    assert "bert.embeddings.word_embeddings.weight" in sd and "cls.predictions.bias" in sd
    assert model.token_logits(ids).shape == (2, 7, 30)
    with pytest.raises(remora.Error):
        model.class_logits(ids)


def test_bert_sequence_classification_and_rsa():
    remora.manual_seed(1)
    cfg = tiny_bert(num_classes=3, attention="rsa", rem=remora.RemSpec(regular=1, cyclic=0, masked=False))
    model = nn.BertForMaskedLM(cfg)
    ids = ids_of(4, 6, 30, seed=1)
    mask = remora.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] * 6, [1] * 5 + [0]])
    types = remora.zeros(4, 6, dtype=remora.int64)
    logits = model.class_logits(ids, mask, types)
    assert logits.shape == (4, 3)
    model.eval()
    assert model(ids, mask, types).class_logits.allclose(model.class_logits(ids, mask, types), 1e-5, 1e-6)
    model.train()
    loss = remora.cross_entropy(model.class_logits(ids, mask), remora.tensor([0, 2, 1, 0]))
    loss.backward()
    names = [n for n, p in model.named_parameters() if p.grad is not None]
    assert "classifier.weight" in names and any(n.endswith("rem.eta") for n in names)


def test_bert_from_pretrained_matches_the_cpp_path(source_dir, tmp_path):
    """The fixture's logits, as examples/bert_masked_lm.cpp and tests/test_bert.cpp check them."""
    hf_dir = os.path.join(source_dir, "tests", "data", "hf_bert_tiny")
    exp = remora.load_file(os.path.join(source_dir, "tests", "data", "hf_bert_tiny_expected.safetensors"))
    m32 = nn.BertForMaskedLM.from_pretrained(hf_dir).eval()
    assert m32.config.vocab_size == 30 and m32.config.num_hidden_layers == 2
    with remora.no_grad():
        got = m32(exp["input_ids"]).mlm_logits
    assert got.allclose(exp["mlm_logits"], 1e-5, 1e-4)
    assert (got - exp["mlm_logits"]).abs().max().item() < 1e-4
    m64 = nn.load_hf_bert(hf_dir, dtype=remora.float64).eval()
    with remora.no_grad():
        got64 = m64(exp["input_ids"]).mlm_logits
    assert got64.dtype == remora.float64 and got64.allclose(exp["mlm_logits_f64"], 1e-12, 1e-9)

    # Save with the Hugging Face writer and load back: identical weights and logits.
    out_dir = str(tmp_path / "saved")
    m32.save_pretrained(out_dir)
    back = nn.BertForMaskedLM.from_pretrained(out_dir).eval()
    a, b = m32.state_dict(), back.state_dict()
    assert list(a) == list(b) and all(a[k].equal(b[k]) for k in a)
    with remora.no_grad():
        assert back(exp["input_ids"]).mlm_logits.equal(got)

    # A raw Hugging Face state dict (LayerNorm gamma / beta names) loads into a fresh model.
    raw = remora.load_file(os.path.join(hf_dir, "model.safetensors"), keep_dtypes=False)
    assert any(k.endswith("LayerNorm.gamma") for k in raw)
    assert nn.canonical_hf_name("bert.embeddings.LayerNorm.gamma") == "bert.embeddings.LayerNorm.weight"
    fresh = nn.BertForMaskedLM(m32.config).eval()
    fresh.load_hf_state(raw)
    with remora.no_grad():
        assert fresh(exp["input_ids"]).mlm_logits.equal(got)


# ---- SRU++ ----
@pytest.mark.parametrize("extra", [dict(), dict(attn_every=2, layer_norm=True), dict(cutoffs=[20], d_embed=16)])
def test_srupp(extra):
    remora.manual_seed(2)
    cfg = nn.SRUppConfig(n_token=40, d_model=16, d_attn=8, n_layer=2, dropout=0.1, attn_dropout=0.1, mem_len=4,
                         **extra)
    cfg.validate()
    model = nn.SRUppLM(cfg)
    assert isinstance(model, nn.SequenceModel) and model.config.d_model == 16
    ids = ids_of(2, 5, 40, seed=2)
    out = model(ids)
    assert out.hidden.shape == (2, 5, 16)
    assert len(out.state.mems) == 2 and len(out.state.cells) == 2
    if cfg.adaptive():
        out2 = model(ids, out.state, targets=ids)
        assert out2.logits is None and out2.nll.shape == (2, 5)
        loss = out2.nll.mean()
    else:
        assert out.logits.shape == (2, 5, 40) and out.nll is None
        out2 = model(ids, out.state)
        loss = nn.SRUppLM.loss(out2.logits, ids)
    backward_reaches_every_parameter(model, loss)
    assert any(k.startswith("rnn.rnn_lst.0.") for k in model.state_dict())
    scored = model.run_scored(ids, ids)
    assert (scored.nll is not None) == cfg.adaptive()


# ---- StarSaber ----
@pytest.mark.parametrize("gated", [False, True])
def test_starsaber_encoder(gated):
    remora.manual_seed(3)
    cfg = nn.StarSaberConfig(vocab_size=25, d_model=12, n_layer=2, gated=gated, num_classes=4, pad_token_id=0)
    model = nn.StarSaber(cfg)
    assert model.num_parameters() == int(cfg.parameter_count())
    ids = ids_of(3, 6, 25, seed=3)
    mask = remora.tensor([[1] * 6, [1] * 3 + [0] * 3, [1] * 6])
    out = model(ids, mask)
    assert out.token_logits.shape == (3, 6, 25) and out.class_logits.shape == (3, 4)
    assert len(out.hidden_states) == 3 and out.relations[0].shape == (3, 6, 6)
    assert model.encode(ids, mask).shape == (3, 6, 12)
    loss = (nn.StarSaber.mlm_loss(out.token_logits, ids)
            + nn.StarSaber.class_loss(out.class_logits, remora.tensor([0, 3, 1])))
    model.zero_grad()
    loss.backward()
    # The padding row of the embeddings is frozen; every weight gets a gradient.
    assert all(p.grad is not None for n, p in model.named_parameters())
    assert "layers.0.W_b" in model.state_dict()


def test_starsaber_lm():
    remora.manual_seed(4)
    model = nn.StarSaberLM(nn.StarSaberConfig(vocab_size=20, d_model=8, n_layer=2, causal=True))
    ids = ids_of(2, 5, 20, seed=4)
    out = model(ids)
    assert out.logits.shape == (2, 5, 20) and out.state.empty()
    # Causal: position 2's logits do not depend on later ids.
    model.eval()
    changed = ids.clone()
    changed[:, 4] = remora.tensor([(int(v) + 1) % 20 for v in ids[:, 4].tolist()])
    with remora.no_grad():
        assert model(ids).logits[:, :3].allclose(model(changed).logits[:, :3], 1e-6, 1e-6)
    model.train()
    backward_reaches_every_parameter(model, nn.StarSaberLM.loss(model(ids).logits, ids))
    assert isinstance(model.model, nn.StarSaber)


def test_starsaber_lm_needs_causal():
    with pytest.raises(remora.Error):
        nn.StarSaberLM(nn.StarSaberConfig(vocab_size=20, d_model=8))


# ---- recurrent language models ----
@pytest.mark.parametrize("kind,cells", [("rnn", 2), ("lstm", 4), ("relrnn", 1), ("rellstm", 2)])
def test_recurrent_lm(kind, cells):
    remora.manual_seed(5)
    n_layer = 2 if kind in ("rnn", "lstm") else 1
    cfg = nn.RecurrentConfig(type=kind, n_token=15, d_model=10, n_layer=n_layer, short_term=3, relevant=2,
                             dropout=0.1)
    model = nn.RecurrentLM(cfg)
    ids = ids_of(2, 6, 15, seed=5)
    out = model(ids)
    assert out.logits.shape == (2, 6, 15) and out.hidden.shape == (2, 6, 10)
    assert len(out.state.cells) == cells
    out2 = model(ids, out.state)
    backward_reaches_every_parameter(model, nn.RecurrentLM.loss(out2.logits, ids))
    assert "decoder.weight" in model.state_dict() and model.config.resolved_init() in ("uniform", "official")


# ---- RNN / LSTM layers against torch.nn ----
@pytest.mark.parametrize("kind", ["RNN", "LSTM"])
def test_rnn_layers_match_torch(kind):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    ref = getattr(torch.nn, kind)(5, 7, num_layers=2, batch_first=True).double()
    ours = getattr(nn, kind)(5, 7, num_layers=2, dtype=remora.float64)
    ours.load_state_dict({k: remora.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((3, 4, 5))
    y_ref, h_ref = ref(torch.from_numpy(x))
    y, h = ours(remora.tensor(x))
    assert np.allclose(y.detach().numpy(), y_ref.detach().numpy(), atol=1e-12)
    if kind == "LSTM":
        assert np.allclose(h[1].detach().numpy(), h_ref[1].detach().numpy(), atol=1e-12)
        y2, _ = ours(remora.tensor(x), h)
        h, h_ref = h[0], h_ref[0]
    else:
        y2, _ = ours(remora.tensor(x), h)
    assert np.allclose(h.detach().numpy(), h_ref.detach().numpy(), atol=1e-12)
    backward_reaches_every_parameter(ours, y2.sum())


def test_relevancy_cells():
    remora.manual_seed(6)
    x = remora.randn(2, 5, 4)
    y, h = nn.RelRNNCell(4, 6, short_term=2, relevant=1)(x)
    assert y.shape == (2, 5, 6) and h.shape == (2, 6)
    y, (h, c) = nn.RelLSTMCell(4, 6, short_term=2, relevant=1)(x)
    assert y.shape == (2, 5, 6) and h.shape == (2, 6) and c.shape == (2, 6)


# ---- a bound model in the Trainer ----
class LMData(remora.train.DataSource):
    def __init__(self, model, ids):
        super().__init__()
        self.model, self.ids = model, ids

    def train_loss(self, state):
        out = self.model.run(self.ids[:, :-1], state)
        state.cells = out.state.cells
        state.mems = out.state.mems
        loss = nn.SRUppLM.loss(out.logits, self.ids[:, 1:])
        return remora.train.StepLoss(loss, tokens=self.ids[:, 1:].numel())

    def evaluate(self, split, max_batches):
        with remora.no_grad():
            return nn.SRUppLM.loss(self.model.run(self.ids[:, :-1]).logits, self.ids[:, 1:]).item()


def test_srupp_in_the_trainer(tmp_path):
    remora.manual_seed(7)
    model = nn.SRUppLM(nn.SRUppConfig(n_token=12, d_model=16, d_attn=8, n_layer=1, dropout=0.0, attn_dropout=0.0,
                                      mem_len=4))
    ids = remora.tensor([[i % 12 for i in range(18 * r, 18 * r + 18)] for r in range(2)])
    opts = remora.train.TrainerOptions(out_dir=str(tmp_path / "run"), steps=30, eval_every=30, log_every=30)
    trainer = remora.train.Trainer(model, remora.optim.Adam(model.parameters(), lr=1e-2), LMData(model, ids), opts)
    before = LMData(model, ids).evaluate("valid", 1)
    result = trainer.fit()
    assert result.step == 30 and result.best < before
