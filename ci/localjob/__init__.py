"""Local runner for charts/pytorchjob-mnist: the PyTorchJob's replicas, or the TrainJob's nodes, as local
processes.

render runs `helm template` and picks out the job; operator_env (training-operator v1) and trainer_env
(Trainer v2's torch runtime) hold each controller's pod contract as pure functions; jobs wraps a rendered
job in a model of its kind (its pods, their injected env, its completion rules); pods turns the model's
pods into local process plans, supervisor runs them with the pods' restart rules, and cli
(`python -m ci.localjob`) ties them together.
"""
