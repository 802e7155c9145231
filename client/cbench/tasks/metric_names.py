"""The names of the task metrics and task types, without torch (``cbench --help`` lists them;
the metrics themselves are :mod:`cbench.tasks.metrics`)."""

METRICS = ("kl", "l2", "ce", "mae", "mse", "logit_diff")
TASK_TYPES = ("categorical", "numerical")
