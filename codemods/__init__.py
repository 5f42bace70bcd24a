"""gradfix: find and fix PyTorch autograd bugs by rewriting source code."""

__version__ = "0.1.0"
