"""The work layer: the jobs Arena runs and one way to run them, in the daemon or on a Ray worker.

Between `diagnose` and `trainer`: it knows the lower packages' objects (tasks, environments,
episodes, models) and neither the trainer nor the daemon, so evaluation, training's rollouts and a
cluster worker run an episode through the same code (`work.tasks`, `work.episode`).
"""
