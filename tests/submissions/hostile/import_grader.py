# hostile: imports the grader package to borrow its reference solution and answers; this must fail
# in the worker (its sys.path has no grader), so nothing here can run
import grader  # noqa: F401
from grader.reference import ref

split_heads = ref.split_heads
merge_heads = ref.merge_heads
attend = ref.attend
CausalSelfAttention = ref.CausalSelfAttention
Q1_SHAPE, Q1_HEAD0_POS1 = ref.Q1_SHAPE, ref.Q1_HEAD0_POS1
Q1_FORMAL_HEAD_WIDTH, Q1_FORMAL_PARAMS = ref.Q1_FORMAL_HEAD_WIDTH, ref.Q1_FORMAL_PARAMS
Q2_CORRECT, Q2_WRONG, Q2_SHAPE_IS_ENOUGH = ref.Q2_CORRECT, ref.Q2_WRONG, ref.Q2_SHAPE_IS_ENOUGH
