import torch

from trainer.model import Net, parameter_count


def test_parameter_count_matches_the_kubeflow_example():
    assert parameter_count(Net()) == 431_080


def test_output_is_log_probabilities_for_ten_classes():
    out = Net()(torch.randn(3, 1, 28, 28))
    assert out.shape == (3, 10)
    assert torch.allclose(out.exp().sum(dim=1), torch.ones(3), atol=1e-5)


def test_state_dict_keys_are_the_seed_scripts():
    assert list(Net().state_dict()) == [
        "conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
        "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
    ]
