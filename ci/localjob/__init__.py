"""Local runner for charts/pytorchjob-mnist: the PyTorchJob's replicas as local processes.

render runs `helm template` and picks out the PyTorchJob, operator_env holds the training-operator's
pod contract as pure functions, pods turns the PyTorchJob into local process plans, supervisor runs
them with the operator's restart rules, and cli (`python -m ci.localjob`) ties them together.
"""
