"""The seed guides' entry point: their PyTorchJob (simple.yaml) runs `python3 /opt/pytorch-mnist/mnist.py
--epochs=1`, and the image answers that path with this trainer. It takes the seed script's flags with their
meaning and defaults (FashionMNIST, batch 64, lr 0.01, momentum 0.5, seed 1, TensorBoard events in logs/),
so a job that only swaps the image trains and reports as before, through mnist-train."""

from trainer.cli import main

raise SystemExit(main())
