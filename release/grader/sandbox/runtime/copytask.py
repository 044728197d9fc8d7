"""The training demo: a tiny language model around the attention block, on the repeat task.

Each row of a batch is one id repeated over the context (the next token equals the last one); a
batch holds every id once.  The worker trains the student's block with it, the judge re-evaluates
the trained weights with it, and the lesson demo plots it.
"""
import math

import torch
from torch import nn

VOCAB, D_MODEL, N_HEADS, CONTEXT = 64, 32, 4, 12
# With every id in every step, no id is left unlearned, however a correct block is initialised
# (the check asks a mean loss < 1.0; correct files stay below 0.05).
EPOCHS, STEPS_PER_EPOCH, LR = 3, 3, 5e-2


def every_id_batch(generator, context=CONTEXT, vocab=VOCAB):
    """(inputs, targets), each [vocab, context]: one row of every id, in a random order."""
    ids = torch.randperm(vocab, generator=generator).view(vocab, 1)  # [V,1]
    rows = ids.expand(vocab, context + 1)  # [V,T+1]
    return rows[:, :-1], rows[:, 1:]


class TinyLM(nn.Module):
    """Token embedding + position embedding -> attention block -> LM head (no residual, so every
    gradient must flow through the block)."""

    def __init__(self, attention, vocab=VOCAB, d_model=D_MODEL, context=CONTEXT):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(context, d_model)
        self.attn = attention
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, ids, return_weights=False):
        positions = torch.arange(ids.shape[1], device=ids.device)  # [T]
        h = self.tok(ids) + self.pos(positions)  # [B,T,D]
        out = self.attn(h, return_weights=return_weights)
        h, weights = out if return_weights else (out, None)
        logits = self.head(h)  # [B,T,vocab]
        return (logits, weights) if return_weights else logits


def seed_cpu(seed):
    """torch.manual_seed(seed) for the CPU's generator only (torch.manual_seed also queues a lazy
    seeding of CUDA, with a formatted stack of the caller)."""
    torch.default_generator.manual_seed(seed)


def train(attention_cls, seed=0, n_heads=N_HEADS, on_step=None):
    """Train TinyLM(attention_cls(D_MODEL, n_heads, CONTEXT)); return (model, mean loss per epoch)."""
    seed_cpu(seed)
    model = TinyLM(attention_cls(D_MODEL, n_heads, CONTEXT))
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR, fused=True)
    first = None
    epoch_losses = []
    for _ in range(EPOCHS):
        total = 0.0
        for _ in range(STEPS_PER_EPOCH):
            inputs, targets = every_id_batch(generator)
            logits = model(inputs)  # [B,T,vocab]
            loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                targets.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            first = loss.item() if first is None else first
            total += loss.item()
            if on_step is not None:
                on_step(loss.item())
        epoch_losses.append(total / STEPS_PER_EPOCH)
    return model, [first] + epoch_losses


def chance_loss(vocab=VOCAB):
    return math.log(vocab)
