import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    # Tests compile many modules with the same forward code (nn.Sequential); without a
    # reset Dynamo's recompile limit would silently send later tests to eager.
    torch._dynamo.reset()
    torch.manual_seed(0)
    yield
