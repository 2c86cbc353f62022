"""Local runner for charts/pytorchjob-mnist: every pod of the chart's job as a local process.

render runs `helm template` and picks out the job; kinds/ holds one module per job kind (PyTorchJob,
TrainJob, PyTorchTrainingJob), each its controller's whole contract: the pods and what it injects into
them, how it restarts them, when the job succeeds or fails; pods turns a kind's pods into local process
plans, supervisor runs them by the kind's rules, and cli (`python -m ci.localjob`) ties them together.
None of these but kinds/ knows a kind.
"""
