# hostile: a file that defines none of the exercise's names (only a helper and a print): an
# empty attempt, like the stub, may earn no check by what it does not do (no library attention,
# no mask parameter, no device mistake)
import torch


def helper(x):
    return torch.relu(x)


print("nothing to see here")
