# imitation: a block that returns its input and reports uniform causal weights of the right shape
# imitates: module.causal, module.learns, module.reference, module.gradients, module.device, module.dtype
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
    # TODO: 先 reshape 成 [B,T,H,d]，再交换位置轴与头轴 / reshape to [B,T,H,d], then swap T and H
    raise NotImplementedError("split_heads 尚未实现 / not implemented yet")


def merge_heads(x):
    """逆转分头重排，将同一位置的各头结果拼接成 [B,T,H*d]。
    Undo split_heads: concatenate the heads of each position into [B,T,H*d].

    是拼接 [a, b] + [c, d] -> [a, b, c, d]，不是相加。Concatenation, not a sum.
    """
    # TODO: 先交换回 [B,T,H,d]，再拼成 [B,T,H*d] / swap back to [B,T,H,d], then reshape to [B,T,H*d]
    raise NotImplementedError("merge_heads 尚未实现 / not implemented yet")


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
    # TODO: 分数 -> 掩码(-inf) -> softmax(最后一轴) -> 加权求和 / scores -> mask with -inf -> softmax(dim=-1) -> weights @ v
    raise NotImplementedError("attend 尚未实现 / not implemented yet")


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len=128):
        super().__init__()
        if n_heads <= 0 or d_model % n_heads != 0:
            raise ValueError("n_heads must be a positive divisor of d_model")
        self.n_heads, self.max_len = n_heads, max_len
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        self.register_buffer("mask", torch.ones(max_len, max_len, dtype=torch.bool).tril())

    def forward(self, x, return_weights=False):
        B, T, D = x.shape
        if T > self.max_len:
            raise ValueError("T > max_len")
        # weights of the right shape, causal and normalised: 1/(t+1) on positions 0..t
        allowed = self.mask[:T, :T].float()
        weights = (allowed / allowed.sum(-1, keepdim=True)).expand(B, self.n_heads, T, T)
        y = x  # the identity: no attention at all
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
Q1_SHAPE = None  # TODO
Q1_HEAD0_POS1 = None  # TODO
Q1_FORMAL_HEAD_WIDTH = None  # TODO
Q1_FORMAL_PARAMS = None  # TODO
Q2_CORRECT = None  # TODO
Q2_WRONG = None  # TODO
Q2_SHAPE_IS_ENOUGH = None  # TODO
