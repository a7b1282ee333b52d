"""Arena core: environments, tasks, verification, episodes, synthesis and the store.

This package is the bottom layer: it imports none of `simulate`, `curriculum`, `diagnose`,
`work`, `trainer` or `ops`. It defines the small protocols (`ChatModel`, `UserSimulator`) those layers
implement.
"""
