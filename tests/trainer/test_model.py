import torch
import torch.nn.functional as F

from trainer.model import Net, fold_input_normalization


def test_parameter_count_matches_the_kubeflow_example():
    assert sum(p.numel() for p in Net().parameters()) == 431_080


def test_output_is_log_probabilities_for_ten_classes():
    out = Net()(torch.randn(3, 1, 28, 28))
    assert out.shape == (3, 10)
    assert torch.allclose(out.exp().sum(dim=1), torch.ones(3), atol=1e-5)


def test_log_probabilities_stay_fp32_under_cpu_bf16_autocast():
    # CPU autocast (unlike CUDA's) would leave log_softmax in bf16, rounding the loss's input.
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = Net()(torch.randn(3, 1, 28, 28))
    assert out.dtype == torch.float32
    assert torch.allclose(out.exp().sum(dim=1), torch.ones(3), atol=1e-5)


def test_state_dict_keys_are_the_seed_scripts():
    assert list(Net().state_dict()) == [
        "conv1.weight",
        "conv1.bias",
        "conv2.weight",
        "conv2.bias",
        "fc1.weight",
        "fc1.bias",
        "fc2.weight",
        "fc2.bias",
    ]


def _seed_forward(net, x):
    """The Kubeflow example's forward pass, relu before pooling."""
    x = F.max_pool2d(F.relu(net.conv1(x)), 2, 2)
    x = F.max_pool2d(F.relu(net.conv2(x)), 2, 2)
    x = F.relu(net.fc1(x.view(-1, 4 * 4 * 50)))
    return F.log_softmax(net.fc2(x), dim=1)


def test_same_outputs_and_gradients_as_the_seed_forward():
    torch.manual_seed(0)
    net, x = Net(), torch.randn(16, 1, 28, 28)
    target = torch.randint(0, 10, (16,))
    ours = net(x)
    F.nll_loss(ours, target).backward()
    our_grads = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    seed = _seed_forward(net, x)
    F.nll_loss(seed, target).backward()
    assert torch.allclose(ours, seed, atol=1e-6)
    for mine, theirs in zip(our_grads, (p.grad for p in net.parameters()), strict=True):
        assert torch.allclose(mine, theirs, atol=1e-6)


def test_folding_the_input_normalization_gives_the_same_outputs_on_raw_pixels():
    torch.manual_seed(0)
    trained, pixels = Net(), torch.rand(8, 1, 28, 28)
    mean, std = 0.2860, 0.3530  # FashionMNIST's
    raw = Net()
    raw.load_state_dict(fold_input_normalization(trained.state_dict(), mean, std))
    with torch.no_grad():
        assert torch.allclose(raw(pixels), trained((pixels - mean) / std), atol=1e-5)
    assert torch.equal(raw.conv2.weight, trained.conv2.weight), "only conv1 changes"
