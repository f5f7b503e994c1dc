# SPDX-License-Identifier: BSD-3-Clause
"""remora.nn, remora.optim, safetensors, tokenizers and the Trainer from Python."""
import os

import pytest

import remora
from remora import nn, optim


def test_layers():
    lin = nn.Linear(4, 3)
    assert lin(remora.randn(2, 4)).shape == (2, 3)
    assert [n for n, _ in lin.named_parameters()] == ["weight", "bias"]
    assert lin.weight.shape == (3, 4) and lin.bias.shape == (3,)
    assert nn.Linear(4, 3, bias=False).bias is None
    ln = nn.LayerNorm(4)
    y = ln(remora.randn(5, 4))
    assert abs(y.mean().item()) < 1e-5
    emb = nn.Embedding(10, 6)
    assert emb(remora.tensor([[1, 2, 3]])).shape == (1, 3, 6)
    assert lin.train() is lin and lin.training and not lin.eval().training
    assert "Linear" in repr(lin)


def test_state_dict_roundtrip(tmp_path):
    a, b = nn.Linear(4, 3), nn.Linear(4, 3)
    b.load_state_dict(a.state_dict())
    assert b.weight.equal(a.weight)
    path = str(tmp_path / "lin.safetensors")
    remora.save_file(a.state_dict(), path, metadata={"note": "x"})
    loaded = remora.load_file(path)
    assert list(loaded) == ["weight", "bias"] and loaded["weight"].equal(a.weight)
    assert remora.load_file_metadata(path)["note"] == "x"
    with pytest.raises(remora.Error):
        b.load_state_dict({"weight": a.weight})


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 16)
        self.fc2 = nn.Linear(16, 1)
        self.scale = remora.ones(1, requires_grad=True)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu()) * self.scale


@pytest.mark.parametrize("make_opt", [lambda p: optim.SGD(p, lr=0.05, momentum=0.9),
                                      lambda p: optim.Adam(p, lr=1e-2),
                                      lambda p: optim.AdamW(p, lr=1e-2)])
def test_python_module_trains(make_opt):
    remora.manual_seed(0)
    net = Net()
    assert [n for n, _ in net.named_parameters()] == ["scale", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    opt = make_opt(net.parameters())
    x = remora.randn(64, 4)
    y = x.sum(1, True)
    losses = []
    for _ in range(60):
        opt.zero_grad()
        loss = remora.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0]
    assert list(net.state_dict())[0] == "scale"


def test_rsa_attention_module():
    spec = remora.RemSpec(regular=1, cyclic=1)
    att = nn.RSAAttention(16, 4, spec)
    x = remora.randn(2, 5, 16)
    assert att(x, causal=True).shape == (2, 5, 16)
    names = [n for n, _ in att.named_parameters()]
    assert "rem.eta" in names and "rem.mu" in names and "out_proj.weight" in names
    assert att.rem.mu.shape == (3,)
    mha = nn.MultiHeadAttention(16, 4)
    assert mha(x, x, x).shape == (2, 5, 16)


def test_transformer_xl():
    cfg = nn.XLConfig(n_token=20, n_layer=2, n_head=2, d_model=16, d_inner=32, dropout=0.0, mem_len=4,
                      attention="rsa", rem=remora.RemSpec(regular=1, cyclic=0))
    model = nn.TransformerXL(cfg)
    ids = remora.arange(12).reshape(2, 6)
    out = model(ids)
    assert out.logits.shape == (2, 6, 20) and len(out.state.mems) == 2
    out2 = model(ids, out.state)
    loss = nn.TransformerXL.loss(out2.logits, ids)
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    assert any(n.endswith("rem.eta") for n, _ in model.named_parameters())


def test_word_tokenizer(source_dir):
    tok = remora.text.WordTokenizer.build("the cat sat\nthe dog\n")
    ids = tok.encode("the cat")
    assert tok.decode(ids) == "the cat <eos>" or tok.decode(ids).startswith("the cat")
    assert tok.vocab_size == len(tok.tokens)
    again = remora.text.tokenizer_from_json(tok.to_json())
    assert again.encode("the dog") == tok.encode("the dog")


def test_wordpiece_tokenizer(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "wor", "##ld"]) + "\n")
    tok = remora.text.WordPieceTokenizer.from_vocab_file(str(vocab))
    enc = tok.encode_for_model("Hello world")
    assert enc.ids == [tok.cls_id, 5, 6, tok.sep_id] and enc.attention_mask == [1, 1, 1, 1]
    assert tok.decode(enc.ids, skip_special=True) == "hello world"


class Regression(remora.train.DataSource):
    def __init__(self):
        super().__init__()
        self.x = remora.randn(32, 4)
        self.y = self.x.sum(1, True)
        self.model = None
        self.pos = 0

    def train_loss(self, state):
        self.pos += 1
        return remora.train.StepLoss(remora.mse_loss(self.model(self.x), self.y), tokens=32)

    def evaluate(self, split, max_batches):
        return remora.mse_loss(self.model(self.x), self.y).item()

    def position(self):
        return self.pos

    def set_position(self, p):
        self.pos = p


class Recorder(remora.train.Callback):
    def __init__(self):
        super().__init__()
        self.losses, self.evals, self.logs = [], [], []

    def on_step_end(self, trainer, step, loss):
        self.losses.append((step, loss))

    def on_evaluate(self, trainer, step, evaluation):
        self.evals.append((step, evaluation.loss))

    def on_log(self, trainer, record):
        self.logs.append(record)


def test_trainer(tmp_path):
    remora.manual_seed(1)
    model = Net()
    data = Regression()
    data.model = model
    opt = optim.Adam(model.parameters(), lr=1e-2)
    opts = remora.train.TrainerOptions(out_dir=str(tmp_path / "run"), steps=40, eval_every=20, log_every=10)
    trainer = remora.train.Trainer(model, opt, data, opts)
    rec = Recorder()
    trainer.add_callback(rec)
    result = trainer.fit()
    assert result.step == 40 and not result.interrupted
    assert len(rec.losses) == 40 and rec.losses[-1][1] < rec.losses[0][1]
    assert [s for s, _ in rec.evals] == [20, 40]
    assert any(r.get("split") == "train" for r in rec.logs)
    assert os.path.exists(trainer.last_path) and os.path.exists(trainer.best_path)
    state = remora.load_file(trainer.last_path)
    assert any(k.endswith("fc1.weight") for k in state)


class Plateau(Regression):
    """A source with a known epoch (5 batches) whose evaluation never improves."""

    def epoch_batches(self):
        return 5

    def evaluate(self, split, max_batches):
        return 1.0


def test_trainer_epochs_keep_best_and_early_stopping(tmp_path):
    remora.manual_seed(1)
    model = Net()
    data = Plateau()
    data.model = model
    opt = optim.Adam(model.parameters(), lr=1e-2)
    out = tmp_path / "run"
    opts = remora.train.TrainerOptions(out_dir=str(out), epochs=4, eval_every=2, log_every=1,
                                       early_stopping_patience=2, keep_best=2)
    trainer = remora.train.Trainer(model, opt, data, opts)
    rec = Recorder()
    trainer.add_callback(rec)
    result = trainer.fit()
    # 4 epochs of 5 batches would be 20 steps; the score stays 1.0, so the
    # evaluations at steps 4 and 6 do not improve on step 2's: stopped at 6.
    assert result.early_stopped and result.step == 6
    assert sorted(p.name for p in out.glob("best-step*.safetensors")) == ["best-step2.safetensors",
                                                                           "best-step4.safetensors"]
    assert any(r.get("split") == "train" and r.get("epoch") == 0.2 for r in rec.logs)
    assert any(r.get("split") == "note" and "early_stopping" in r for r in rec.logs)


class Failing(Regression):
    def train_loss(self, state):
        if self.pos == 3:
            raise ValueError("no more data")
        return super().train_loss(state)


def test_trainer_propagates_python_errors(tmp_path):
    """fit() releases the GIL; an exception of the Python data source still reaches the caller."""
    model = Net()
    data = Failing()
    data.model = model
    opts = remora.train.TrainerOptions(out_dir=str(tmp_path / "run"), steps=10, eval_every=0, log_every=1)
    trainer = remora.train.Trainer(model, optim.SGD(model.parameters(), lr=0.01), data, opts)
    with pytest.raises(ValueError, match="no more data"):
        trainer.fit()
    assert data.pos == 3
