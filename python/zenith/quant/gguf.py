"""placeholder"""


def load_gguf(path):
    raise NotImplementedError
