import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# A converter that fails with anything but Unsupported is a bug: users get a visible
# fallback (partition._check_node), the tests (and their worker processes) an error.
os.environ.setdefault("ZENITH_STRICT_IMPORTER", "1")


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    # Tests compile many modules with the same forward code (nn.Sequential); without a
    # reset Dynamo's recompile limit would silently send later tests to eager.
    torch._dynamo.reset()
    torch.manual_seed(0)
    yield
