"""第 12 讲 多头注意力
Lesson 12: multi-head attention.

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
    heads <= 0 或 D 不能被 heads 整除时抛出 ValueError（注意 Python 中 64 % -2 == 0）。
    Raise ValueError when heads <= 0 or D is not divisible by heads (note: 64 % -2 == 0 in Python).
    """
    # TODO: 先 reshape 成 [B,T,H,d]，再交换位置轴与头轴 / reshape to [B,T,H,d], then swap T and H
    raise NotImplementedError("split_heads 尚未实现 / not implemented yet")


def merge_heads(x):
    """逆转分头重排，将同一位置的各头结果拼接成 [B,T,H*d]。
    Undo split_heads: concatenate the heads of each position into [B,T,H*d].

    是拼接 [a, b] + [c, d] -> [a, b, c, d]，不是相加。
    Concatenation, not a sum.
    """
    # TODO: 先交换回 [B,T,H,d]，再拼成 [B,T,H*d] / swap back to [B,T,H,d], then reshape to [B,T,H*d]
    raise NotImplementedError("merge_heads 尚未实现 / not implemented yet")


def attend(q, k, v, mask=None, return_weights=False):
    """缩放点积注意力，作用于最后两个轴；前导轴（样本、头）各自独立。
    Scaled dot-product attention over the last two axes; leading axes are independent.

    q, k, v: [..., T, d]。scores = q @ kᵀ / sqrt(d)，d = q.shape[-1]（每头宽度，不是总宽度 D）。
    mask: bool，可广播到 [..., T, T]，True = 可以读取；None 表示因果掩码（含对角线的下三角）。
    mask: bool, broadcastable to [..., T, T], True = may read; None means causal (lower triangle
    with the diagonal).
    被屏蔽的分数在 softmax（沿最后一轴）之前置为 -inf。
    Masked scores become -inf before the softmax over the last axis.
    返回 context [..., T, d]；return_weights=True 时返回 (context, weights [..., T, T])。
    """
    # TODO: 分数 -> 掩码(-inf) -> softmax(最后一轴) -> 加权求和 / scores -> mask with -inf -> softmax(dim=-1) -> weights @ v
    raise NotImplementedError("attend 尚未实现 / not implemented yet")


class CausalSelfAttention(nn.Module):
    """多头因果自注意力 / multi-head causal self-attention: [B,T,D] -> [B,T,D].

    参数只有两个无偏置线性层 / the only parameters are two bias-free Linear layers:
      self.qkv      = Linear(D, 3D)，输出沿最后一轴依次是 [q | k | v] / output splits as [q | k | v]
      self.out_proj = Linear(D, D)，混合各头结果 / mixes the heads
    合计 4·D² 个参数 / 4·D² parameters in all.
    self.mask: bool [max_len, max_len] 下三角 buffer（不是参数）。
    self.mask: a lower-triangular bool [max_len, max_len] buffer, not a parameter.
    """

    def __init__(self, d_model, n_heads, max_len=128):
        super().__init__()
        # TODO: 检查 n_heads，建 qkv、out_proj 和 mask buffer / validate n_heads, build qkv, out_proj and the mask buffer
        raise NotImplementedError("CausalSelfAttention.__init__ 尚未实现 / not implemented yet")

    def forward(self, x, return_weights=False):
        """x: [B,T,D] -> y: [B,T,D]；return_weights=True 时返回 (y, weights [B,H,T,T])。
        T > max_len 时抛出 ValueError / raise ValueError when T > max_len.
        """
        # TODO: 投影 -> 分头 -> attend(截取 mask[:T, :T]) -> 合头 -> 输出投影 / project, split, attend, merge, project
        raise NotImplementedError("CausalSelfAttention.forward 尚未实现 / not implemented yet")


# 第 12 讲「两道检查题」：每个答案上面的两行注释写着它的格式。
# The lesson's two check questions: the two comment lines above each answer say its form.
# 1. X = 0..11 形如 [1,3,4]，只分成 1 个头：形状？头 0 的位置 1 包含哪些数？
#    正式配置 D=64、H=2：每头宽度？四个投影（无偏置）的参数总数？
#    X = 0..11 as [1,3,4] split into 1 head: its shape? the numbers at head 0, position 1?
#    The formal configuration D=64, H=2: the head width? the parameters of the four bias-free projections?
# 2. X[0] = [[0,1,2,3],[4,5,6,7]]，分成 2 个头。省掉 transpose(1, 2) 后形状仍是 [1,2,2,2]：
#    正确与错误结果中"头 0、位置 1"各是哪两个数？能否只凭形状判定拆头正确？
#    Two heads of X[0] = [[0,1,2,3],[4,5,6,7]]: head 0, position 1 with and without transpose(1, 2)?
#    Is the right shape enough to call the split correct?
# Q1_SHAPE：整数元组，例如 (2, 5, 3)
# Q1_SHAPE: a tuple of ints, e.g. (2, 5, 3)
Q1_SHAPE = None  # TODO
# Q1_HEAD0_POS1：数字列表，例如 [7, 8]
# Q1_HEAD0_POS1: a list of numbers, e.g. [7, 8]
Q1_HEAD0_POS1 = None  # TODO
# Q1_FORMAL_HEAD_WIDTH：整数，例如 10
# Q1_FORMAL_HEAD_WIDTH: an int, e.g. 10
Q1_FORMAL_HEAD_WIDTH = None  # TODO
# Q1_FORMAL_PARAMS：整数，例如 10
# Q1_FORMAL_PARAMS: an int, e.g. 10
Q1_FORMAL_PARAMS = None  # TODO
# Q2_CORRECT：数字列表，例如 [7, 8]
# Q2_CORRECT: a list of numbers, e.g. [7, 8]
Q2_CORRECT = None  # TODO
# Q2_WRONG：数字列表，例如 [7, 8]
# Q2_WRONG: a list of numbers, e.g. [7, 8]
Q2_WRONG = None  # TODO
# Q2_SHAPE_IS_ENOUGH：True 或 False
# Q2_SHAPE_IS_ENOUGH: True or False
Q2_SHAPE_IS_ENOUGH = None  # TODO
