# In-process A/B of one switch of ab_switches.diff on a whole torchvision model (ab_common).
# From the repository root, after `git apply` of ab_switches.diff and
# `make .venv/.zenith-installed`:
#   [ZENITH_NO_AVX512=1] .venv/bin/python <this dir>/ab_model.py mobilenet-v2 8 40 ZC
import os
import sys

import torch
import torchvision

import zenith

sys.path.insert(0, os.path.dirname(__file__))
from ab_common import interleave, line  # noqa: E402

torch.set_num_threads(2)
name, N, R, var = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
torch.manual_seed(0)
m = (torchvision.models.resnet50() if name == "resnet50" else torchvision.models.mobilenet_v2()).eval()
x = torch.randn(N, 3, 224, 224)
with torch.no_grad():
    ref = m(x)
print(line(f"{name} b{N} ({var}=1 is old)", interleave(zenith.compile(m), x, ref, var, R, skip=3)))
