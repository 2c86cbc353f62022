"""DDP trainer for the Kubeflow MNIST/FashionMNIST CNN, built to run inside PyTorchJob pods.

The release version is pyproject.toml's alone (tests/test_versions.py): an installed trainer reports it
as importlib.metadata.version("pytorchjob-mnist").
"""
