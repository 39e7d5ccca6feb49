"""What a person looks at: the dashboard, plots, figures (every chapter).

Its modules' names are for labkit and tests (``lk.Dashboard``, ``lk.plot_throughput`` and
``lk.plot_scaling`` are the public ones).
"""

__all__: list[str] = []
