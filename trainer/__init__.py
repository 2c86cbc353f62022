"""DDP trainer for the Kubeflow MNIST/FashionMNIST CNN, built to run inside PyTorchJob pods."""

__version__ = "0.1.0"
