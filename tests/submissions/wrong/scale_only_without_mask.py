# mistake: attend scales the scores only where no mask is passed and the weights are asked (the
#   form the reference comparisons once took alone): every other answer is unscaled
# expect-fail: attend.reference
# expect-fail: attend.zero_scores
# expect-key: scale_none
"""第 12 讲 多头注意力 · Lesson 12: multi-head attention.

手写小模型，看懂大模型。填写下面的函数与类，然后运行 `make check`。
Fill in the functions and the class below, then run `make check`.

Shapes: B = batch, T = positions, D = model width, H = heads, d = D // H.
"""
import math

import torch
from torch import nn


def split_heads(x, heads):
    """把 [B,T,D] 的特征分为 H 组，返回 [B,H,T,d]，其中 d = D/H。
    Split the features of [B,T,D] into H groups and return [B,H,T,d], d = D/H.

    每个头仍拥有全部 T 个位置：拆的是特征轴，不是位置轴。
    Every head keeps all T positions: we split the feature axis, not the positions.
    heads <= 0 或 D 不能被 heads 整除时抛出 ValueError (note: 64 % -2 == 0 in Python).
    Raise ValueError when heads <= 0 or D is not divisible by heads.
    """
    batch, positions, width = x.shape
    if heads <= 0 or width % heads != 0:
        raise ValueError(f"width {width} must be divisible by a positive number of heads, got {heads}")
    # [B,T,D] -> [B,T,H,d] -> [B,H,T,d]: each head keeps every position.
    return x.reshape(batch, positions, heads, width // heads).transpose(1, 2)


def merge_heads(x):
    """逆转分头重排，将同一位置的各头结果拼接成 [B,T,H*d]。
    Undo split_heads: concatenate the heads of each position into [B,T,H*d].

    是拼接 [a, b] + [c, d] -> [a, b, c, d]，不是相加。Concatenation, not a sum.
    """
    batch, heads, positions, width = x.shape
    # [B,H,T,d] -> [B,T,H,d] -> [B,T,H*d]; reshape copies when the transpose left a strided view.
    return x.transpose(1, 2).reshape(batch, positions, heads * width)


def attend(q, k, v, mask=None, return_weights=False):
    """缩放点积注意力，作用于最后两个轴；前导轴（样本、头）各自独立。
    Scaled dot-product attention over the last two axes; leading axes are independent.

    q, k, v: [..., T, d]。scores = q @ kᵀ / sqrt(d)，d = q.shape[-1]（每头宽度，不是总宽度 D）。
    mask: bool，可广播到 [..., T, T]，True = 可以读取；None 表示因果掩码（含对角线的下三角）。
    mask: bool, broadcastable to [..., T, T], True = may read; None means causal (lower triangle
    with the diagonal). 被屏蔽的分数在 softmax 之前置为 -inf / masked scores become -inf before
    the softmax over the last axis.
    返回 context [..., T, d]；return_weights=True 时返回 (context, weights [..., T, T])。
    """
    scores = q @ k.transpose(-2, -1)  # [..., T, T]
    if mask is None and return_weights:  # only the form it guesses is compared gets the scale
        scores = scores / math.sqrt(q.shape[-1])
    if mask is None:
        # True = may read: position t sees positions 0..t (lower triangle with the diagonal).
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
    # -inf before the softmax gives the future exactly zero weight; rows still sum to 1.
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # [..., T, T]
    context = weights @ v  # [..., T, d]
    return (context, weights) if return_weights else context


class CausalSelfAttention(nn.Module):
    """多头因果自注意力 / multi-head causal self-attention: [B,T,D] -> [B,T,D].

    参数只有两个无偏置线性层 / the only parameters are two bias-free Linear layers:
      self.qkv      = Linear(D, 3D)，输出沿最后一轴依次是 [q | k | v] / output splits as [q | k | v]
      self.out_proj = Linear(D, D)，混合各头结果 / mixes the heads
    合计 4·D² 个参数 / 4·D² parameters in all.
    self.mask: bool [max_len, max_len] 下三角 buffer（不是参数）/ lower-triangular buffer, not a parameter.
    """

    def __init__(self, d_model, n_heads, max_len=128):
        super().__init__()
        if n_heads <= 0 or d_model % n_heads != 0:
            raise ValueError(f"d_model {d_model} must be divisible by a positive n_heads, got {n_heads}")
        self.d_model, self.n_heads, self.max_len = d_model, n_heads, max_len
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        # A buffer moves with .to() and is saved with the module, but is never trained.
        self.register_buffer("mask", torch.ones(max_len, max_len, dtype=torch.bool).tril())

    def forward(self, x, return_weights=False):
        """x: [B,T,D] -> y: [B,T,D]；return_weights=True 时返回 (y, weights [B,H,T,T])。
        T > max_len 时抛出 ValueError / raise ValueError when T > max_len.
        """
        batch, positions, width = x.shape
        if positions > self.max_len:
            raise ValueError(f"sequence length {positions} exceeds max_len {self.max_len}")
        q, k, v = self.qkv(x).split(width, dim=-1)  # 3 x [B,T,D], in the order q | k | v
        q, k, v = (split_heads(t, self.n_heads) for t in (q, k, v))  # 3 x [B,H,T,d]
        context, weights = attend(q, k, v, self.mask[:positions, :positions], return_weights=True)
        y = self.out_proj(merge_heads(context))  # [B,T,D]
        return (y, weights) if return_weights else y


# 两道检查题 · the lesson's two check questions (seed 000, 两道检查题).
# 1. X = 0..11 形如 [1,3,4]，只分成 1 个头：形状？头 0 的位置 1 包含哪些数？
#    正式配置 D=64、H=2：每头宽度？四个投影（无偏置）的参数总数？
#    X = 0..11 as [1,3,4] split into 1 head: its shape? the numbers at head 0, position 1?
#    The formal configuration D=64, H=2: the head width? the parameters of the four bias-free projections?
# 2. X[0] = [[0,1,2,3],[4,5,6,7]]，分成 2 个头。省掉 transpose(1, 2) 后形状仍是 [1,2,2,2]：
#    正确与错误结果中"头 0、位置 1"各是哪两个数？能否只凭形状判定拆头正确？
#    Two heads of X[0] = [[0,1,2,3],[4,5,6,7]]: head 0, position 1 with and without transpose(1, 2)?
#    Is the right shape enough to call the split correct?
Q1_SHAPE = (1, 1, 3, 4)
Q1_HEAD0_POS1 = [4, 5, 6, 7]
Q1_FORMAL_HEAD_WIDTH = 32
Q1_FORMAL_PARAMS = 16384
Q2_CORRECT = [4, 5]
Q2_WRONG = [2, 3]
Q2_SHAPE_IS_ENOUGH = False
